"""FlagGems on GCU: the ``flaggems`` backend, active only with a Triton that has the ``enflame``
backend (flagtree ``0.6.1+enflame3.6`` or Enflame's ``triton_gcu``) and FlagGems installed.

Without them no ``flaggems`` route can execute, so the backend is not registered and the route
generator writes the table without FlagGems routes (its banner says so). With them, kernels are
taken from ``flag_gems._FULL_CONFIG`` (never ``flag_gems.enable()``, which would register a
competing PrivateUse1 implementation) and launched on the flagos current stream; core's producer
barrier orders the topsaten kernels behind them (docs/gcu.md, "Two producers on one stream").
"""

from __future__ import annotations

import importlib
import importlib.util

__all__ = ["enflame_triton", "flaggems_ops", "register_if_available"]

BACKEND = "flaggems"


def enflame_triton() -> tuple[bool, str]:
    """(available, why): a Triton whose backends include ``enflame``, and FlagGems, importable."""
    if importlib.util.find_spec("triton") is None:
        return False, "no Triton is installed"
    try:
        triton = importlib.import_module("triton")
        backends = set(getattr(getattr(triton, "backends", None), "backends", {}) or {})
    except Exception as exc:  # a broken Triton is as good as none, and says why
        return False, f"importing triton failed ({type(exc).__name__}: {exc})"
    if "enflame" not in backends:
        listed = ", ".join(sorted(backends)) or "none"
        return False, f"the installed Triton has no 'enflame' backend (backends: {listed})"
    if importlib.util.find_spec("flag_gems") is None:
        return False, "Triton has the enflame backend but FlagGems is not installed"
    return True, "Triton with the enflame backend and FlagGems are importable"


def flaggems_ops() -> dict[str, object]:
    """aten overload (``aten::abs``, ``aten::add.Tensor``) -> FlagGems callable (imports FlagGems)."""
    from torch_fl.routing import flaggems as core

    return {
        f"aten::{name}" if "::" not in name else name: fn
        for name, fn in core.kernel_table().items()
    }


def register_if_available() -> bool:
    """Register the ``flaggems`` Python backend (core's mechanism, :mod:`torch_fl.routing.flaggems`)
    when it can run here; False otherwise (``torch_fl.routing.flaggems.status()`` says why)."""
    from torch_fl.routing import flaggems as core

    # No alias views: the enflame Triton backend launches on flagos memory as it is.
    return core.register(
        vendor="gcu", gems_vendor="enflame", view_device=None, available=enflame_triton()
    )
