"""A GPT training step on flagos against native, in fresh process pairs, and builds against each other.

The step is ``gpt_step.py``'s (``zero_grad``, forward and cross-entropy under bf16 autocast,
backward, AdamW with PyTorch's default ``foreach`` implementation) on the 12-layer, d_model 768,
vocab 32000 decoder at sequence 512, at two batch sizes: 8, where the H200 finishes a step's
kernels before the host has launched them (the router's per-call cost shows), and 64, where the
GPU is the bound (what flagos adds must vanish). Every process is fresh, its main thread pinned to
one CPU near the GPU; per round each side runs ``--reps`` blocks of ``--steps`` steps in rotating
order (``_builds.py``). With build sites (directories put first on ``PYTHONPATH``, made by
``pip install --no-build-isolation --no-deps --target SITE packages/torch_fl_core`` from the other
checkout) each build is a side of its own, so an old and a new build are measured side by side.

    python benchmarks/train_step.py [SITE_A [SITE_B]] [--batches 8,64] [--rounds 5] [--reps 5]
        [--steps 3] [--phases 0] [--cpus auto|none|N,..] [--native cuda|cpu] [--quick]
        [--json out.json]

``--phases N``: after its timed blocks each child runs N more steps timed phase by phase (host
time of ``zero_grad``, forward and loss, ``backward()``, ``opt.step()``, and the wait in the
final synchronize), printed as medians over the rounds per side: where a build's extra host
time goes, which the step ratio alone does not say.

Targets against cuda on the H200: batch 8 >= 0.97, batch 64 >= 0.995. Prints ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import _builds
import gpt_step as G
from _bench_env import describe, load_avg, record_end
from _models import GPT_FULL
from _report import Table, build_sides, write_record


def print_phases(split: dict[str, list[dict]]) -> None:
    """Host ms per step of each phase, median over the rounds, per side; the last column is the
    side's sum of the phases less native's."""
    table = Table("{:<10}" + "{:>11.3f}" * len(G.PHASES) + "{:>9.3f}", "side", *G.PHASES, "delta")
    med = {k: {p: statistics.median(r[p] for r in v) for p in G.PHASES} for k, v in split.items()}
    native = sum(med["native"].values())
    table.header()
    for k, m in med.items():
        table.row(k, *m.values(), sum(m.values()) - native)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "sites", nargs="*", help="builds: directories first on PYTHONPATH ('' installed)"
    )
    p.add_argument("--batches", default=None, help="comma-separated batch sizes (default 8,64)")
    p.add_argument("--steps", type=int, default=3, help="training steps per timed block")
    p.add_argument(
        "--phases",
        type=int,
        default=0,
        help="after its blocks, each child times this many steps phase by phase (zero_grad, "
        "forward, backward, optimizer, the final wait); 0: off",
    )
    _builds.add_round_args(p, rounds=5, reps=5)
    args = p.parse_args(argv)
    native, base = _builds.native_and_sizes(args)
    small = base["vocab"] < GPT_FULL["vocab"]
    batches = [int(b) for b in (args.batches or ("2,4" if small else "8,64")).split(",")]
    sites = build_sides(args.sites)
    cpus = G.decode_cpus(args.cpus, native)
    env = describe(load_avg())
    t0 = time.perf_counter()
    print(
        f"training step, {args.rounds} rounds x {args.reps} blocks of {args.steps} steps per child; "
        + ", ".join(f"{k}={v or '(installed)'}" for k, v in sites.items())
        + f"; native {native}; children pinned to {cpus or 'nothing'}",
        flush=True,
    )
    results = {}
    for batch in batches:
        cfg = dict(base, batch=batch)
        print(f"\nbatch {batch} x {cfg['seq']}", flush=True)
        r = _builds.rounds(
            cfg,
            native,
            sites,
            "step",
            args.steps,
            args.steps,
            "step",
            args.rounds,
            args.reps,
            cpus,
            args.phases,
        )
        print(f"batch {batch}: " + _builds.summary(r, native), flush=True)
        if args.phases:
            print_phases(r["phases"])
        results[str(batch)] = r
    record_end(env, time.perf_counter() - t0)
    write_record(args.json, "train_step", env, config=base, train_step=results, sites=sites)
    return 0


if __name__ == "__main__":
    sys.exit(main())
