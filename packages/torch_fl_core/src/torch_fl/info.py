"""``torch_fl.info()``: what is under ``flagos`` in this process, as text for bug reports."""

from __future__ import annotations

import torch

from torch_fl import _C, vendors

__all__ = ["capability_names", "info"]

ROUTES_NONE = "none (every operator not in the minimal set runs through ATen's CPU fallback)"


def capability_names(capabilities: int) -> list[str]:
    """Names of the runtime capability bits set in ``capabilities`` (``CAP_*`` of ``_C``)."""
    known = sorted(
        (getattr(_C, attr), attr.removeprefix("CAP_"))
        for attr in dir(_C)
        if attr.startswith("CAP_")
    )
    names = [name for bit, name in known if capabilities & bit]
    unknown = capabilities & ~sum(bit for bit, _ in known)
    if unknown:
        names.append(f"unknown bits {unknown:#x}")
    return names


def _mib(n: int) -> str:
    return f"{n / (1 << 20):,.0f} MiB"


def _devices(emulated: str | None = None) -> list[str]:
    count = _C.device_count()
    lines = [f"devices:    {count}" + (" (emulated)" if emulated and count else "")]
    for index in range(count):
        try:
            name = _C.device_name(index)
            free, total = _C.mem_get_info(index)
            lines.append(f"  flagos:{index}  {name}  {_mib(free)} free of {_mib(total)}")
        except Exception as exc:  # report, don't fail: info() is what users paste into bugs
            lines.append(f"  flagos:{index}  (error: {exc})")
    return lines


def _routes() -> list[str]:
    from torch_fl import routing

    if not routing.router_available():
        return [f"routes:     {ROUTES_NONE}"]
    active = routing.active_table()
    if active is None:
        return [f"routes:     {ROUTES_NONE}"]
    described = active.describe().splitlines()
    lines = [f"routes:     {described[0]}", *described[1:]]
    lines.append(f"  backends: {', '.join(sorted({*_C.router_backends(), 'none'}))}")
    return lines


def info() -> str:
    """Vendor (and why it was chosen, and what emulates its devices where they are emulated),
    runtime, capabilities, devices, versions and routes."""
    from torch_fl import __version__

    selection = vendors.active()
    lines = [f"torch-fl:   {__version__} (torch {torch.__version__})"]
    if selection is None:
        lines.append("vendor:     none active (torch_fl did not finish importing)")
        return "\n".join(lines) + "\n"

    vendor = selection.vendor
    described = f" ({vendor.description})" if getattr(vendor, "description", "") else ""
    lines.append(f"vendor:     {vendor.name}{described}")
    lines.append(f"  chosen because {selection.reason}")
    lines.append(f"  installed: {', '.join(selection.installed)}")
    if not selection.present:
        lines.append(f"  no device: {selection.absent_reason}")
    try:
        emulated = getattr(vendor, "emulated", None)
    except Exception as exc:  # report, don't fail
        emulated = f"unknown (Vendor.emulated failed: {exc})"
    if emulated:
        lines.append(f"  emulated:  {emulated}")

    if _C.runtime_active():
        caps = capability_names(_C.runtime_capabilities())
        lines.append(f"runtime:    {_C.runtime_name()} (runtime ABI v{_C.runtime_abi_version()})")
        lines.append(f"  capabilities: {', '.join(caps) if caps else 'none'}")
    else:
        lines.append("runtime:    none loaded")
    lines.extend(_devices(emulated))
    lines.extend(_routes())
    return "\n".join(lines) + "\n"
