"""Accelerate: under torchrun with flagos as the accelerator, fail loudly instead of training copies.

Accelerate chooses its distributed type from the accelerator's device type and knows no
``flagos``: under torchrun every process reports world size 1 and trains its own copy on
``flagos:0``, silently. Accelerate's distributed types are a closed enum with per-type device
handling, so no adapter can add flagos safely; this one makes ``PartialState`` (which ``Accelerator``
and transformers' ``Trainer`` build) raise instead, naming the world size and what works: DDP or
FSDP over a flagos process group with ``torch.distributed`` directly (docs/distributed.md).
Single-process Accelerate finds flagos through ``torch.accelerator`` and needs nothing.

Upstream, a ``MULTI_ACCELERATOR`` type driven by ``torch.accelerator`` and
``torch.distributed.get_default_backend_for_device`` would make this unnecessary.
Tested with accelerate 1.16.0.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

from torch_fl.integrations._support import flagos_is_the_accelerator, wrap_once

__all__ = ["TESTED", "install"]

TESTED = "1.16.0"


def _version() -> str:
    return str(getattr(sys.modules.get("accelerate"), "__version__", "?"))


def _world_size() -> int:
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return 1


def install(state: ModuleType) -> str | None:
    """Install on ``accelerate.state``; the reason when it cannot be."""
    cls = getattr(state, "PartialState", None)
    distributed_type = getattr(state, "DistributedType", None)
    if cls is None or distributed_type is None or not hasattr(distributed_type, "NO"):
        return (
            f"accelerate {_version()} has no PartialState/DistributedType.NO (tested with {TESTED})"
        )

    def make(original):
        def __init__(self, cpu: bool = False, **kwargs):
            original(self, cpu, **kwargs)
            if (
                not cpu
                and _world_size() > 1
                and int(os.environ.get("LOCAL_RANK", "-1")) != -1
                and getattr(self, "distributed_type", None) == distributed_type.NO
                and flagos_is_the_accelerator()
            ):
                reset = getattr(type(self), "_reset_state", None)
                if callable(reset):
                    reset()
                raise RuntimeError(
                    f"flagos: accelerate {_version()} has no distributed type for flagos devices: "
                    f"under torchrun (WORLD_SIZE={_world_size()}) each process would train its "
                    "own copy on one device. Run the processes with torch.distributed directly "
                    "(DDP or FSDP over a flagos process group, docs/distributed.md), or launch "
                    "one process"
                )

        return __init__

    cls.__init__ = wrap_once(cls.__init__, make)
    return None
