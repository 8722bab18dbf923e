"""Test controls of the CANN emulator (``ascend_emulator.h``), through ctypes.

Only meaningful when torch-fl-ascend was built against the emulator (``sdk_info()["emulator"]``):
the emulator framework's controls (core's :class:`torch_fl.vendors.emulator.EmulatorControls`):
fault injection by toolkit function name (``aclrtMalloc``, ``aclnnAdd``), call counts, contract
violations the emulator detected (memory freed while queued work still uses it, ...) and live
allocations. The library is the very ``libascendcl.so`` the runtime uses (:func:`sdk.load` loaded
it), so state is shared with it. :func:`clear_faults` is ``aclEmuReset``: counters and the
violation record start from zero too.
"""

from __future__ import annotations

from torch_fl.vendors.emulator import CONTROLS, EmulatorControls

__all__ = [*CONTROLS, "ACL_ERRORS", "ACLNN_STATUS"]  # noqa: F822 (CONTROLS: bound by export)

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

_emu = EmulatorControls("torch_fl_ascend", "aclEmu", {**ACL_ERRORS, **ACLNN_STATUS}, clears="Reset")
_emu.export(globals())
