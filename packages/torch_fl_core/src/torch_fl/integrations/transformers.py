"""transformers: ``Trainer`` trains on flagos when flagos is the accelerator, ``bf16=True`` too.

- ``TrainingArguments`` picks its device from its own list of device types and, finding none it
  knows, keeps the batches on ``cpu`` while Accelerate (which asks ``torch.accelerator``) moves
  the model to flagos: "Expected all tensors to be on the same device ... flagos:0 and cpu!". The
  adapter answers Accelerate's device where transformers would fall back to the CPU without being
  asked to (``use_cpu=False``), and counts it as one device, as one CUDA device is counted.
- ``bf16=True`` is refused unless ``is_torch_bf16_gpu_available()`` knows the device; for flagos
  it answers ``torch.flagos.is_bf16_supported()`` (the vendor computes bf16 or not).

Under torchrun, see :mod:`torch_fl.integrations.accelerate` (Trainer's processes are Accelerate's).
Upstream, transformers asking ``torch.accelerator`` for its device and bf16 support would make
this unnecessary. Tested with transformers 5.25.0.
"""

from __future__ import annotations

import functools
import sys
from types import ModuleType

import torch

from torch_fl.integrations._support import flagos_is_the_accelerator, wrap_once, wrapped

__all__ = ["TESTED", "install"]

TESTED = "5.25.0"


def _version() -> str:
    module = sys.modules.get("transformers")
    return str(getattr(module, "__version__", "?"))


def _wrap_setup_devices(args_cls: type) -> str | None:
    prop = args_cls.__dict__.get("_setup_devices")
    if not isinstance(prop, functools.cached_property):
        return "TrainingArguments._setup_devices is not a cached property"
    if wrapped(prop.func):
        return None

    def make(original):
        def _setup_devices(self) -> torch.device:
            device = original(self)
            if device.type != "cpu" or getattr(self, "use_cpu", False):
                return device
            if not flagos_is_the_accelerator():
                return device
            state = getattr(self, "distributed_state", None)
            chosen = getattr(state, "device", None)
            if isinstance(chosen, torch.device) and chosen.type == "flagos":
                self._n_gpu = 1  # one accelerator device per process, as for one CUDA device
                return chosen
            return device

        return _setup_devices

    new = functools.cached_property(wrap_once(prop.func, make))
    new.__set_name__(args_cls, "_setup_devices")
    args_cls._setup_devices = new
    return None


def _wrap_bf16() -> str | None:
    import_utils = sys.modules.get("transformers.utils.import_utils")
    original = getattr(import_utils, "is_torch_bf16_gpu_available", None)
    if original is None:
        return "transformers.utils.import_utils has no is_torch_bf16_gpu_available"

    def make(fn):
        def is_torch_bf16_gpu_available() -> bool:
            if flagos_is_the_accelerator() and not torch.cuda.is_available():
                return bool(torch.flagos.is_bf16_supported())
            return fn()

        return is_torch_bf16_gpu_available

    replacement = wrap_once(original, make)
    # Modules that imported it by name hold the original.
    for name, module in list(sys.modules.items()):
        if (name == "transformers" or name.startswith("transformers.")) and getattr(
            module, "is_torch_bf16_gpu_available", None
        ) is original:
            module.is_torch_bf16_gpu_available = replacement
    return None


def install(training_args: ModuleType) -> str | None:
    """Install on ``transformers.training_args``; the reason when it cannot be."""
    args_cls = getattr(training_args, "TrainingArguments", None)
    if args_cls is None:
        return f"transformers {_version()} has no TrainingArguments (tested with {TESTED})"
    for step in (lambda: _wrap_setup_devices(args_cls), _wrap_bf16):
        why_not = step()
        if why_not:
            return f"transformers {_version()}: {why_not} (tested with {TESTED})"
    return None
