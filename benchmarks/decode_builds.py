"""Two builds of torch-fl against each other and native in ``gpt_step.py``'s batch-1 decode loop.

The method is ``_builds.py``'s: fresh children per round (native, flagos with build A, flagos with
build B), pinned, blocks of one decode each in rotating order. A build is a directory put first on
the child's ``PYTHONPATH`` (``''``: the installed torch-fl), made with

    pip install --no-build-isolation --no-deps --target OLD_SITE packages/torch_fl_core

from the other commit's checkout (the vendor package stays the installed one). Per round:
ms/token per child and ratios native/A, native/B; at the end the median ratio of each build and
B/A per round (how often B was faster).

    python benchmarks/decode_builds.py [SITE_A [SITE_B]] [--rounds 9] [--reps 6] [--cpus auto|none|N,..]
        [--native cuda|cpu] [--quick] [--json out.json]

Prints ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import time

import _builds
import gpt_step as G
from _bench_env import describe, load_avg, record_end
from _report import write_record


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
    _builds.add_round_args(p, rounds=9, reps=6)
    args = p.parse_args(argv)
    native, cfg = _builds.native_and_sizes(args)
    steps = cfg["decode_steps"]
    cpus = G.decode_cpus(args.cpus, native)
    env = describe(load_avg())
    t0 = time.perf_counter()
    print(
        f"decode of {steps} tokens, {args.rounds} rounds x {args.reps} blocks per child; "
        f"A={args.site_a or '(installed)'} B={args.site_b or '(installed)'}; native {native}; "
        f"children pinned to {cpus or 'nothing'}"
    )
    sites = {"A": args.site_a, "B": args.site_b}
    result = _builds.rounds(
        cfg, native, sites, "decode", steps, steps, "token", args.rounds, args.reps, cpus
    )
    print("\n" + _builds.summary(result, native))
    record_end(env, time.perf_counter() - t0)
    write_record(args.json, "decode_builds", env, config=cfg, decode_builds=result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
