"""Test control of the built-in ``sim`` runtime (``libtorch_fl_sim.so``).

The sim runtime exports, beside ``tfl_runtime_get``, a few test-only C symbols
for fault injection and leak accounting. This module wraps them with ctypes.
It never imports torch, so runtime tests can use it without the torch glue.

``ctypes.CDLL`` on the same path returns the handle core already loaded (the
dynamic loader shares one copy of a library per process), so counters and
injected faults seen here are the ones core's runtime calls see.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "LIBRARY_ENV",
    "STATUS",
    "call_count",
    "clear_faults",
    "fault",
    "inject_fault",
    "library",
    "library_path",
    "live_allocations",
    "live_bytes",
    "status_code",
]

LIBRARY_ENV = "TORCH_FL_SIM_LIBRARY"
_LIBRARY_NAME = "libtorch_fl_sim.so"

# Mirrors enum tfl_status in include/torch_fl/runtime.h.
STATUS: dict[str, int] = {
    "TFL_OK": 0,
    "TFL_ERROR_INVALID_VALUE": 1,
    "TFL_ERROR_INVALID_DEVICE": 2,
    "TFL_ERROR_OUT_OF_MEMORY": 3,
    "TFL_ERROR_INVALID_POINTER": 4,
    "TFL_ERROR_INVALID_MEMCPY_KIND": 5,
    "TFL_ERROR_NOT_READY": 6,
    "TFL_ERROR_NOT_SUPPORTED": 7,
    "TFL_ERROR_INVALID_HANDLE": 8,
    "TFL_ERROR_NOT_INITIALIZED": 9,
    "TFL_ERROR_DEVICE": 10,
    "TFL_ERROR_INJECTED": 11,
    "TFL_ERROR_CAPTURE": 12,
    "TFL_ERROR_TIMEOUT": 13,
    "TFL_ERROR_ABORTED": 14,
}


def _candidates() -> list[Path]:
    here = Path(__file__).resolve().parent.parent  # the torch_fl package directory
    found = [here / "lib" / _LIBRARY_NAME]
    # An editable install splits the package: this file stays in the source
    # tree while built files live in site-packages; the package's search path
    # lists both (find_spec does not run torch_fl/__init__, so no torch import).
    try:
        spec = importlib.util.find_spec("torch_fl")
    except (ImportError, ValueError):
        spec = None
    for location in (spec.submodule_search_locations or []) if spec else []:
        path = Path(location).resolve() / "lib" / _LIBRARY_NAME
        if path not in found:
            found.append(path)
    return found


def library_path() -> str:
    """Path of ``libtorch_fl_sim.so``: ``$TORCH_FL_SIM_LIBRARY`` if set, else
    ``torch_fl/lib/`` of the installed package."""
    override = os.environ.get(LIBRARY_ENV)
    if override:
        return override
    candidates = _candidates()
    for path in candidates:
        if path.is_file():
            return str(path)
    return str(candidates[0])  # missing: the error names the expected place


@functools.cache
def library() -> ctypes.CDLL:
    """The loaded sim runtime library with the control symbols typed."""
    path = library_path()
    if not Path(path).is_file():
        raise FileNotFoundError(
            f"sim runtime library not found at {path}; build torch-fl-core or set {LIBRARY_ENV}"
        )
    lib = ctypes.CDLL(path)
    lib.tfl_sim_inject_fault.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    lib.tfl_sim_inject_fault.restype = ctypes.c_int
    lib.tfl_sim_clear_faults.argtypes = []
    lib.tfl_sim_clear_faults.restype = None
    lib.tfl_sim_call_count.argtypes = [ctypes.c_char_p]
    lib.tfl_sim_call_count.restype = ctypes.c_uint64
    lib.tfl_sim_live_allocations.argtypes = [ctypes.c_int]
    lib.tfl_sim_live_allocations.restype = ctypes.c_uint64
    lib.tfl_sim_live_bytes.argtypes = [ctypes.c_int]
    lib.tfl_sim_live_bytes.restype = ctypes.c_uint64
    return lib


def status_code(status: str | int) -> int:
    """``"TFL_ERROR_OUT_OF_MEMORY"``, ``"OUT_OF_MEMORY"`` or ``3`` -> ``3``."""
    if isinstance(status, int):
        if status not in STATUS.values():
            raise ValueError(f"unknown tfl_status {status}")
        return status
    for name in (status, f"TFL_{status}", f"TFL_ERROR_{status}"):
        if name in STATUS:
            return STATUS[name]
    raise ValueError(f"unknown tfl_status {status!r}; known: {', '.join(STATUS)}")


def inject_fault(call: str, nth: int = 1, status: str | int = "TFL_ERROR_INJECTED") -> None:
    """Make the ``nth`` call of runtime function ``call`` from now (a
    ``tfl_runtime_v1`` field name such as ``"malloc"``) fail with ``status``."""
    code = status_code(status)
    if code == 0:
        raise ValueError("an injected fault needs an error status, not TFL_OK")
    if nth < 1:
        raise ValueError(f"nth must be >= 1, got {nth}")
    if library().tfl_sim_inject_fault(call.encode(), nth, code) != 0:
        raise ValueError(f"sim runtime rejected fault {call!r} (unknown runtime call name?)")


def clear_faults() -> None:
    """Drop every pending injected fault."""
    library().tfl_sim_clear_faults()


@contextlib.contextmanager
def fault(call: str, nth: int = 1, status: str | int = "TFL_ERROR_INJECTED") -> Iterator[None]:
    """``with fault("malloc"):`` -- inject for the block, clear all faults after."""
    inject_fault(call, nth, status)
    try:
        yield
    finally:
        clear_faults()


def call_count(call: str) -> int:
    """Invocations of runtime function ``call`` since load, failed ones included."""
    return int(library().tfl_sim_call_count(call.encode()))


def live_allocations(device: int) -> int:
    """Live allocations on ``device`` (``-1``: pinned host memory)."""
    return int(library().tfl_sim_live_allocations(device))


def live_bytes(device: int) -> int:
    """Live bytes on ``device`` (``-1``: pinned host memory)."""
    return int(library().tfl_sim_live_bytes(device))
