"""Error messages of the ``flagos`` device module: each names the vendor and why it was chosen."""

from __future__ import annotations

from torch_fl import vendors
from torch_fl.vendors.discovery import ENV_VAR, SIM

__all__ = ["chosen_vendor", "invalid_ordinal", "no_device", "wrong_device_type"]


def chosen_vendor() -> str:
    """``vendor 'gcu' (chosen because ...)``, or a note that none was activated."""
    selection = vendors.active()
    if selection is None:
        return "no torch_fl vendor (torch_fl did not finish importing)"
    return f"vendor {selection.name!r} (chosen because {selection.reason})"


def no_device() -> str:
    """Why ``flagos`` has no device: the vendor's hardware is absent, or its runtime saw none."""
    selection = vendors.active()
    if selection is None:
        return "flagos: no device found: torch_fl did not activate a vendor (import torch_fl)"
    if not selection.present:
        message = (
            f"flagos: no device found. The {chosen_vendor()} found no device: "
            f"{selection.absent_reason}."
        )
        if selection.name != SIM:
            message += f" Set {ENV_VAR}={SIM} to use simulated devices instead."
        return message
    from torch_fl import _C

    runtime = _C.runtime_name() if _C.runtime_active() else "(none loaded)"
    return (
        f"flagos: no device found. The {chosen_vendor()} is active, but its runtime "
        f"{runtime!r} reports 0 devices."
    )


def invalid_ordinal(index: int, count: int) -> str:
    selection = vendors.active()
    name = selection.name if selection is not None else "?"
    valid = f"flagos:0..flagos:{count - 1}" if count > 1 else "flagos:0"
    message = (
        f"flagos: Invalid device ordinal {index}: vendor {name!r} has {count} device(s) "
        f"(valid: {valid})"
    )
    hook = getattr(selection.vendor, "more_devices", None) if selection is not None else None
    more = hook(index) if hook is not None and index >= count else None
    return f"{message}; {more}" if more else message


def wrong_device_type(device: object) -> str:
    return f"Expected a flagos device, but got: {device!r}"
