"""Test controls of the CANN emulator (``ascend_emulator.h``), through ctypes.

Only meaningful when torch-fl-ascend was built against the emulator (``sdk_info()["emulator"]``):
fault injection by toolkit function name (``aclrtMalloc``, ``aclnnAdd``), call counts, contract
violations the emulator detected (memory freed while queued work still uses it, ...) and live
allocations. The library is the very ``libascendcl.so`` the runtime uses (:func:`sdk.load` loaded
it), so state is shared with it.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from collections.abc import Iterator

from torch_fl_ascend import sdk, sdk_info

__all__ = [
    "ACL_ERRORS",
    "ACLNN_STATUS",
    "available",
    "call_count",
    "clear_faults",
    "fault",
    "inject_fault",
    "last_violation",
    "library",
    "live_allocations",
    "live_bytes",
    "violation_count",
]

#: aclError values tests inject by name.
ACL_ERRORS = {
    "ACL_ERROR_INVALID_PARAM": 100000,
    "ACL_ERROR_BAD_ALLOC": 200000,
    "ACL_ERROR_RT_MEMORY_ALLOCATION": 207001,
    "ACL_ERROR_RT_INTERNAL_ERROR": 507000,
}
#: aclnnStatus values.
ACLNN_STATUS = {
    "ACLNN_ERR_PARAM_NULLPTR": 161001,
    "ACLNN_ERR_PARAM_INVALID": 161002,
    "ACLNN_ERR_RUNTIME_ERROR": 361001,
    "ACLNN_ERR_INNER_NULLPTR": 561103,
}


def available() -> bool:
    return sdk_info().get("emulator", "FALSE").upper() in {"TRUE", "ON", "1"}


@functools.cache
def library() -> ctypes.CDLL:
    if not available():
        raise RuntimeError("torch-fl-ascend was not built against the CANN emulator")
    lib = ctypes.CDLL(sdk.load().paths["libascendcl.so"])  # the loaded one: dlopen's handle
    lib.aclEmuInjectFault.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    lib.aclEmuInjectFault.restype = ctypes.c_int
    lib.aclEmuCallCount.argtypes = [ctypes.c_char_p]
    lib.aclEmuCallCount.restype = ctypes.c_uint64
    lib.aclEmuViolationCount.restype = ctypes.c_uint64
    lib.aclEmuLastViolation.restype = ctypes.c_char_p
    lib.aclEmuReset.restype = None
    lib.aclEmuLiveAllocations.argtypes = [ctypes.c_int32]
    lib.aclEmuLiveAllocations.restype = ctypes.c_uint64
    lib.aclEmuLiveBytes.argtypes = [ctypes.c_int32]
    lib.aclEmuLiveBytes.restype = ctypes.c_uint64
    return lib


def inject_fault(call: str, status: str | int, count: int = 1) -> None:
    """Make the next ``count`` calls of ``call`` (``-1``: every call) return ``status`` (a name
    from ACL_ERRORS / ACLNN_STATUS, or its value) and do nothing else."""
    code = status if isinstance(status, int) else {**ACL_ERRORS, **ACLNN_STATUS}[status]
    if library().aclEmuInjectFault(call.encode(), code, count) != 0:
        raise ValueError(f"the emulator rejected the fault {call!r} -> {status!r}")


def clear_faults() -> None:
    """Clears faults, call counters and the violation record (aclEmuReset)."""
    library().aclEmuReset()


@contextlib.contextmanager
def fault(call: str, status: str | int, count: int = 1) -> Iterator[None]:
    inject_fault(call, status, count)
    try:
        yield
    finally:
        clear_faults()


def call_count(call: str) -> int:
    return int(library().aclEmuCallCount(call.encode()))


def violation_count() -> int:
    return int(library().aclEmuViolationCount())


def last_violation() -> str:
    return (library().aclEmuLastViolation() or b"").decode(errors="replace")


def live_allocations(device: int) -> int:
    return int(library().aclEmuLiveAllocations(device))


def live_bytes(device: int) -> int:
    return int(library().aclEmuLiveBytes(device))
