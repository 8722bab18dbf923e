"""The ``flaggems`` backend on DCU: FlagGems' Triton kernels on FlagTree's ``hcu`` backend.

Core's mechanism (:mod:`torch_fl.routing.flaggems`: FlagGems imported lazily, at the first call a
route sends to it) with DCU's specifics: its hygon vendor declares ``device_name="cuda"``, so
FlagGems runs on CUDA-typed alias views of flagos memory and its results join flagos without a
copy. Registered only where it can run: a
Triton with the ``hcu`` backend (FlagTree) and ``flag_gems`` importable; ``FLAGOS_FLAGGEMS=0``
turns it off. ``GEMS_VENDOR=hygon`` is set automatically (it also selects FlagGems' hygon kernels;
DTK's own Triton carries no backend metadata, which is why ``hcu`` must come from FlagTree).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util

from torch_fl.routing import flaggems as _core

__all__ = ["BACKEND", "claimed_overloads", "hcu_triton", "register_backend", "status"]

BACKEND = _core.BACKEND
GEMS_VENDOR = "hygon"


def hcu_triton() -> tuple[bool, str]:
    """Whether FlagGems can run on DCU here, and why (or why not); imports nothing."""
    if importlib.util.find_spec("triton") is None:
        return False, "no Triton is installed (install FlagTree's hcu wheel)"
    try:
        names = {ep.name for ep in importlib.metadata.entry_points(group="triton.backends")}
    except Exception as exc:  # broken metadata: say so rather than guess
        return False, f"cannot read Triton's backend entry points: {exc}"
    if "hcu" not in names:
        return False, (
            f"the installed Triton has no 'hcu' backend (backends: {', '.join(sorted(names)) or 'none'}); "
            "install FlagTree's hcu build"
        )
    if importlib.util.find_spec("flag_gems") is None:
        return False, "flag_gems is not installed"
    return True, "Triton hcu backend and flag_gems importable"


#: Overload names of FlagGems' ``_FULL_CONFIG``, read from its source without importing it; why
#: the backend is (or is not) registered (core's).
claimed_overloads = _core.claimed_overloads
status = _core.status


def _prepare_environment() -> None:
    # GEMS_VENDOR=hygon and FlagGems' cache directory, unless set: what register() does first.
    _core._prepare_environment(GEMS_VENDOR)


def register_backend() -> bool:
    """Registers ``flaggems`` where it can run on DCU; returns whether it did."""
    return _core.register(
        vendor="dcu", gems_vendor=GEMS_VENDOR, view_device="cuda", available=hcu_triton()
    )
