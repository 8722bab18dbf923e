"""Test controls of a native vendor's SDK emulator, through ctypes.

A native vendor built against its SDK's emulator (``lib/sdk.json``: ``"emulator": "TRUE"``) can
reach the emulator's test controls in the very SDK runtime library the vendor loaded, so their
state is the runtime's. Every emulator on the emulator framework has the same controls, named
``<prefix><Control>`` (``topsEmuInjectFault``, ``aclEmuLiveBytes``): faults by SDK function name
(the nth call from now fails with a status; faults add up), call counters, the violation record
(contract violations the emulator detected), a reset, live allocations. The vendor's ``emulator``
module names its prefix and status values and adds its own controls.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["CONTROLS", "EmulatorControls"]

#: The framework's controls: name -> (argtypes, restype).
_COMMON: dict[str, tuple[list[Any], Any]] = {
    "InjectFault": ([ctypes.c_char_p, ctypes.c_int, ctypes.c_int], ctypes.c_int),
    "ClearFaults": ([], None),
    "Reset": ([], None),
    "CallCount": ([ctypes.c_char_p], ctypes.c_uint64),
    "ViolationCount": ([], ctypes.c_uint64),
    "LastViolation": ([], ctypes.c_char_p),
    "LiveAllocations": ([ctypes.c_int], ctypes.c_uint64),
    "LiveBytes": ([ctypes.c_int], ctypes.c_uint64),
}


#: The module-level functions a vendor's ``emulator`` module offers (:meth:`EmulatorControls.export`).
CONTROLS = (
    "available",
    "call_count",
    "clear_faults",
    "fault",
    "inject_fault",
    "last_violation",
    "library",
    "live_allocations",
    "live_bytes",
    "reset",
    "violation_count",
)


class EmulatorControls:
    """The controls of one vendor's emulator. ``package``: the vendor's package; ``prefix``: its
    controls' prefix; ``statuses``: the SDK status names tests inject, with their values;
    ``controls``: the emulator's own controls, name without prefix -> (argtypes, restype);
    ``clears``: what :meth:`clear_faults` calls, ``"ClearFaults"`` (faults only) or ``"Reset"``
    (counters and the violation record too, so each test starts from zero)."""

    def __init__(
        self,
        package: str,
        prefix: str,
        statuses: Mapping[str, int],
        controls: Mapping[str, tuple[list[Any], Any]] | None = None,
        *,
        clears: str = "ClearFaults",
    ) -> None:
        self.package = package
        self.prefix = prefix
        self.statuses = dict(statuses)
        self.clears = clears
        self.controls = {**_COMMON, **(controls or {})}
        self.library = functools.cache(self._open)

    def export(self, namespace: dict[str, Any]) -> None:
        """Binds :data:`CONTROLS` into a vendor's ``emulator`` module (``globals()``), so tests
        call ``emulator.inject_fault(...)``."""
        for name in CONTROLS:
            namespace[name] = getattr(self, name)

    def available(self) -> bool:
        """Whether the package was built against the emulator."""
        info = importlib.import_module(self.package).sdk_info()
        return info.get("emulator", "FALSE").upper() in {"TRUE", "ON", "1"}

    def _open(self) -> ctypes.CDLL:
        if not self.available():
            raise RuntimeError(
                f"{self.package.replace('_', '-')} was not built against its SDK's emulator"
            )
        sdk = importlib.import_module(f"{self.package}.sdk")
        lib = ctypes.CDLL(sdk.load().runtime)  # the loaded one: dlopen returns its handle
        for name, (argtypes, restype) in self.controls.items():
            # An emulator built before a control existed still serves the others; calling the
            # missing one raises AttributeError naming it.
            fn = getattr(lib, self.prefix + name, None)
            if fn is None:
                continue
            fn.argtypes = argtypes
            fn.restype = restype
        return lib

    def call(self, control: str, *args: Any) -> Any:
        """``<prefix><control>(*args)``."""
        return getattr(self.library(), self.prefix + control)(*args)

    def inject_fault(self, call: str, status: str | int, nth: int = 1) -> None:
        """Make the ``nth`` call (1: the next one) of SDK function ``call`` from now return
        ``status`` (a name of :attr:`statuses`, or its value) and do nothing else."""
        code = status if isinstance(status, int) else self.statuses[status]
        if self.call("InjectFault", call.encode(), nth, code) != 0:
            raise ValueError(f"the emulator rejected the fault {call!r} -> {status!r}")

    def clear_faults(self) -> None:
        """Drops every injected fault (and, where :attr:`clears` is ``"Reset"``, the counters and
        the violation record)."""
        self.call(self.clears)

    def reset(self) -> None:
        """Clears injected faults, call counters and the violation record (not allocations)."""
        self.call("Reset")

    @contextlib.contextmanager
    def fault(self, call: str, status: str | int, nth: int = 1) -> Iterator[None]:
        """:meth:`inject_fault` for the block; every fault is cleared when it leaves."""
        self.inject_fault(call, status, nth)
        try:
            yield
        finally:
            self.clear_faults()

    def call_count(self, call: str) -> int:
        return int(self.call("CallCount", call.encode()))

    def violation_count(self) -> int:
        return int(self.call("ViolationCount"))

    def last_violation(self) -> str:
        return (self.call("LastViolation") or b"").decode(errors="replace")

    def live_allocations(self, device: int) -> int:
        return int(self.call("LiveAllocations", device))

    def live_bytes(self, device: int) -> int:
        return int(self.call("LiveBytes", device))
