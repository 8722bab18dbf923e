"""Extensions that claim PyTorch's PrivateUse1 backend for themselves, and cannot share a process
with torch-fl.

A process has one PrivateUse1 backend. The vendors' own PyTorch plugins (Huawei's ``torch_npu``,
Moore Threads' ``torch_musa``, Enflame's ``torch_gcu``) each rename it and register their own
kernels, allocator and hooks under it, so with one of them and torch-fl loaded one ends up half
registered. Instead:

- imported BEFORE torch-fl (it renamed the backend, or it is importing and ``import torch``
  autoloaded torch-fl), torch-fl's import fails naming both packages, before torch-fl registers
  anything (:func:`check_not_claimed`);
- imported AFTER, its import fails the same way, before any of its code runs: :func:`install`
  puts a finder on ``sys.meta_path`` whose loader refuses it. Where it is not installed nothing
  changes (``find_spec`` still answers None).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys

import torch

__all__ = ["CLAIMANTS", "PrivateUse1ConflictError", "check_not_claimed", "install"]

#: module -> (the distribution users know it as, the backend name it gives PrivateUse1, the
#: platform, the torch-fl vendor that serves that platform).
CLAIMANTS: dict[str, tuple[str, str, str, str]] = {
    "torch_npu": ("torch_npu (Huawei Ascend's PyTorch adapter)", "npu", "Ascend", "ascend"),
    "torch_musa": ("torch_musa (Moore Threads' PyTorch plugin)", "musa", "MUSA", "musa"),
    "torch_gcu": ("torch_gcu (Enflame's PyTorch plugin)", "gcu", "GCU", "gcu"),
}

_FLAGOS = "flagos"


class PrivateUse1ConflictError(ImportError):
    """Another PrivateUse1 extension and torch-fl in one process."""


def _message(module: str, first: str) -> str:
    dist, backend, platform, vendor = CLAIMANTS[module]
    order = (
        f"{module} was imported first"
        if first == module
        else "torch-fl was loaded first (by `import torch`)"
    )
    return (
        f"{dist} and torch-fl (torch-fl-core, device {_FLAGOS!r}) cannot be used in one process: "
        f"both claim PyTorch's PrivateUse1 backend ({module} names it {backend!r}, torch-fl "
        f"{_FLAGOS!r}) and a process has only one; {order}. On {platform}, use torch-fl-{vendor}'s "
        f"flagos device (FLAGOS_VENDOR={vendor}) without {module}, or run {module} in a process "
        f"without torch-fl (TORCH_DEVICE_BACKEND_AUTOLOAD=0 keeps `import torch` from loading it)."
    )


def check_not_claimed() -> None:
    """Raise before torch-fl registers anything if a claimant is loaded or loading."""
    current = torch._C._get_privateuse1_backend_name()
    for module, (_dist, backend, _platform, _vendor) in CLAIMANTS.items():
        if module in sys.modules or current == backend:
            raise PrivateUse1ConflictError(_message(module, module))


class _Refuse(importlib.abc.Loader):
    def __init__(self, module: str) -> None:
        self.module = module

    def create_module(self, spec):  # noqa: ANN001 -- importlib's protocol
        raise PrivateUse1ConflictError(_message(self.module, "torch-fl"))

    def exec_module(self, module):  # noqa: ANN001
        raise PrivateUse1ConflictError(_message(self.module, "torch-fl"))


class _ClaimantFinder(importlib.abc.MetaPathFinder):
    """Refuses the claimants (and their submodules) where they are installed."""

    def find_spec(self, fullname, path=None, target=None):  # noqa: ANN001
        top = fullname.partition(".")[0]
        if top not in CLAIMANTS:
            return None
        for finder in sys.meta_path:
            if finder is self or isinstance(finder, _ClaimantFinder):
                continue
            find = getattr(finder, "find_spec", None)
            real = find(fullname, path, target) if find else None
            if real is not None:
                return importlib.machinery.ModuleSpec(fullname, _Refuse(top), origin=real.origin)
        return None  # not installed: the usual ModuleNotFoundError


def install() -> None:
    """Refuse later imports of the claimants in this process (idempotent)."""
    if not any(isinstance(f, _ClaimantFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _ClaimantFinder())
