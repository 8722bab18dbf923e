"""Test controls of the TopsRider emulator (``tops_emulator.h``), through ctypes.

Only meaningful when torch-fl-gcu was built against the emulator (``sdk_info()["emulator"]``):
fault injection by SDK function name, call counts, live allocations, and a second producer on a
stream (``launch_foreign``: a Triton kernel as the S60 sees it, not ordered with topsaten work).
The library is the very ``libtopsrt.so`` the runtime uses (:func:`torch_fl_gcu.sdk.load` loaded
it), so state is shared with it.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from collections.abc import Iterator

from torch_fl_gcu import sdk, sdk_info

__all__ = [
    "available",
    "call_count",
    "clear_faults",
    "fault",
    "inject_fault",
    "launch_foreign",
    "library",
    "live_allocations",
    "live_bytes",
    "pending_foreign",
]

#: topsError_t / topsatenStatus_t values tests inject by name.
TOPS_ERRORS = {
    "topsErrorInvalidValue": 1,
    "topsErrorOutOfMemory": 2,
    "topsErrorInvalidDevicePointer": 17,
    "topsErrorInvalidDevice": 101,
    "topsErrorIllegalAddress": 700,
    "topsErrorUnknown": 999,
}
TOPSATEN_STATUS = {
    "TOPSATEN_STATUS_BAD_PARAM": 2,
    "TOPSATEN_STATUS_NOT_SUPPORT": 3,
    "TOPSATEN_STATUS_INTERNAL_ERROR": 4,
    "TOPSATEN_STATUS_EXECUTE_ERROR": 6,
}


def available() -> bool:
    return sdk_info().get("emulator", "FALSE").upper() in {"TRUE", "ON", "1"}


@functools.cache
def library() -> ctypes.CDLL:
    if not available():
        raise RuntimeError("torch-fl-gcu was not built against the TopsRider emulator")
    lib = ctypes.CDLL(sdk.load().runtime)  # the loaded one: dlopen returns its handle
    lib.topsEmuInjectFault.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    lib.topsEmuInjectFault.restype = ctypes.c_int
    lib.topsEmuClearFaults.restype = None
    lib.topsEmuCallCount.argtypes = [ctypes.c_char_p]
    lib.topsEmuCallCount.restype = ctypes.c_uint64
    lib.topsEmuLiveAllocations.argtypes = [ctypes.c_int]
    lib.topsEmuLiveAllocations.restype = ctypes.c_uint64
    lib.topsEmuLiveBytes.argtypes = [ctypes.c_int]
    lib.topsEmuLiveBytes.restype = ctypes.c_uint64
    lib.topsEmuLaunchForeign.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_size_t,
    ]
    lib.topsEmuLaunchForeign.restype = ctypes.c_int
    lib.topsEmuPendingForeign.argtypes = [ctypes.c_int]
    lib.topsEmuPendingForeign.restype = ctypes.c_uint64
    return lib


def inject_fault(call: str, status: str | int, nth: int = 1) -> None:
    """Make the ``nth`` call of SDK function ``call`` (``"topsMalloc"``, ``"topsatenAdd"``) from
    now return ``status`` (a name from TOPS_ERRORS / TOPSATEN_STATUS, or its value)."""
    code = status if isinstance(status, int) else {**TOPS_ERRORS, **TOPSATEN_STATUS}[status]
    if library().topsEmuInjectFault(call.encode(), nth, code) != 0:
        raise ValueError(f"the emulator rejected the fault {call!r} -> {status!r}")


def clear_faults() -> None:
    library().topsEmuClearFaults()


@contextlib.contextmanager
def fault(call: str, status: str | int, nth: int = 1) -> Iterator[None]:
    inject_fault(call, status, nth)
    try:
        yield
    finally:
        clear_faults()


def call_count(call: str) -> int:
    return int(library().topsEmuCallCount(call.encode()))


def live_allocations(device: int) -> int:
    return int(library().topsEmuLiveAllocations(device))


def live_bytes(device: int) -> int:
    return int(library().topsEmuLiveBytes(device))


def pending_foreign(device: int) -> int:
    return int(library().topsEmuPendingForeign(device))


def launch_foreign(stream: int, dst: int, data: bytes) -> None:
    """Queue a second producer's write of ``data`` to device pointer ``dst`` on topsStream_t
    ``stream`` (``torch.ops.torch_fl_gcu._current_tops_stream(device)``)."""
    buf = ctypes.create_string_buffer(data, len(data))
    rc = library().topsEmuLaunchForeign(
        ctypes.c_void_p(stream), ctypes.c_void_p(dst), buf, len(data)
    )
    if rc != 0:
        raise RuntimeError(f"topsEmuLaunchForeign failed with topsError_t {rc}")
