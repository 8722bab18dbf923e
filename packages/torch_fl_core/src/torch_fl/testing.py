"""Helpers for tests and demos that compare ``flagos`` results with CPU ones."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from torch_fl import _C

__all__ = ["assert_close_cpu", "fallback_counts", "to_cpu"]


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
