"""Registering ``flagos`` with ``torch.distributed`` (done when ``torch_fl`` is imported).

After this, ``init_process_group("flagos")``, ``init_process_group(device_id=torch.device(
"flagos:0"))`` (torch maps the flagos device type to this backend) and specs such as
``"cpu:gloo,flagos:flagos"`` create a :class:`~torch_fl.distributed.process_group.ProcessGroupFlagos`,
and groups created with backend ``gloo`` take flagos tensors too (:mod:`torch_fl.distributed.gloo`).
"""

from __future__ import annotations

from typing import Any

import torch.distributed as dist

from torch_fl.distributed import gloo
from torch_fl.distributed.process_group import BACKEND_NAME, ProcessGroupFlagos

__all__ = ["create", "register"]


def create(options: Any, backend_options: Any = None) -> ProcessGroupFlagos:
    """The backend factory torch calls (extended API: ``_DistributedBackendOptions``)."""
    # Here, not at import: importing DCP costs half a second.
    from torch_fl.distributed import checkpoint

    checkpoint.install()
    return ProcessGroupFlagos(
        options.store,
        options.group_rank,
        options.group_size,
        options.timeout,
        group_name=str(getattr(options, "group_id", "") or ""),
        global_ranks=list(getattr(options, "global_ranks_in_group", None) or []) or None,
    )


def register() -> None:
    """Register the ``flagos`` backend and flagos on gloo once (idempotent: torch_fl may be
    imported again)."""
    if not dist.is_available():
        return
    if BACKEND_NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(
            BACKEND_NAME, create, extended_api=True, devices=[BACKEND_NAME]
        )
    gloo.register()
