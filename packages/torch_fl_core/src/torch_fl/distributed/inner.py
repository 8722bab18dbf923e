"""Creating the inner c10d backends a ``flagos`` process group delegates to.

A group owns two: the tier's backend for flagos tensors and a gloo backend for CPU tensors
(object collectives, DCP metadata, ``cpu:gloo,flagos:flagos`` specs). On the gloo tiers they are
the same object. Each gets its own store prefix so their rendezvous keys never collide.
"""

from __future__ import annotations

import dataclasses
import datetime

import torch.distributed as dist

from torch_fl.distributed import tiers
from torch_fl.distributed.tiers import TierChoice

__all__ = ["Inner", "create"]


@dataclasses.dataclass
class Inner:
    device: dist.Backend  # the tier's backend, sees alias views / staged copies of flagos tensors
    cpu: dist.Backend  # gloo, for CPU tensors


def _gloo(store: dist.Store, prefix: str, rank: int, size: int, timeout: datetime.timedelta):
    return dist.ProcessGroupGloo(dist.PrefixStore(prefix, store), rank, size, timeout)


def _nccl(store, rank, size, timeout, group_name, global_ranks):
    options = dist.ProcessGroupNCCL.Options()
    # Same defaults torch uses for its own NCCL groups (distributed_c10d._new_process_group_helper).
    options.is_high_priority_stream = False
    options._timeout = timeout
    if global_ranks is not None:
        options.global_ranks_in_group = list(global_ranks)
    if group_name:
        options.group_name = group_name
    return dist.ProcessGroupNCCL(dist.PrefixStore("flagos-nccl/", store), rank, size, options)


def _flagcx(store, rank, size, timeout):
    import importlib

    importlib.import_module("flagcx")  # registers its c10d plugin "flagcx"
    plugin = dist.Backend._plugins.get("FLAGCX")
    if plugin is None:
        raise RuntimeError(
            "torch_fl.distributed: `import flagcx` did not register a 'flagcx' torch.distributed "
            "backend"
        )
    prefixed = dist.PrefixStore("flagos-flagcx/", store)
    if plugin.extended_api:
        options = dist.distributed_c10d._DistributedBackendOptions()
        options.store = prefixed
        options.group_rank = rank
        options.group_size = size
        options.timeout = timeout
        return plugin.creator_fn(options, None)
    return plugin.creator_fn(prefixed, rank, size, timeout)


def _vendor(store, rank, size, timeout):
    import torch_fl
    from torch_fl import _C

    path = tiers.vendor_library_path()
    prefixed = dist.PrefixStore("flagos-vendor/", store)
    return _C._vendor_backend(
        prefixed, rank, size, timeout.total_seconds(), path, str(torch_fl.vendor().name)
    )


def create(
    choice: TierChoice,
    store: dist.Store,
    rank: int,
    size: int,
    timeout: datetime.timedelta,
    group_name: str = "",
    global_ranks: list[int] | None = None,
) -> Inner:
    """The inner backends for ``choice`` (collective: every rank of the group calls it)."""
    if choice.name in (tiers.GLOO_ALIAS, tiers.GLOO_STAGED):
        gloo = _gloo(store, "flagos-gloo/", rank, size, timeout)
        return Inner(device=gloo, cpu=gloo)
    if choice.name == tiers.NCCL:
        device = _nccl(store, rank, size, timeout, group_name, global_ranks)
    elif choice.name == tiers.VENDOR:
        device = _vendor(store, rank, size, timeout)
    else:
        device = _flagcx(store, rank, size, timeout)
    return Inner(device=device, cpu=_gloo(store, "flagos-cpu-gloo/", rank, size, timeout))
