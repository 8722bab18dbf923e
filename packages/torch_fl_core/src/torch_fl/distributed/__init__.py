"""torch.distributed on ``flagos`` (docs/distributed.md).

``import torch`` registers the ``flagos`` backend (:mod:`~torch_fl.distributed.registration`), so

    dist.init_process_group("flagos")            # or device_id=torch.device("flagos", local_rank)

gives a process group over flagos tensors. It delegates to an existing collective library chosen
by the vendor's collective profile (:mod:`~torch_fl.distributed.tiers`); :func:`tier` says which
one and why the others were skipped.
"""

from __future__ import annotations

import torch.distributed as dist

from torch_fl.distributed.process_group import BACKEND_NAME, ProcessGroupFlagos
from torch_fl.distributed.registration import register
from torch_fl.distributed.tiers import TIERS, TierChoice, TierUnavailableError, choose

__all__ = [
    "BACKEND_NAME",
    "TIERS",
    "ProcessGroupFlagos",
    "TierChoice",
    "TierUnavailableError",
    "choose",
    "register",
    "tier",
]


def tier(group: dist.ProcessGroup | None = None) -> TierChoice:
    """The tier of ``group`` (default: the default group): which inner library, and why.

    Raises ValueError when the group is not a flagos group (it then has no tier).
    """
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if isinstance(pg, ProcessGroupFlagos):
        return pg.tier
    raise ValueError(
        f"torch_fl.distributed.tier: {pg!r} is not a flagos process group (backend "
        f"{dist.get_backend(pg)!r}); create one with init_process_group('flagos')"
    )
