"""The ``flaggems`` backend on NVIDIA GPUs: core's mechanism (:mod:`torch_fl.routing.flaggems`)
with the cuda vendor's specifics: ``GEMS_VENDOR=nvidia`` and CUDA-typed alias views of flagos
memory (flagos:i is cuda:i under the delegate runtime, so FlagGems' device checks pass, its launches
go to the CUDA current stream = the flagos current stream, and its RNG kernels advance
``torch.cuda.default_generators[i]``, the generator behind ``torch.flagos.default_generators[i]``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch_fl.routing import flaggems as _core

__all__ = ["BACKEND", "claimed_overloads", "register_backend", "status", "table"]

BACKEND = _core.BACKEND
claimed_overloads = _core.claimed_overloads
status = _core.status


def table() -> dict[str, Callable[..., Any]]:
    """Overload name -> FlagGems callable (imports FlagGems once)."""
    return _core.kernel_table()


def register_backend() -> bool:
    """Registers ``flaggems`` if FlagGems is installed; returns whether it did."""
    return _core.register(vendor="cuda", gems_vendor="nvidia", view_device="cuda")


def _servable(names: list[str]) -> list[str]:
    """Names a route may send to ``flaggems`` on this torch (used by the survey)."""
    return _core._servable(names)
