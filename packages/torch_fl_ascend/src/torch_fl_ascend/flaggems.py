"""FlagGems on Ascend: the ``flaggems`` backend, active only with a Triton that has an Ascend
backend (``triton-ascend``: backend ``npu``, or flagtree's ``ascend`` build) and FlagGems installed.

Without them no ``flaggems`` route can execute, so the backend is not registered and the native
ACLNN kernels serve those operators (the route table lists FlagGems first under that condition).
Kernels are taken from FlagGems' kernel table (never ``flag_gems.enable()``, which would register
a competing PrivateUse1 implementation) and launched on the flagos current stream.
"""

from __future__ import annotations

import importlib
import importlib.util

__all__ = ["ascend_triton", "register_if_available"]

BACKEND = "flaggems"
#: Names the Ascend Triton backends register under.
TRITON_BACKENDS = ("npu", "ascend")


def ascend_triton() -> tuple[bool, str]:
    """(available, why): a Triton with an Ascend backend, and FlagGems, importable."""
    if importlib.util.find_spec("triton") is None:
        return False, "no Triton is installed"
    try:
        triton = importlib.import_module("triton")
        backends = set(getattr(getattr(triton, "backends", None), "backends", {}) or {})
    except Exception as exc:  # a broken Triton is as good as none, and says why
        return False, f"importing triton failed ({type(exc).__name__}: {exc})"
    found = [b for b in TRITON_BACKENDS if b in backends]
    if not found:
        listed = ", ".join(sorted(backends)) or "none"
        return False, f"the installed Triton has no Ascend backend (backends: {listed})"
    if importlib.util.find_spec("flag_gems") is None:
        return False, f"Triton has the {found[0]!r} backend but FlagGems is not installed"
    return True, f"Triton with the {found[0]!r} backend and FlagGems are importable"


def register_if_available() -> bool:
    """Register the ``flaggems`` Python backend (core's :mod:`torch_fl.routing.flaggems`) when it
    can run here; False otherwise (``torch_fl.routing.flaggems.status()`` says why)."""
    from torch_fl.routing import flaggems as core

    return core.register(
        vendor="ascend", gems_vendor="ascend", view_device=None, available=ascend_triton()
    )
