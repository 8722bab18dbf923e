"""Host cost per operator of a batch-1 decode step, flagos against native, weighted per token.

``gpt_step.py``'s decode loop is launch-bound, and whole-process figures on a shared host vary
more between processes than the 10 % the target allows. This benchmark measures, in one process,
the submit time of each kind of call one decoded token of that model makes (its shapes: batch 1,
one new token, d_model 768, 12 heads, a 40-token KV cache, vocab 32000; under bf16 autocast and
no_grad, weights as parameters so autocast caches their bf16 copies), on ``flagos`` and on native
tensors (``cuda`` on the cuda vendor, ``cpu`` elsewhere, ``--native`` overrides). Each case's
per-call time is multiplied by how often a token makes that call in the 12-layer model (per
layer: two linears on float32 inputs (qkv, fc: cast + addmm), two on bfloat16 inputs (proj, out),
two layer norms, two residual adds, two KV-cache cats, attention, gelu, the q/k/v split with its
views; per token: the final layer norm, the head, two embeddings, arange, argmax), and the sums
give a per-token ratio.

Method: every case is warmed up, then for each of ``--reps`` repetitions a block of ``--n`` calls
(fewer where a block would pass ``--max-block-ms``: the CPU comparison) is timed per side up to
the return of the last call (before one synchronize), the side order alternating; the figure per
case and side is the median over repetitions.

    python benchmarks/decode_op_costs.py [--n 1000] [--reps 7] [--native cuda|cpu] [--quick] [--json out.json]

The whole-model target (decode ratio >= 0.9 against cuda) is ``gpt_step.py``'s; this one explains
it.
Prints ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from _bench_env import record_end
from _gpu_bench import add_block_args, add_common_args, start, timed_block
from _models import GPT_FULL
from _report import Table, write_record

D, HEADS, VOCAB, LAYERS = (GPT_FULL[k] for k in ("d_model", "heads", "vocab", "layers"))
CACHED = 40  # cached keys and values per layer: a token partway through gpt_step.py's decode


def make_cases(dev: torch.device) -> list[tuple[str, int, Callable[[], object]]]:
    """(label, calls per token, zero-argument callable); the same values on every device."""
    g = torch.Generator().manual_seed(0)

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(dev)

    def param(*shape: int) -> torch.Tensor:
        return r(*shape).requires_grad_()  # a leaf that requires grad: autocast caches its cast

    x = r(1, 1, D)  # the float32 residual stream
    xb = r(1, 1, D).bfloat16()
    w_qkv, b_qkv = param(3 * D, D), param(3 * D)
    w_out, b_out = param(D, 4 * D), param(D)
    hb = r(1, 1, 4 * D).bfloat16()
    ln_w, ln_b = param(D), param(D)
    qkv = r(1, 1, 3 * D).bfloat16()
    q = r(1, HEADS, 1, D // HEADS).bfloat16()
    kv = r(1, HEADS, CACHED, D // HEADS).bfloat16()
    emb, w_head = param(VOCAB, D), param(VOCAB, D)
    idx = torch.tensor([[5]]).to(dev)
    logits = r(1, 1, VOCAB)
    return [
        ("linear, float32 input (cast, addmm)", 2 * LAYERS, lambda: F.linear(x, w_qkv, b_qkv)),
        ("linear, bfloat16 input (addmm)", 2 * LAYERS, lambda: F.linear(hb, w_out, b_out)),
        ("layer_norm", 2 * LAYERS + 1, lambda: F.layer_norm(x, (D,), ln_w, ln_b)),
        ("residual add (float32 + bfloat16)", 2 * LAYERS, lambda: x + xb),
        ("cat (KV cache)", 2 * LAYERS, lambda: torch.cat([kv, q], dim=2)),
        ("scaled_dot_product_attention", LAYERS, lambda: F.scaled_dot_product_attention(q, kv, kv)),
        ("gelu", LAYERS, lambda: F.gelu(hb)),
        (
            "split, view, transpose (q, k, v)",
            LAYERS,
            lambda: [z.view(1, 1, HEADS, -1).transpose(1, 2) for z in qkv.split(D, dim=-1)],
        ),
        ("transpose, reshape", LAYERS, lambda: q.transpose(1, 2).reshape(1, 1, D)),
        ("head (cast, mm)", 1, lambda: F.linear(x, w_head)),
        ("embedding", 2, lambda: F.embedding(idx, emb)),
        ("arange", 1, lambda: torch.arange(16, 17, device=dev)),
        ("select, argmax", 1, lambda: logits[:, -1].argmax(-1, keepdim=True)),
    ]


# measure(case index, side, call, k, device) -> seconds per call of one timed block of k calls.
Measure = Callable[[int, str, Callable[[], object], int, torch.device], float]


def submit_time(i: int, side: str, fn: Callable[[], object], k: int, dev: torch.device) -> float:
    return timed_block(fn, k, dev)[0] / k


def sample_cases(
    native: str, n: int, reps: int, max_block_ms: float, measure: Measure = submit_time
) -> list[tuple[str, int, int, dict[str, list[float]]]]:
    """Per case: (label, calls per token, calls per block, seconds per call of each side's
    blocks). Every case is warmed up; then its blocks alternate between the sides (the order
    alternating too), each inside the side's autocast context, timed by ``measure``."""
    fl = torch.device("flagos", 0)
    nd = torch.device(native, 0) if native == "cuda" else torch.device("cpu")
    sides = {"flagos": (fl, make_cases(fl)), "native": (nd, make_cases(nd))}
    out = []
    with torch.no_grad():
        for i, (label, per_token, _) in enumerate(sides["flagos"][1]):
            samples: dict[str, list[float]] = {"flagos": [], "native": []}
            per = 0.0
            for dev, cases in sides.values():
                with torch.autocast(dev.type, dtype=torch.bfloat16):
                    timed_block(cases[i][2], 20, dev)  # warm up, fill the autocast cache
                    per = max(per, timed_block(cases[i][2], 5, dev)[1] / 5)
            k = max(5, min(n, int(max_block_ms * 1e-3 / max(per, 1e-9))))
            for rep in range(reps):
                order = list(sides) if (rep + i) % 2 == 0 else list(sides)[::-1]
                for name in order:
                    dev, cases = sides[name]
                    with torch.autocast(dev.type, dtype=torch.bfloat16):
                        timed_block(cases[i][2], 5, dev)  # refill the cache of this context
                        samples[name].append(measure(i, name, cases[i][2], k, dev))
            out.append((label, per_token, k, samples))
    return out


def run(native: str, n: int, reps: int, max_block_ms: float) -> list[dict]:
    rows = []
    for label, per_token, k, samples in sample_cases(native, n, reps, max_block_ms):
        f, nat = statistics.median(samples["flagos"]), statistics.median(samples["native"])
        rows.append(
            {
                "case": label,
                "per_token": per_token,
                "calls_per_block": k,
                "flagos_us": f * 1e6,
                "native_us": nat * 1e6,
                "ratio": nat / f,
                "delta_us": (f - nat) * 1e6,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_block_args(p, 1000, 7, "calls")
    add_common_args(p)
    args = p.parse_args(argv)
    if args.quick:
        args.n, args.reps = min(args.n, 50), min(args.reps, 3)
    native, env = start(args)
    print(
        f"method: median over {args.reps} interleaved blocks of up to {args.n} calls, submit time per "
        f"call; ratio = {native} / flagos (speed); per token = calls per token x delta\n"
    )
    t0 = time.perf_counter()
    rows = run(native, args.n, args.reps, args.max_block_ms)
    elapsed = time.perf_counter() - t0
    w = max(len(r["case"]) for r in rows) + 2
    table = Table(
        f"{{:<{w}}}{{:>7}}{{:>10.2f}}{{:>11.2f}}{{:>7.2f}}{{:>+10.2f}}{{:>+10.1f}}",
        *("case", "/token", native + " us", "flagos us", "ratio", "delta us", "us/token"),
    )
    table.header()
    for r in rows:
        table.row(
            *(r["case"], r["per_token"], r["native_us"], r["flagos_us"], r["ratio"]),
            *(r["delta_us"], r["per_token"] * r["delta_us"]),
        )
    flagos_token = sum(r["per_token"] * r["flagos_us"] for r in rows)
    native_token = sum(r["per_token"] * r["native_us"] for r in rows)
    summary = {
        "flagos_us_per_token": flagos_token,
        "native_us_per_token": native_token,
        "ratio": native_token / flagos_token,
    }
    print(
        f"\nper token (these calls): {native} {native_token:.0f} us, flagos {flagos_token:.0f} us, "
        f"ratio {summary['ratio']:.3f} (gpt_step.py's decode target, vs cuda: >= 0.9)"
    )
    record_end(env, elapsed)
    method = {"n": args.n, "reps": args.reps, "native": native}
    write_record(args.json, "decode_op_costs", env, method, rows=rows, summary=summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
