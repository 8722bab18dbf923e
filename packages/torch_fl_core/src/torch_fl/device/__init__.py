"""``torch.flagos``: the device module of the ``flagos`` device, shaped like ``torch.cuda``.

``torch_fl`` registers this package with ``torch._register_device_module("flagos", ...)``, so it
is reachable as ``torch.flagos`` and ``torch.get_device_module("flagos")``, and PyTorch's generic
code (``torch.manual_seed``, ``torch.random.fork_rng``, autocast, checkpointing, serialization)
finds the functions it looks for here. Each concept lives in its own file:

- ``state``: devices (count, current, names, properties, synchronize)
- ``lazy``: lazy initialisation and fork safety
- ``streams``: Stream, Event, current/default stream
- ``memory``: caching-allocator statistics
- ``random``: per-device default generators and seeding
- ``amp``: autocast dtypes
- ``graphs``: device graphs (Graph, graph, graph_pool_handle), where the runtime records them
"""

from __future__ import annotations

from typing import Any

import torch

from torch_fl.device.amp import get_amp_supported_dtype, is_bf16_supported
from torch_fl.device.graphs import Graph, graph, graph_pool_handle, is_current_stream_capturing
from torch_fl.device.lazy import _is_in_bad_fork as _is_in_bad_fork
from torch_fl.device.lazy import _lazy_call as _lazy_call
from torch_fl.device.lazy import _lazy_init as _lazy_init
from torch_fl.device.lazy import init, is_initialized
from torch_fl.device.memory import (
    empty_cache,
    host_memory_stats,
    ipc_collect,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_peak_memory_stats,
)
from torch_fl.device.random import (
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from torch_fl.device.state import (
    DeviceProperties,
    current_device,
    device,
    device_count,
    device_of,
    get_device_capability,
    get_device_name,
    get_device_properties,
    is_available,
    set_device,
    synchronize,
)
from torch_fl.device.state import _DeviceGuard as _DeviceGuard
from torch_fl.device.state import _set_device_index as _set_device_index
from torch_fl.device.streams import (
    Event,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
)

#: Raised when a ``flagos`` allocation exceeds the device's memory (the same class as CUDA's).
OutOfMemoryError = torch.OutOfMemoryError

# Marks this module as torch_fl's device module (torch_fl's setup checks it on re-import).
_TORCH_FL_DEVICE_MODULE = True

__all__ = [
    "DeviceProperties",
    "Event",
    "Graph",
    "OutOfMemoryError",
    "Stream",
    "StreamContext",
    "current_device",
    "current_stream",
    "default_generators",
    "default_stream",
    "device",
    "device_count",
    "device_of",
    "empty_cache",
    "ipc_collect",
    "get_amp_supported_dtype",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "get_rng_state",
    "get_rng_state_all",
    "graph",
    "graph_pool_handle",
    "host_memory_stats",
    "init",
    "initial_seed",
    "is_available",
    "is_bf16_supported",
    "is_current_stream_capturing",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "memory_summary",
    "reset_accumulated_memory_stats",
    "reset_max_memory_allocated",
    "reset_peak_memory_stats",
    "seed",
    "seed_all",
    "set_device",
    "set_rng_state",
    "set_rng_state_all",
    "set_stream",
    "stream",
    "synchronize",
]


def __getattr__(name: str) -> Any:
    # `default_generators` is a tuple attribute in torch.cuda; here it is built on first read
    # (generators exist only once a runtime with devices is active).
    if name == "default_generators":
        from torch_fl.device import random

        return random.default_generators()
    if name == "_initialized":
        # torch.utils.checkpoint (and other torch code written for torch.cuda) reads this flag
        # to decide whether to save and restore the device RNG state.
        from torch_fl.device import lazy

        return lazy.is_initialized()
    raise AttributeError(f"module 'torch.flagos' has no attribute {name!r}")
