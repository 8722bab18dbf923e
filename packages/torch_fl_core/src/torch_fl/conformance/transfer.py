"""Copies of OpInfo sample inputs, on CPU or on ``flagos``, with the same memory layout.

Each tensor is rebuilt on the target device with the same sizes, strides and storage offset over a
copy of its whole storage, so non-contiguous, overlapping (expanded) and offset samples reach the
operator as they are, and tensors that share a storage in the sample share one in the copy.
A tensor that requires grad in the sample is a leaf that requires grad in the copy.

Devices inside samples (factory functions' ``device=`` and ``Tensor.to(device)`` arguments, as
``torch.device`` or as the string ``"cpu"``) are rewritten from CPU to the target device.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["device_name", "tensors_in", "transfer"]


def device_name() -> str:
    """The PrivateUse1 device type (``flagos``)."""
    return torch._C._get_privateuse1_backend_name()


def _copy_tensor(t: torch.Tensor, device: torch.device, storages: dict[int, Any]) -> torch.Tensor:
    with torch.no_grad():
        src = t.detach()
        if src.layout != torch.strided or src.is_conj() or src.is_neg() or src.is_quantized:
            # No storage-level copy for these: an ordinary copy keeps their values.
            out = src.clone().to(device)
        else:
            storage = src.untyped_storage()
            key = storage.data_ptr() if storage.nbytes() else id(src)
            if key not in storages:
                numel = storage.nbytes() // src.element_size()
                flat = torch.empty(0, dtype=src.dtype).set_(storage, 0, (numel,), (1,))
                storages[key] = flat.to(device, copy=True).untyped_storage()
            out = torch.empty(0, dtype=src.dtype, device=device).set_(
                storages[key], src.storage_offset(), src.size(), src.stride()
            )
    if t.requires_grad:
        out.requires_grad_(True)
    return out


def transfer(obj: Any, device: str | torch.device) -> Any:
    """A copy of ``obj`` (e.g. a sample's ``(input, args, kwargs)``) with its tensors on ``device``.

    Pass everything that must keep sharing storages in one call.
    """
    device = torch.device(device)
    storages: dict[int, Any] = {}

    def walk(x: Any, key: Any = None) -> Any:
        if isinstance(x, torch.Tensor):
            return _copy_tensor(x, device, storages)
        if isinstance(x, torch.device) and x.type == "cpu":
            return device
        if isinstance(x, str) and (x == "cpu" or (key == "device" and x.startswith("cpu:"))):
            return device
        if isinstance(x, dict):
            return {k: walk(v, k) for k, v in x.items()}
        if isinstance(x, tuple) and hasattr(x, "_fields"):  # namedtuple
            return type(x)(*(walk(v) for v in x))
        if isinstance(x, (list, tuple)):
            return type(x)(walk(v) for v in x)
        return x

    return walk(obj)


def tensors_in(obj: Any) -> list[torch.Tensor]:
    """Every tensor in ``obj`` (through lists, tuples, namedtuples and dicts), in order."""
    found: list[torch.Tensor] = []

    def walk(x: Any) -> None:
        if isinstance(x, torch.Tensor):
            found.append(x)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)

    walk(obj)
    return found
