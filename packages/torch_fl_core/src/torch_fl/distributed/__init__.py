"""torch.distributed on ``flagos`` (docs/distributed.md).

``import torch`` registers the ``flagos`` backend (:mod:`~torch_fl.distributed.registration`), so

    dist.init_process_group("flagos")            # or device_id=torch.device("flagos", local_rank)

gives a process group over flagos tensors. It delegates to an existing collective library chosen
by the vendor's collective profile (:mod:`~torch_fl.distributed.tiers`); :func:`tier` says which
one and why the others were skipped. Groups created with backend ``gloo`` take flagos tensors
through a gloo tier (:mod:`~torch_fl.distributed.gloo`).
"""

from __future__ import annotations

import torch.distributed as dist

from torch_fl.distributed import gloo
from torch_fl.distributed.process_group import BACKEND_NAME, ProcessGroupFlagos
from torch_fl.distributed.registration import register
from torch_fl.distributed.tiers import (
    GLOO_TIERS,
    TIERS,
    TierChoice,
    TierUnavailableError,
    choose,
)
from torch_fl.distributed.transport import staged_bytes

__all__ = [
    "BACKEND_NAME",
    "GLOO_TIERS",
    "TIERS",
    "ProcessGroupFlagos",
    "TierChoice",
    "TierUnavailableError",
    "choose",
    "register",
    "staged_bytes",
    "tier",
]


def tier(group: dist.ProcessGroup | None = None) -> TierChoice:
    """The tier of ``group`` (default: the default group): which inner library, and why.

    For a group created with backend ``gloo``: the gloo tier its flagos tensors take. Raises
    ValueError for other groups (they have no tier).
    """
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if isinstance(pg, ProcessGroupFlagos):
        return pg.tier
    choice = gloo.tier_of(pg)
    if choice is not None:
        return choice
    raise ValueError(
        f"torch_fl.distributed.tier: {pg!r} is neither a flagos process group nor a gloo one "
        f"(backend {dist.get_backend(pg)!r}); create one with init_process_group('flagos')"
    )
