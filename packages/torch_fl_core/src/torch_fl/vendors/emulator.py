"""Test controls of a native vendor's SDK emulator, through ctypes.

A native vendor built against its SDK's emulator (``lib/sdk.json``: ``"emulator": "TRUE"``) can
reach the emulator's test controls (fault injection by SDK function name, call counts, live
allocations) in the very SDK runtime library the vendor loaded, so their state is the runtime's.
Each emulator names its controls ``<prefix><Control>`` (``topsEmuCallCount``, ``aclEmuLiveBytes``);
the vendor's ``emulator`` module declares its prefix, its status names and its own controls.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = ["EmulatorControls"]

#: The controls every emulator has: name -> (argtypes, restype).
_COMMON: dict[str, tuple[list[Any], Any]] = {
    "InjectFault": ([ctypes.c_char_p, ctypes.c_int, ctypes.c_int], ctypes.c_int),
    "CallCount": ([ctypes.c_char_p], ctypes.c_uint64),
    "LiveAllocations": ([ctypes.c_int], ctypes.c_uint64),
    "LiveBytes": ([ctypes.c_int], ctypes.c_uint64),
}


class EmulatorControls:
    """The controls of one vendor's emulator. ``package``: the vendor's package; ``prefix``: its
    controls' prefix; ``statuses``: the SDK status names tests inject, with their values;
    ``controls``: the emulator's other controls, name without prefix -> (argtypes, restype)."""

    def __init__(
        self,
        package: str,
        prefix: str,
        statuses: Mapping[str, int],
        controls: Mapping[str, tuple[list[Any], Any]],
    ) -> None:
        self.package = package
        self.prefix = prefix
        self.statuses = dict(statuses)
        self.controls = {**_COMMON, **controls}
        self.library = functools.cache(self._open)

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
            fn = getattr(lib, self.prefix + name)
            fn.argtypes = argtypes
            fn.restype = restype
        return lib

    def call(self, control: str, *args: Any) -> Any:
        """``<prefix><control>(*args)``."""
        return getattr(self.library(), self.prefix + control)(*args)

    def status(self, status: str | int) -> int:
        """A status name of :attr:`statuses`, or a value, as the value."""
        return status if isinstance(status, int) else self.statuses[status]

    def check_fault(self, rc: int, call: str, status: str | int) -> None:
        if rc != 0:
            raise ValueError(f"the emulator rejected the fault {call!r} -> {status!r}")

    def call_count(self, call: str) -> int:
        return int(self.call("CallCount", call.encode()))

    def live_allocations(self, device: int) -> int:
        return int(self.call("LiveAllocations", device))

    def live_bytes(self, device: int) -> int:
        return int(self.call("LiveBytes", device))

    @staticmethod
    @contextlib.contextmanager
    def scoped(inject: Callable[[], None], clear: Callable[[], None]) -> Iterator[None]:
        """``inject()`` now, ``clear()`` when the block leaves (a vendor's ``fault``)."""
        inject()
        try:
            yield
        finally:
            clear()
