"""Test controls of the MUSA emulator (``musa_emulator.h``), through ctypes.

Only meaningful when torch-fl-musa was built against the emulator (``sdk_info()["emulator"]``):
the emulator framework's controls (fault injection by SDK function name -- a runtime function
such as ``musaMalloc`` or a muDNN operator's ``Binary::Run`` --, call counts, the violation record,
live allocations; core's :class:`torch_fl.vendors.emulator.EmulatorControls`). The library is the
very ``libmusart.so`` the runtime uses (:func:`torch_fl_musa.sdk.load` loaded it), so state is
shared with it.
"""

from __future__ import annotations

from torch_fl.vendors.emulator import CONTROLS, EmulatorControls

__all__ = [*CONTROLS]  # noqa: F822 (CONTROLS: bound by export)

#: musaError_t and musa::dnn::Status values tests inject by name.
MUSA_ERRORS = {
    "musaErrorInvalidValue": 1,
    "musaErrorMemoryAllocation": 2,
    "musaErrorInvalidDevicePointer": 17,
    "musaErrorInvalidDevice": 101,
    "musaErrorIllegalAddress": 700,
    "musaErrorUnknown": 999,
}
MUDNN_STATUS = {
    "INVALID_PARAMETER": 1,
    "NOT_SUPPORTED": 4,
    "INTERNAL_ERROR": 5,
    "EXECUTION_FAILED": 7,
}

_emu = EmulatorControls("torch_fl_musa", "musaEmu", {**MUSA_ERRORS, **MUDNN_STATUS}, {})
_emu.export(globals())
