"""The strides fake tensors predict for a flagos convolution: those the eager kernel returns.

PyTorch's fake kernel for ``aten.convolution`` and ``aten.convolution_backward`` asks
``torch._C._conv_determine_backend_memory_format`` which format the device's convolution backend
answers in. For an out-of-tree device ATen selects ``ConvBackend::Overrideable``, for which it
always says contiguous; flagos's convolution answers as native CUDA and CPU do (channels_last when
the input or the weight is, see ``include/torch_fl/kit/conv_layout.h``). Compiled graphs assert the predicted
strides, so the prediction for flagos tensors is flagos's own rule, and eager keeps CUDA's layout
instead of paying a copy per channels_last convolution. Other devices are answered by PyTorch.
"""

from __future__ import annotations

from typing import Any

import torch

_PATCHED = "_torch_fl_conv_layout"


def install() -> None:
    """Answer the format question for flagos operands. Idempotent."""
    original = getattr(torch._C, "_conv_determine_backend_memory_format", None)
    if original is None or getattr(original, _PATCHED, False):
        return
    overrideable = torch._C._ConvBackend.Overrideable

    def determine(input: torch.Tensor, weight: torch.Tensor, backend: Any) -> torch.memory_format:
        if backend == overrideable and input.device.type == "flagos":
            from torch_fl import _C

            return getattr(torch, _C.conv_memory_format(input, weight))
        return original(input, weight, backend)

    setattr(determine, _PATCHED, True)
    determine.__wrapped__ = original  # type: ignore[attr-defined]
    torch._C._conv_determine_backend_memory_format = determine
