"""Cross-rank shape agreement, checked before a collective is handed to the inner library.

gloo answers a collective whose sizes differ between ranks by throwing inside its transport
thread, which terminates the process ("Received data size doesn't match expected size"); NCCL
hangs or returns garbage. So before each collective whose tensors must agree across ranks, ranks
exchange a fixed-size description of them (one small gloo all-gather on the CPU backend) and
every rank raises the same ValueError naming each rank's shapes when they differ.

On by default on the gloo tiers (where the alternative is a dead process); on the NCCL and FlagCX
tiers only with ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` (as torch's ProcessGroupWrapper) because the
extra host round trip would cost device-speed collectives their latency.
``FLAGOS_DIST_CHECK_SHAPES=0/1`` overrides both.
"""

from __future__ import annotations

import os
import zlib

import torch
import torch.distributed as dist

from torch_fl.distributed import tiers

__all__ = ["ENV_VAR", "check", "enabled"]

ENV_VAR = "FLAGOS_DIST_CHECK_SHAPES"
_TEXT = 240  # bytes of description exchanged per rank (longer ones are cut, the hash is not)


def enabled(tier: str) -> bool:
    value = os.environ.get(ENV_VAR, "").strip()
    if value:
        return value not in ("0", "false", "off", "no")
    if tier in (tiers.GLOO_ALIAS, tiers.GLOO_STAGED):
        return True
    return os.environ.get("TORCH_DISTRIBUTED_DEBUG", "").upper() == "DETAIL"


def describe(tensors: list[torch.Tensor]) -> str:
    return ", ".join(f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}" for t in tensors)


def check(cpu: dist.Backend, size: int, op: str, tensors: list[torch.Tensor], where: str) -> None:
    """Raise ValueError on every rank when ``tensors`` differ in dtype or shape across ranks."""
    text = describe(tensors)
    raw = text.encode()[:_TEXT]
    mine = torch.zeros(8 + _TEXT, dtype=torch.uint8)
    mine[:8] = torch.tensor([zlib.crc32(f"{op}|{text}".encode())], dtype=torch.int64).view(
        torch.uint8
    )
    mine[8 : 8 + len(raw)] = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
    gathered = [torch.empty_like(mine) for _ in range(size)]
    cpu.allgather([gathered], [mine]).wait()
    hashes = {bytes(g[:8].tolist()) for g in gathered}
    if len(hashes) == 1:
        return
    per_rank = "; ".join(
        f"rank {r}: {bytes(g[8:].tolist()).rstrip(bytes(1)).decode(errors='replace')}"
        for r, g in enumerate(gathered)
    )
    raise ValueError(f"{where}: tensor dtypes/shapes differ across ranks ({per_rank})")
