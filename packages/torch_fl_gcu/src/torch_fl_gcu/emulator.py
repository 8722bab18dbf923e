"""Test controls of the TopsRider emulator (``tops_emulator.h``), through ctypes.

Only meaningful when torch-fl-gcu was built against the emulator (``sdk_info()["emulator"]``):
the emulator framework's controls (fault injection by SDK function name, call counts, the
violation record, live allocations; core's :class:`torch_fl.vendors.emulator.EmulatorControls`)
and a second producer on a stream (``launch_foreign``: a Triton kernel as the S60 sees it, not
ordered with topsaten work). The library is the very ``libtopsrt.so`` the runtime uses
(:func:`torch_fl_gcu.sdk.load` loaded it), so state is shared with it.
"""

from __future__ import annotations

import ctypes

from torch_fl.vendors.emulator import CONTROLS, EmulatorControls

__all__ = [*CONTROLS, "launch_foreign", "pending_foreign"]  # noqa: F822 (CONTROLS: bound by export)

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

_emu = EmulatorControls(
    "torch_fl_gcu",
    "topsEmu",
    {**TOPS_ERRORS, **TOPSATEN_STATUS},
    {
        "LaunchForeign": ([ctypes.c_void_p] * 3 + [ctypes.c_size_t], ctypes.c_int),
        "PendingForeign": ([ctypes.c_int], ctypes.c_uint64),
    },
)
_emu.export(globals())


def pending_foreign(device: int) -> int:
    return int(_emu.call("PendingForeign", device))


def launch_foreign(stream: int, dst: int, data: bytes) -> None:
    """Queue a second producer's write of ``data`` to device pointer ``dst`` on topsStream_t
    ``stream`` (``torch.ops.torch_fl._native_stream(device)``)."""
    buf = ctypes.create_string_buffer(data, len(data))
    rc = _emu.call("LaunchForeign", ctypes.c_void_p(stream), ctypes.c_void_p(dst), buf, len(data))
    if rc != 0:
        raise RuntimeError(f"topsEmuLaunchForeign failed with topsError_t {rc}")
