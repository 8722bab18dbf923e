"""``torch.distributed.checkpoint`` on vendors whose flagos memory is CUDA memory.

DCP's default file writer (one thread) stages tensors to the host with ``_OverlappingCpuLoader``,
which copies only tensors of ``torch._utils._get_available_device_type()``. With the ``cuda``
vendor loaded that is ``"cuda"`` (torch.cuda is available too), so flagos tensors reach the writer
still on the device and it asserts "Tensor must be on CPU" (seen on the H200, torch 2.11). For
vendors of the ``cuda-abi`` profile the loader is handed zero-copy CUDA alias views of flagos
tensors instead: DCP then copies them like CUDA tensors, on CUDA's current stream, which is the
flagos current stream (the delegate runtime mirrors it). Nothing changes for other vendors, where
the available device type is flagos itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["install"]

_WRAPPED = "_torch_fl_alias_views"


def _cuda_views_wanted() -> bool:
    from torch_fl.distributed.profile import CUDA_ABI, vendor_profile

    return vendor_profile()[1] == CUDA_ABI and torch.cuda.is_available()


def install() -> None:
    """Wrap DCP's overlapping loader once (idempotent); a torch without it is left alone."""
    try:
        from torch.distributed.checkpoint import filesystem
    except ImportError:
        return
    loader = getattr(filesystem, "_OverlappingCpuLoader", None)
    if loader is None or getattr(loader, _WRAPPED, False):
        return
    original = loader.__init__

    def __init__(self: Any, resolve_fun: Callable, *args: Any, **kwargs: Any) -> None:
        if _cuda_views_wanted():
            inner = resolve_fun

            def resolve_fun(obj: Any) -> Any:  # noqa: F811 (the wrapped resolver)
                value = inner(obj)
                if isinstance(value, torch.Tensor) and value.device.type == "flagos":
                    return torch.ops.torch_fl.alias_as(value, torch.device("cuda"))
                return value

        original(self, resolve_fun, *args, **kwargs)

    loader.__init__ = __init__
    setattr(loader, _WRAPPED, True)
