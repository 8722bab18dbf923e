"""Helpers for tests and demos that compare ``flagos`` results with CPU ones."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from torch_fl import _C

__all__ = ["assert_close_cpu", "cpu_kernels", "fallback_counts", "to_cpu"]


def to_cpu(obj: Any) -> Any:
    """``obj`` with every tensor in it (through lists, tuples and dicts) copied to the CPU."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {key: to_cpu(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(value) for value in obj)
    return obj


def assert_close_cpu(
    actual: Any,
    expected: Any,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    msg: str | None = None,
) -> None:
    """``torch.testing.assert_close`` after moving both sides to the CPU (devices may differ)."""
    torch.testing.assert_close(to_cpu(actual), to_cpu(expected), rtol=rtol, atol=atol, msg=msg)


# Backends that run ATen's own CPU kernels: box:cpu re-dispatches into them on flagos memory, the
# CPU fallback copies to the CPU and back, "none" runs PyTorch's default for flagos (composite).
_CPU_KERNEL_BACKENDS = frozenset({"box:cpu", "cpu", "none"})


def cpu_kernels() -> bool:
    """Whether every operator on ``flagos`` runs ATen's own CPU kernels, so computed results are
    bit-identical to the CPU's.

    Decided from what the runtime and the route table declare, never from the vendor's name: the
    runtime declares ``CAP_HOST_ADDRESSABLE_MEMORY`` (CPU kernels can run on device memory) and the
    installed routes name only ``box:cpu`` and the CPU fallback (the ``sim`` vendor). A vendor's own
    kernels (CUDA's behind ``box:cuda``, FlagGems, native SDK kernels) round differently from the
    CPU's by a few ulps; results are then compared within :mod:`torch_fl.conformance.tolerances`.
    """
    if not int(_C.runtime_capabilities()) & int(_C.CAP_HOST_ADDRESSABLE_MEMORY):
        return False
    backends = {
        backend
        for _, default, rules in _C.router_routes()
        for backend in (default, *(b for _, b in rules))
    }
    return backends <= _CPU_KERNEL_BACKENDS


@contextlib.contextmanager
def fallback_counts() -> Iterator[dict[str, int]]:
    """Operators served by ATen's CPU fallback inside the block, with call counts.

    The dict is filled when the block exits; counts are deltas, so the process-wide counters are
    left as they were::

        with torch_fl.testing.fallback_counts() as counts:
            model(x)
        assert "aten::mm" not in counts
    """
    before = dict(_C.fallback_counts())
    counts: dict[str, int] = {}
    try:
        yield counts
    finally:
        after = dict(_C.fallback_counts())
        for op, n in after.items():
            delta = int(n) - int(before.get(op, 0))
            if delta > 0:
                counts[op] = delta
