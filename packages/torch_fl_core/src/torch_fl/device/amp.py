"""Automatic mixed precision on ``flagos``: the dtypes ``torch.autocast("flagos")`` may use."""

from __future__ import annotations

import torch

__all__ = ["get_amp_supported_dtype", "is_bf16_supported"]


def get_amp_supported_dtype() -> list[torch.dtype]:
    """Lower-precision dtypes ``torch.autocast(device_type="flagos")`` accepts."""
    return [torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether ``flagos`` can compute in bfloat16 (every flagos device can, when there is one)."""
    from torch_fl.device.state import is_available

    return is_available()
