"""The models the benchmarks run: a GPT-style decoder (and its block) and a 3-layer MLP.

Only torch is imported here: ``gpt_step.py``'s native child builds the same model in a process
that never loads torch-fl.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

# The decoder's sizes: the full model (about 110M parameters) and the smoke-test one.
GPT_FULL = {"layers": 12, "d_model": 768, "heads": 12, "vocab": 32000, "seq": 512, "batch": 64}
GPT_QUICK = {"layers": 2, "d_model": 128, "heads": 4, "vocab": 1024, "seq": 64, "batch": 4}


class Block(nn.Module):
    """A pre-LayerNorm transformer block: causal self-attention through
    ``scaled_dot_product_attention`` and a 4x GELU MLP. With ``cache`` (a dict per block) keys and
    values are appended to those of earlier calls (``torch.cat``), as a decode loop does."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor, cache: dict | None = None) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        causal = True
        if cache is not None:
            if "k" in cache:
                k = torch.cat([cache["k"], k], dim=2)
                v = torch.cat([cache["v"], v], dim=2)
                causal = t > 1  # one new token attends to every cached one
            cache["k"], cache["v"] = k, v
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """Token and position embeddings, ``layers`` blocks, a final LayerNorm and an LM head tied to
    the token embedding."""

    def __init__(self, layers: int, d: int, heads: int, vocab: int, max_seq: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx: torch.Tensor, caches: list | None = None, pos0: int = 0):
        t = idx.shape[1]
        pos = torch.arange(pos0, pos0 + t, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for i, blk in enumerate(self.blocks):
            x = blk(x, caches[i] if caches is not None else None)
        return self.head(self.ln(x))


def gpt(cfg: dict) -> GPT:
    """The decoder of ``cfg`` (``GPT_FULL``'s keys, plus ``prompt`` and ``decode_steps``), with
    positions for the longer of a training sequence and a prompt plus its decoded tokens."""
    max_seq = max(cfg["seq"], cfg["prompt"] + cfg["decode_steps"])
    return GPT(cfg["layers"], cfg["d_model"], cfg["heads"], cfg["vocab"], max_seq)


def mlp(width: int) -> nn.Module:
    """Linear-ReLU-Linear-ReLU-Linear, every layer ``width`` wide."""
    return nn.Sequential(
        nn.Linear(width, width),
        nn.ReLU(),
        nn.Linear(width, width),
        nn.ReLU(),
        nn.Linear(width, width),
    )


def optimizer_impl(opt: torch.optim.Optimizer) -> str:
    """Which implementation ``opt`` runs: ``fused``, ``foreach`` or the per-tensor ``for-loop``.
    PyTorch picks its default only where neither ``fused`` nor ``foreach`` was given: an explicit
    ``fused=False`` alone means the for-loop."""
    from torch.optim.optimizer import _default_to_fused_or_foreach

    d = opt.defaults
    if d.get("fused"):
        return "fused"
    if d.get("foreach") is not None or d.get("fused") is not None:
        return "foreach" if d.get("foreach") else "for-loop"
    params = [p for g in opt.param_groups for p in g["params"]]
    fused, foreach = _default_to_fused_or_foreach(params, differentiable=False, use_fused=False)
    return "fused" if fused else ("foreach" if foreach else "for-loop")
