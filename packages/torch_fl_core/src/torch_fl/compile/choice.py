"""Which Inductor scheduling compiles ``flagos`` graphs, chosen from what the vendor declares.

A vendor chooses with attributes on its :class:`torch_fl.vendors.Vendor` object:

- ``compile_scheduling = "cpp"``: Inductor's C++ (OpenMP) kernels read ``flagos`` memory directly.
  Only valid where device memory is host-addressable (``CAP_HOST_ADDRESSABLE_MEMORY``).
- ``compile_scheduling = "triton"`` with ``triton_target = "cuda"`` (or ``"hip"``, ...): Triton
  kernels compiled for that target and launched on the ``flagos`` current stream, which the vendor
  guarantees is the target's current stream (the cuda vendor's streams *are* CUDA streams).
- unset (``None``): decided by capability: host-addressable memory means ``"cpp"``; otherwise
  Inductor generates no code for the vendor and ``torch.compile`` runs its graphs on the routed
  kernels (:mod:`torch_fl.compile.routed_graphs`).

``compile_graphs = True`` declares that ``mode="reduce-overhead"`` captures device graphs.
"""

from __future__ import annotations

import types

import torch

__all__ = [
    "SCHEDULINGS",
    "graphs_supported",
    "scheduling",
    "triton_device_module",
    "triton_target",
    "tuning_device_type",
    "vendor_name",
]

SCHEDULINGS = ("cpp", "triton")


def _vendor():
    import torch_fl

    return torch_fl.vendor()


def vendor_name() -> str:
    try:
        return str(_vendor().name)
    except RuntimeError:
        return "<none>"


def _host_addressable() -> bool:
    from torch_fl import _C

    caps = int(_C.runtime_capabilities())
    return bool(caps & int(_C.CAP_HOST_ADDRESSABLE_MEMORY))


def scheduling() -> str | None:
    """``"cpp"``, ``"triton"`` or None (this vendor cannot compile)."""
    vendor = _vendor()
    declared = getattr(vendor, "compile_scheduling", None)
    if declared is None:
        return "cpp" if _host_addressable() else None
    if declared not in SCHEDULINGS:
        raise ValueError(
            f"vendor {vendor.name!r} declares compile_scheduling={declared!r}; "
            f"expected one of {SCHEDULINGS} or None"
        )
    if declared == "cpp" and not _host_addressable():
        raise ValueError(
            f"vendor {vendor.name!r} declares compile_scheduling='cpp' but its runtime does not "
            f"declare CAP_HOST_ADDRESSABLE_MEMORY: C++ kernels would dereference device pointers"
        )
    if declared == "triton" and not getattr(vendor, "triton_target", None):
        raise ValueError(
            f"vendor {vendor.name!r} declares compile_scheduling='triton' without a triton_target "
            f"(the Triton backend its kernels compile for, e.g. 'cuda')"
        )
    return declared


def triton_target() -> str | None:
    """The Triton target (``"cuda"``, ...) when the vendor compiles with Triton, else None."""
    if scheduling() != "triton":
        return None
    return str(_vendor().triton_target)


def tuning_device_type() -> str | None:
    """The device type whose Inductor tuning ``flagos`` shares (template and config heuristics).

    ``"cpu"`` under C++ scheduling (the kernels are CPU code on host memory); under Triton the
    target's torch device type (``"cuda"``, also for ``"hip"``: ROCm's torch calls it cuda), since
    the kernels are compiled for and run on that device. None when the vendor cannot compile.
    """
    kind = scheduling()
    if kind == "cpp":
        return "cpu"
    if kind == "triton":
        target = str(_vendor().triton_target)
        return "cuda" if target == "hip" else target
    return None


def triton_device_module() -> types.ModuleType:
    """``torch.<triton_target>`` (e.g. ``torch.cuda``): device properties and streams for Triton."""
    target = triton_target()
    if target is None:
        raise RuntimeError(f"flagos: vendor {vendor_name()!r} does not compile with Triton")
    # ROCm's torch calls its device module torch.cuda too.
    return getattr(torch, "cuda" if target == "hip" else target)


def graphs_supported() -> bool:
    """Whether ``mode="reduce-overhead"`` captures device graphs here: the vendor declares
    ``compile_graphs`` and its runtime records graphs (:func:`torch_fl.device.graphs.supported`)."""
    from torch_fl.device import graphs

    return bool(getattr(_vendor(), "compile_graphs", False)) and graphs.supported()
