"""transformers' hub kernels: ``from_pretrained(..., device_map="flagos")`` loads out of the box.

transformers 5 kernelizes every model it loads (``USE_HUB_KERNELS`` defaults to on) through the
``kernels`` package, which refuses device types outside its list: "Unsupported device type
'flagos'". Hub kernels are builds for CUDA, ROCm, XPU and a few others; none exists for flagos, so
for a model on flagos the adapter leaves its layers as written, which is what ``kernels`` does
for a supported device that has no kernel for a layer, and what ``USE_HUB_KERNELS=0`` gives.
Models on other devices are kernelized as before. Upstream, ``kernels`` treating an unknown
device type as one without kernels would make this unnecessary. Tested with transformers 5.25.0
and kernels 0.19.1.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import torch

from torch_fl.integrations._support import flagos_is_the_accelerator, wrap_once

__all__ = ["TESTED", "install"]

TESTED = "5.25.0"


def _target_device(model: Any, device_map: dict | None) -> Any:
    """The device transformers kernelizes for: the device map's first non-CPU device, else the
    model's (as ``transformers.integrations.hub_kernels.kernelize`` picks it)."""
    if device_map is not None:
        return next(iter(set(device_map.values()) - {"cpu", "disk"}), "cpu")
    return getattr(model, "_kernels_device", None) or getattr(model, "device", "cpu")


def _on_flagos(device: Any) -> bool:
    if isinstance(device, int):  # an index of the current accelerator
        return True
    try:
        return torch.device(device).type == "flagos"
    except (TypeError, RuntimeError):
        return False


def install(hub_kernels: ModuleType) -> str | None:
    """Install on ``transformers.integrations.hub_kernels``; the reason when it cannot be."""
    original = getattr(hub_kernels, "kernelize", None)
    if original is None:
        version = getattr(sys.modules.get("transformers"), "__version__", "?")
        return f"transformers {version} has no integrations.hub_kernels.kernelize (tested with {TESTED})"

    def make(fn):
        def kernelize(model, mode=None, kernel_config=None, device_map=None):
            if flagos_is_the_accelerator() and _on_flagos(_target_device(model, device_map)):
                return None  # no hub kernel is built for flagos: the layers stay as written
            return fn(model, mode=mode, kernel_config=kernel_config, device_map=device_map)

        return kernelize

    replacement = wrap_once(original, make)
    # Modules that imported it by name (modeling_utils) hold the original.
    for name, module in list(sys.modules.items()):
        if (name == "transformers" or name.startswith("transformers.")) and getattr(
            module, "kernelize", None
        ) is original:
            module.kernelize = replacement
    return None
