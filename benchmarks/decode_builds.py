"""Two builds of torch-fl against each other and native in ``gpt_step.py``'s batch-1 decode loop.

Whole-process decode figures vary between processes more than a router change moves them (the
same code read 0.77-1.17 of native in two processes of one round on the H200 host), so a change
is judged by running the old and the new build side by side, many times. Each round starts three
fresh children of ``gpt_step.py --serve``: native (``cuda``, or ``cpu`` with ``--native cpu``),
flagos with build A and flagos with build B. A build is a directory put first on the child's
``PYTHONPATH`` (``''``: the installed torch-fl), made with

    pip install --no-build-isolation --no-deps --target OLD_SITE packages/torch_fl_core

from the other commit's checkout (the vendor package stays the installed one). The children start
in parallel; once all three are ready their main threads are pinned to one CPU (``--cpus``;
default one near the GPU) and ``--reps`` decode blocks run per child in rotating order. Per round:
ms/token per child (median of its blocks) and ratios native/A, native/B. At the end: the median
ratio of each build over the rounds, and B/A per round (how often B was faster).

    python benchmarks/decode_builds.py [SITE_A [SITE_B]] [--rounds 9] [--reps 6] [--cpus auto|none|N,..]
        [--native cuda|cpu] [--quick] [--json out.json]

Prints ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import gpt_step as G
from _bench_env import describe, load_avg, record_end
from _models import GPT_FULL, GPT_QUICK
from _report import write_record


def spawn(cfg: dict, dev: str, site: str, base_path: str) -> G.RemoteSide:
    """A child whose ``torch_fl`` comes from ``site`` (``''``: the installed one)."""
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (site, base_path) if p)
    try:
        return G.RemoteSide(cfg, dev, wait=False, cpus=None)
    finally:
        if base_path:
            os.environ["PYTHONPATH"] = base_path
        else:
            os.environ.pop("PYTHONPATH", None)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "site_a",
        nargs="?",
        default="",
        help="build A: a directory first on PYTHONPATH, or '' "
        "(the installed one; both left out: installed against installed, the noise floor)",
    )
    p.add_argument("site_b", nargs="?", default="", help="build B, likewise")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--reps", type=int, default=6)
    p.add_argument("--cpus", default="auto", help="auto (one CPU near the GPU), none, or N,N,...")
    p.add_argument("--native", choices=("cuda", "cpu"), default=None)
    p.add_argument("--quick", action="store_true", help="small model (CPU smoke runs)")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)

    import torch

    native = args.native or ("cuda" if torch.cuda.is_available() else "cpu")
    small = args.quick or native == "cpu"  # as gpt_step.py: smoke sizes against the CPU
    cfg = dict(GPT_QUICK, **G.QUICK_RUN) if small else dict(GPT_FULL, **G.FULL_RUN)
    steps = cfg["decode_steps"]
    cpus = G.decode_cpus(args.cpus, native)
    base_path = os.environ.get("PYTHONPATH", "")
    env = describe(load_avg())
    t0 = time.perf_counter()
    print(
        f"decode of {steps} tokens, {args.rounds} rounds x {args.reps} blocks per child; "
        f"A={args.site_a or '(installed)'} B={args.site_b or '(installed)'}; native {native}; "
        f"children pinned to {cpus or 'nothing'}"
    )
    ratios: dict[str, list[float]] = {"A": [], "B": []}
    ms: dict[str, list[float]] = {"native": [], "A": [], "B": []}
    for i in range(args.rounds):
        sides = {
            "native": spawn(cfg, native, "", base_path),
            "A": spawn(cfg, "flagos", args.site_a, base_path),
            "B": spawn(cfg, "flagos", args.site_b, base_path),
        }
        try:
            for side in sides.values():
                side.wait_ready()
                if cpus and hasattr(os, "sched_setaffinity"):
                    os.sched_setaffinity(side.proc.pid, cpus)
            tokens = {k: side.decode(steps) for k, side in sides.items()}  # warm-up
            same = all(bool((tokens[k] == tokens["native"]).all()) for k in "AB")
            times: dict[str, list[float]] = {k: [] for k in sides}
            order = list(sides)
            for r in range(args.reps):
                for k in order[r % 3 :] + order[: r % 3]:
                    times[k].append(sides[k].timed_block("decode", steps))
        finally:
            for side in sides.values():
                side.close()
        med = {k: statistics.median(v) / steps * 1e3 for k, v in times.items()}
        for k in med:
            ms[k].append(med[k])
        for k in "AB":
            ratios[k].append(med["native"] / med[k])
        print(
            f"round {i}: ms/token {native} {med['native']:.3f} A {med['A']:.3f} B {med['B']:.3f}; "
            f"ratio A {ratios['A'][-1]:.3f} B {ratios['B'][-1]:.3f}; tokens equal: {same}",
            flush=True,
        )
    b_over_a = [b / a for a, b in zip(ratios["A"], ratios["B"], strict=True)]
    result = {
        "ratio_a": statistics.median(ratios["A"]),
        "ratio_b": statistics.median(ratios["B"]),
        "ratios": ratios,
        "ms_per_token": ms,
        "b_over_a": b_over_a,
        "b_faster_rounds": sum(x > 1 for x in b_over_a),
        "pinned_cpus": cpus,
    }
    print(
        f"\nmedian ratio ({native} / flagos): A {result['ratio_a']:.3f} "
        f"({min(ratios['A']):.3f}-{max(ratios['A']):.3f}), B {result['ratio_b']:.3f} "
        f"({min(ratios['B']):.3f}-{max(ratios['B']):.3f}); B/A median "
        f"{statistics.median(b_over_a):.3f}, B faster in {result['b_faster_rounds']} of {args.rounds}"
    )
    record_end(env, time.perf_counter() - t0)
    write_record(args.json, "decode_builds", env, config=cfg, decode_builds=result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
