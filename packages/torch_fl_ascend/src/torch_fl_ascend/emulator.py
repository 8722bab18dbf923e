"""Test controls of the CANN emulator (``ascend_emulator.h``), through ctypes.

Only meaningful when torch-fl-ascend was built against the emulator (``sdk_info()["emulator"]``):
fault injection by toolkit function name (``aclrtMalloc``, ``aclnnAdd``), call counts, contract
violations the emulator detected (memory freed while queued work still uses it, ...) and live
allocations. The library is the very ``libascendcl.so`` the runtime uses (:func:`sdk.load` loaded
it), so state is shared with it (core's :class:`torch_fl.vendors.emulator.EmulatorControls`).
"""

from __future__ import annotations

import ctypes
from contextlib import AbstractContextManager

from torch_fl.vendors.emulator import EmulatorControls

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

_emu = EmulatorControls(
    "torch_fl_ascend",
    "aclEmu",
    {**ACL_ERRORS, **ACLNN_STATUS},
    {
        "ViolationCount": ([], ctypes.c_uint64),
        "LastViolation": ([], ctypes.c_char_p),
        "Reset": ([], None),
    },
)
available = _emu.available
library = _emu.library
call_count = _emu.call_count
live_allocations = _emu.live_allocations
live_bytes = _emu.live_bytes


def inject_fault(call: str, status: str | int, nth: int = 1) -> None:
    """Make the ``nth`` call of ``call`` from now return ``status`` (a name from ACL_ERRORS /
    ACLNN_STATUS, or its value) and do nothing else."""
    _emu.check_fault(
        _emu.call("InjectFault", call.encode(), nth, _emu.status(status)), call, status
    )


def clear_faults() -> None:
    """Clears faults, call counters and the violation record (aclEmuReset)."""
    _emu.call("Reset")


def fault(call: str, status: str | int, nth: int = 1) -> AbstractContextManager[None]:
    return _emu.scoped(lambda: inject_fault(call, status, nth), clear_faults)


def violation_count() -> int:
    return int(_emu.call("ViolationCount"))


def last_violation() -> str:
    return (_emu.call("LastViolation") or b"").decode(errors="replace")
