"""Loading PyTorch's OpInfo database and finding entries in it.

``torch.testing._internal.common_methods_invocations`` needs ``expecttest`` (part of torch-fl's
``test`` extra). Entries are named by ``OpInfo.full_name``: ``name`` or ``name.variant_test_name``
(``max.reduction_with_dim``).
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["find", "op_db"]


@functools.cache
def op_db() -> tuple[Any, ...]:
    """Every OpInfo entry of this torch (imported on first use: a few seconds)."""
    try:
        from torch.testing._internal.common_methods_invocations import op_db as db
    except ModuleNotFoundError as exc:  # expecttest, most likely
        raise ModuleNotFoundError(
            f"PyTorch's OpInfo database needs {exc.name!r}: install torch-fl-core[test] "
            f"(pip install {exc.name})"
        ) from exc
    return tuple(db)


@functools.cache
def _by_name() -> dict[str, Any]:
    return {op.full_name: op for op in op_db()}


def find(full_name: str) -> Any | None:
    """The entry named ``full_name`` (``name`` or ``name.variant``), or ``None``."""
    return _by_name().get(full_name)
