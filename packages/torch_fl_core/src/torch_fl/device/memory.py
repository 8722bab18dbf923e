"""Memory of ``flagos`` devices: the caching allocator's statistics, like ``torch.cuda.memory``.

Statistics come from core's caching allocator (``torch_fl._C.memory_stats``) with the same flat
keys as CUDA's (``"allocated_bytes.all.current"``), so tools written for CUDA read them unchanged.
"""

from __future__ import annotations

import collections
from typing import Any

from torch_fl import _C
from torch_fl.device.index import DeviceLike, resolve

__all__ = [
    "_record_memory_history",
    "_snapshot",
    "empty_cache",
    "host_memory_stats",
    "ipc_collect",
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
]


def memory_stats(device: DeviceLike = None) -> collections.OrderedDict[str, int]:
    """The caching allocator's statistics for ``device``, sorted by key like CUDA's."""
    stats = _C.memory_stats(resolve(device))
    return collections.OrderedDict(sorted((str(k), int(v)) for k, v in stats.items()))


def memory_allocated(device: DeviceLike = None) -> int:
    """Bytes currently occupied by tensors on ``device``."""
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device: DeviceLike = None) -> int:
    """Peak of :func:`memory_allocated` since start or the last :func:`reset_peak_memory_stats`."""
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device: DeviceLike = None) -> int:
    """Bytes the caching allocator currently holds on ``device`` (allocated plus cached)."""
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device: DeviceLike = None) -> int:
    """Peak of :func:`memory_reserved` since start or the last :func:`reset_peak_memory_stats`."""
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def reset_peak_memory_stats(device: DeviceLike = None) -> None:
    """Reset the ``*.peak`` statistics of ``device`` to their current values."""
    _C.reset_peak_memory_stats(resolve(device))


def reset_max_memory_allocated(device: DeviceLike = None) -> None:
    """Same as :func:`reset_peak_memory_stats` (kept for code written against ``torch.cuda``)."""
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device: DeviceLike = None) -> None:
    """Reset the accumulated (``*.allocated``, ``*.freed``, counters) statistics of ``device``."""
    _C.reset_accumulated_memory_stats(resolve(device))


def empty_cache() -> None:
    """Return the allocator's unused cached blocks to the runtime. A no-op without a runtime."""
    if _C.runtime_active():
        _C.empty_cache()


def mem_get_info(device: DeviceLike = None) -> tuple[int, int]:
    """``(free, total)`` bytes of ``device`` as the runtime reports them."""
    free, total = _C.mem_get_info(resolve(device))
    return int(free), int(total)


def host_memory_stats() -> collections.OrderedDict[str, int]:
    """Statistics of the pinned host-memory allocator, sorted by key."""
    stats = _C.host_memory_stats()
    return collections.OrderedDict(sorted((str(k), int(v)) for k, v in stats.items()))


def _format_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    raise AssertionError("unreachable")


def _format_count(n: int) -> str:
    return str(n)


_SUMMARY_ROWS: tuple[tuple[str, str, Any], ...] = (
    ("Allocated memory", "allocated_bytes", _format_bytes),
    ("Active memory", "active_bytes", _format_bytes),
    ("Requested memory", "requested_bytes", _format_bytes),
    ("Reserved memory", "reserved_bytes", _format_bytes),
    ("Non-releasable memory", "inactive_split_bytes", _format_bytes),
    ("Allocations", "allocation", _format_count),
    ("Active allocs", "active", _format_count),
    ("Reserved segments", "segment", _format_count),
    ("Non-releasable allocs", "inactive_split", _format_count),
)


def memory_summary(device: DeviceLike = None, abbreviated: bool = False) -> str:
    """A short table of the allocator's statistics for ``device``, like CUDA's summary.

    ``abbreviated`` leaves out the small/large pool rows.
    """
    index = resolve(device)
    stats = memory_stats(index)
    pools = ("all",) if abbreviated else ("all", "small_pool", "large_pool")
    head = f"{'Metric':<32}{'Cur Usage':>14}{'Peak Usage':>14}{'Tot Alloc':>14}{'Tot Freed':>14}"
    rule = "=" * len(head)
    lines = [rule, f" flagos:{index} memory summary ({_C.runtime_name()} runtime)", rule, head]
    for title, key, fmt in _SUMMARY_ROWS:
        lines.append("-" * len(head))
        for pool in pools:
            label = title if pool == "all" else f"  from {pool.replace('_pool', '')} pool"
            values = [
                fmt(stats.get(f"{key}.{pool}.{stat}", 0))
                for stat in ("current", "peak", "allocated", "freed")
            ]
            lines.append(f"{label:<32}" + "".join(f"{v:>14}" for v in values))
    lines.append("-" * len(head))
    lines.append(
        f"{'Allocation retries':<32}{stats.get('num_alloc_retries', 0):>14}   "
        f"OOMs: {stats.get('num_ooms', 0)}   "
        f"device mallocs/frees: {stats.get('num_device_alloc', 0)}"
        f"/{stats.get('num_device_free', 0)}"
    )
    lines.append(rule)
    return "\n".join(lines) + "\n"


def _mirrored_module() -> Any:
    """``torch.cuda.memory`` (or the like) when flagos memory is that backend's allocator's, else
    an error naming the runtime: core's own caching allocator records no allocation history."""
    import importlib

    runtime = str(_C.runtime_name())
    if runtime.startswith("delegate:"):
        return importlib.import_module(f"torch.{runtime.split(':', 1)[1]}.memory")
    raise RuntimeError(
        f"torch.flagos.memory: allocation history and snapshots need an allocator that records "
        f"them; runtime {runtime!r} (vendor {_vendor_name()!r}) uses core's caching allocator, "
        f"which does not"
    )


def _vendor_name() -> str:
    import torch_fl

    return str(torch_fl.vendor().name)


def _record_memory_history(enabled: str | None = "all", *args: Any, **kwargs: Any) -> None:
    """Like ``torch.cuda.memory._record_memory_history``. On the delegate runtime flagos tensors
    are allocated by the mirrored backend's caching allocator (cuda's on the cuda vendor), so its
    history is flagos' history; elsewhere it raises."""
    _mirrored_module()._record_memory_history(enabled, *args, **kwargs)


def _snapshot(device: DeviceLike = None) -> dict[str, Any]:
    """Like ``torch.cuda.memory._snapshot`` (the mirrored allocator's segments and traces; on the
    cuda vendor they include CUDA tensors of the same process, as the pool is shared)."""
    return _mirrored_module()._snapshot(resolve(device) if device is not None else None)


def ipc_collect() -> None:
    """Frees memory this process sent to others once they have opened it (as
    ``torch.cuda.ipc_collect()``): a sent storage is kept until its receiver maps it, see
    :mod:`torch_fl.multiprocessing`."""
    import torch

    from torch_fl import multiprocessing

    multiprocessing.ipc_collect()
    if multiprocessing.mechanism() == "cuda":  # flagos memory travelled as CUDA IPC handles
        torch.cuda.ipc_collect()
