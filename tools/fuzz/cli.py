"""The command line: run seeds (or supervise child processes that run them), print and record
the programs that differ."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

from . import execution
from .comparison import EXPECTED, compare_program
from .generator import gen_program

# The script that runs this command line: a supervisor starts it for every chunk of seeds.
LAUNCHER = Path(__file__).resolve().parents[1] / "differential_fuzz.py"


def run_seed(seed, show=False):
    lines, meta, tags = gen_program(seed)
    if show:
        print("\n".join(lines))
    try:
        res = compare_program(lines, meta, tags)
    except Exception as e:  # the harness itself failed: report it
        res = {
            "kind": "harness",
            "detail": f"{type(e).__name__}: {e}",
            "tb": traceback.format_exc()[-800:],
        }
    if res is not None:
        res["seed"] = seed
        res["program"] = lines
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--show", action="store_true")
    ap.add_argument(
        "--out",
        default="differential_fuzz.jsonl",
        help="JSON lines of the programs that differ, appended (default: %(default)s)",
    )
    ap.add_argument("--supervise", action="store_true", help="run chunks in child processes")
    ap.add_argument("--chunk", type=int, default=200)
    ap.add_argument(
        "--boxed",
        action="store_true",
        help="run both sides under a pass-through TorchDispatchMode (the router's boxed path)",
    )
    ap.add_argument("--time-limit", type=float, default=270.0)
    args = ap.parse_args()

    if args.supervise:
        s = args.seed
        end = args.seed + args.count
        t0 = time.time()
        while s < end and time.time() - t0 < args.time_limit:
            n = min(args.chunk, end - s)
            progress = args.out + ".progress"
            if os.path.exists(progress):
                os.remove(progress)
            p = subprocess.run(
                [
                    sys.executable,
                    str(LAUNCHER),
                    "--seed",
                    str(s),
                    "--count",
                    str(n),
                    "--out",
                    args.out,
                ]
                + (["--boxed"] if args.boxed else [])
                + ["--time-limit", str(max(5, args.time_limit - (time.time() - t0)))]
            )
            done = s
            if os.path.exists(progress):
                done = int(open(progress).read().strip() or s)
            if p.returncode != 0:
                # The crashed program is not regenerated here: that could crash the supervisor too
                with open(args.out, "a") as fh:
                    fh.write(
                        json.dumps(
                            {
                                "seed": done,
                                "kind": "crash",
                                "detail": f"exit {p.returncode}: rerun with --seed {done} --count 1 --show",
                            }
                        )
                        + "\n"
                    )
                s = done + 1
            else:
                s = done
        print(f"supervised: seeds {args.seed}..{s - 1} in {time.time() - t0:.0f}s")
        return

    execution.BOXED[0] = args.boxed
    stats = {}
    t0 = time.time()
    done = args.seed
    with open(args.out, "a") as fh:
        for seed in range(args.seed, args.seed + args.count):
            if time.time() - t0 > args.time_limit:
                break
            with open(args.out + ".progress", "w") as p:
                p.write(str(seed))
            res = run_seed(seed, show=args.show)
            kind = res["kind"] if res else "ok"
            stats[kind] = stats.get(kind, 0) + 1
            if res is not None and (kind not in EXPECTED or args.show):
                fh.write(json.dumps(res) + "\n")
                fh.flush()
                if args.show or kind not in EXPECTED:
                    print(
                        f"seed {seed}: {kind} at line {res.get('line')} [{res.get('op')}]: {str(res.get('detail'))[:300]}"
                    )
            done = seed + 1
    with open(args.out + ".progress", "w") as p:
        p.write(str(done))
    print(f"seeds {args.seed}..{done - 1}: {stats} in {time.time() - t0:.0f}s", file=sys.stderr)
