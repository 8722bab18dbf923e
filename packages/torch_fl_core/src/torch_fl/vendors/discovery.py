"""Finding installed vendors (entry-point group ``torch_fl.vendors``) and choosing one.

Rules, in order:

1. ``FLAGOS_VENDOR=<name>`` chooses that vendor. An unknown name is an error listing the installed
   vendors. The vendor is chosen even when its device is absent (it then reports 0 devices).
2. Otherwise the installed non-``sim`` vendor whose device is present. If several are present, the
   first by name, and the reason says so.
3. Otherwise, if non-``sim`` vendors are installed but none found a device, the only one (or the
   first by name) is still chosen: it reports 0 devices, and using ``flagos`` raises an error that
   names it and why no device was found. An installed vendor never silently becomes ``sim``.
4. Otherwise the built-in ``sim`` vendor.

A vendor package that fails to load is an error unless ``FLAGOS_VENDOR`` chooses another one:
choosing around it could hide the vendor the user installed.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os

from torch_fl import versions
from torch_fl.vendors import Selection, Vendor, _brief

__all__ = [
    "ENTRY_POINT_GROUP",
    "ENV_VAR",
    "SIM",
    "VendorSelectionError",
    "installed",
    "select",
]

ENTRY_POINT_GROUP = "torch_fl.vendors"
ENV_VAR = "FLAGOS_VENDOR"
SIM = "sim"


class VendorSelectionError(RuntimeError):
    """No vendor can be chosen: an unknown FLAGOS_VENDOR, or a vendor package that fails to load."""


@dataclasses.dataclass
class _Installed:
    name: str
    origin: str  # the distribution, "torch-fl-gcu", for messages
    vendor: Vendor | None = None
    load_error: str = ""


def _as_vendor(obj: object, name: str) -> Vendor:
    if isinstance(obj, type) or (callable(obj) and not hasattr(obj, "runtime_library")):
        obj = obj()  # a Vendor class or a factory function
    missing = [a for a in ("name", "is_present", "runtime_library") if not hasattr(obj, a)]
    if missing:
        raise TypeError(f"{obj!r} is not a torch_fl Vendor (it lacks {', '.join(missing)})")
    if obj.name != name:
        raise TypeError(
            f"the entry point is named {name!r} but its vendor calls itself {obj.name!r}"
        )
    return obj  # type: ignore[return-value]


def _load(ep: importlib.metadata.EntryPoint) -> _Installed:
    dist = getattr(ep, "dist", None)
    origin = dist.name if dist is not None else f"the package providing {ep.value}"
    found = _Installed(ep.name, origin)
    try:
        vendor = _as_vendor(ep.load(), ep.name)
        # A vendor of an API level or core range this core does not serve is a load failure.
        versions.check_vendor(vendor, dist)
        found.vendor = vendor
    except Exception as exc:  # reported when this vendor matters, see select()
        found.load_error = f"{type(exc).__name__}: {_brief(exc)}"
    return found


def installed() -> dict[str, _Installed]:
    """Every vendor in the ``torch_fl.vendors`` entry-point group, plus the built-in ``sim``."""
    found: dict[str, _Installed] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        item = _load(ep)
        if item.name in found and found[item.name].origin != item.origin:
            raise VendorSelectionError(
                f"torch_fl: two installed packages both provide the vendor {item.name!r}: "
                f"{found[item.name].origin} and {item.origin}. Uninstall one of them."
            )
        found[item.name] = item
    if SIM not in found:
        # Running from a source tree without installed metadata: sim is built in regardless.
        from torch_fl.vendors import sim

        found[SIM] = _Installed(SIM, "torch-fl-core", vendor=sim.vendor)
    return dict(sorted(found.items()))


def _presence(vendor: Vendor) -> tuple[bool, str]:
    try:
        if vendor.is_present():
            return True, ""
    except Exception as exc:
        return False, f"its presence check failed: {type(exc).__name__}: {exc}"
    try:
        return False, str(vendor.why_absent())
    except Exception as exc:
        return False, f"no device found (why_absent() failed: {type(exc).__name__}: {exc})"


def _broken(item: _Installed) -> VendorSelectionError:
    return VendorSelectionError(
        f"torch_fl: the vendor package {item.origin} failed to load: "
        f"{item.load_error.rstrip('.')}. "
        f"Fix or uninstall it, or set {ENV_VAR} to another installed vendor."
    )


def select(environ: dict[str, str] | None = None) -> Selection:
    """Choose the vendor for this process (see the module docstring for the rules)."""
    env = os.environ if environ is None else environ
    found = installed()
    names = tuple(found)

    requested = env.get(ENV_VAR, "").strip()
    if requested:
        item = found.get(requested) or found.get(requested.lower())
        if item is None:
            raise VendorSelectionError(
                f"torch_fl: {ENV_VAR}={requested!r} names no installed vendor. "
                f"Installed vendors: {', '.join(names)}. "
                f"Install the vendor's package (torch-fl-<vendor>) or unset {ENV_VAR}."
            )
        if item.vendor is None:
            raise _broken(item)
        present, why = _presence(item.vendor)
        return Selection(item.vendor, f"{ENV_VAR}={requested} is set", present, why, names)

    others = [item for name, item in found.items() if name != SIM]
    broken = [item for item in others if item.vendor is None]
    if broken:
        raise _broken(broken[0])

    checked = [(item, *_presence(item.vendor)) for item in others]  # type: ignore[arg-type]
    present = [item for item, ok, _ in checked if ok]
    if present:
        chosen = present[0]
        reason = f"its device is present (package {chosen.origin})"
        if len(present) > 1:
            rest = ", ".join(item.name for item in present[1:])
            reason += (
                f"; devices of {rest} are present too and the first by name was taken "
                f"(set {ENV_VAR} to choose)"
            )
        return Selection(chosen.vendor, reason, True, "", names)  # type: ignore[arg-type]

    if checked:
        chosen, _, why = checked[0]
        if len(checked) == 1:
            reason = f"it is the only installed vendor package ({chosen.origin})"
        else:
            listed = ", ".join(item.name for item, _, _ in checked)
            reason = (
                f"it is the first by name of the installed vendor packages ({listed}), "
                f"none of which found a device"
            )
        return Selection(chosen.vendor, reason, False, why, names)  # type: ignore[arg-type]

    sim = found[SIM]
    if sim.vendor is None:
        raise _broken(sim)
    present_sim, why = _presence(sim.vendor)
    return Selection(sim.vendor, "no vendor package is installed", present_sim, why, names)
