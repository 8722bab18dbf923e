"""Where a routed call's host time goes, per step of the router, for each call of a decode token.

For every case of ``decode_op_costs.py`` (the calls one decoded token of ``gpt_step.py``'s model
makes), blocks of calls alternate between ``flagos`` and native tensors (``cuda`` on the cuda
vendor, ``cpu`` elsewhere), and a profiling build's counters split the flagos calls' routed time
into the router's steps: ``pick`` (the argument scan and the route), ``scope`` (the device scope,
profiler scope and argument mapper), ``args`` (the alias views of the operands), ``kernel`` (the
target backend's kernel, e.g. CUDA's, called on the aliases), ``results`` (out= adoption and the
results joining flagos), ``other`` (destructors, the return; also the whole call of a routed op a
boxed backend serves). ``router`` is pick + scope + args + results + other per flagos call;
``outside`` is the flagos call's time less its routed calls' time (Python, the dispatcher, views
and composite ops), shown beside the native call's time less the flagos kernel step's: where
the kernel step costs what the native kernel does, the two agree and the flagos/native delta is
the router's. Figures are medians over the repetitions, microseconds per call.

Needs a core built with the counters (they are compiled out of wheels):

    pip install --no-build-isolation -C cmake.define.TORCH_FL_ROUTE_PHASES=ON packages/torch_fl_core
    FLAGOS_VENDOR=cuda python benchmarks/route_phases.py [--n 2000] [--reps 7] [--json out.json]

Without them it says so and exits 0. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
import torch_fl
from _bench_env import record_end
from _gpu_bench import add_block_args, add_common_args, start
from _report import Table, write_record
from decode_op_costs import sample_cases, submit_time

PHASES = ("pick", "scope", "args", "kernel", "results", "other")
ROUTER = ("pick", "scope", "args", "results", "other")


def ticks_per_us() -> float:
    """The counters' tick rate, against perf_counter over a short sleep."""
    t0, c0 = time.perf_counter(), torch_fl._C.route_phase_ticks()
    time.sleep(0.2)
    t1, c1 = time.perf_counter(), torch_fl._C.route_phase_ticks()
    return (c1 - c0) / ((t1 - t0) * 1e6)


def run(native: str, n: int, reps: int, max_block_ms: float, rate: float) -> list[dict]:
    counted: dict[int, dict[str, list[float]]] = {}

    def measure(i: int, side: str, fn, k: int, dev: torch.device) -> float:
        torch_fl._C.route_phases()  # drop what the warm-up counted
        per_call = submit_time(i, side, fn, k, dev)
        got = torch_fl._C.route_phases()
        if side == "flagos":
            mine = counted.setdefault(i, {p: [] for p in (*PHASES, "calls")})
            for p in PHASES:
                mine[p].append(got[p] / rate / k)
            mine["calls"].append(got["calls"] / k)
        return per_call

    rows = []
    for i, (label, per_token, k, samples) in enumerate(
        sample_cases(native, n, reps, max_block_ms, measure)
    ):
        row = {
            "case": label,
            "per_token": per_token,
            "calls_per_block": k,
            "flagos_us": statistics.median(samples["flagos"]) * 1e6,
            "native_us": statistics.median(samples["native"]) * 1e6,
            "routed_per_call": statistics.median(counted[i]["calls"]),
        }
        for p in PHASES:
            row[p + "_us"] = statistics.median(counted[i][p])
        row["router_us"] = sum(row[p + "_us"] for p in ROUTER)
        row["outside_us"] = row["flagos_us"] - row["router_us"] - row["kernel_us"]
        row["native_outside_us"] = row["native_us"] - row["kernel_us"]
        row["delta_us"] = row["flagos_us"] - row["native_us"]
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_block_args(p, 2000, 7, "calls")
    add_common_args(p)
    args = p.parse_args(argv)
    if not torch_fl._C.route_phases()["enabled"]:
        print(
            "route_phases: this torch-fl-core was built without the route phase counters; "
            "rebuild it with -C cmake.define.TORCH_FL_ROUTE_PHASES=ON (see the docstring)"
        )
        return 0
    if args.quick:
        args.n, args.reps = min(args.n, 50), min(args.reps, 3)
    native, env = start(args)
    rate = ticks_per_us()
    print(
        f"method: median over {args.reps} interleaved blocks of up to {args.n} calls, us per call; "
        f"counter rate {rate:.1f} ticks/us\n"
    )
    t0 = time.perf_counter()
    rows = run(native, args.n, args.reps, args.max_block_ms, rate)
    elapsed = time.perf_counter() - t0
    w = max(len(r["case"]) for r in rows) + 2
    table = Table(
        f"{{:<{w}}}{{:>8.2f}}{{:>8.2f}}{{:>+7.2f}}{{:>7.1f}}"
        + "{:>7.2f}" * 6
        + "{:>8.2f}{:>8.2f}{:>8.2f}",
        *("case", "flagos", native, "delta", "routed"),
        *PHASES,
        *("router", "outside", "nat-out"),
    )
    table.header()
    for r in rows:
        table.row(
            *(r["case"], r["flagos_us"], r["native_us"], r["delta_us"], r["routed_per_call"]),
            *(r[p + "_us"] for p in PHASES),
            *(r["router_us"], r["outside_us"], r["native_outside_us"]),
        )
    routed = [r for r in rows if r["routed_per_call"] > 0]
    if routed:
        router = statistics.median(r["router_us"] / r["routed_per_call"] for r in routed)
        delta = statistics.median(r["delta_us"] / r["routed_per_call"] for r in routed)
        print(
            f"\nper routed call (median over the cases): router {router:.2f} us, "
            f"flagos - {native} {delta:+.2f} us"
        )
    record_end(env, elapsed)
    method = {"n": args.n, "reps": args.reps, "native": native, "ticks_per_us": rate}
    write_record(args.json, "route_phases", env, method, rows=rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
