"""Per-op host overhead of the flagos device against plain CPU tensors.

For a set of small operators, the host time of one call on ``flagos`` is divided by the host time
of the same call on CPU tensors. On the built-in ``sim`` vendor every operator is routed to
``box:cpu`` (the CPU kernel running on alias views of the flagos memory), so the kernels are the
same and the ratio is the cost of the device layer: dispatch to the PrivateUse1 key, the router,
alias views, result copies, the device guard and the flagos allocator.

Three flagos configurations are measured, each against CPU, in the same run:

- ``routed``: the route table as installed at import (unboxed route kernels, the default);
- ``boxed``: the same routes with the boxed kernels forced
  (``torch_fl._C.router_install(routes, False)``);
- ``off``: routing disabled (``torch_fl._C.router_install([])``): routed operators go through
  ATen's boxed CPU fallback (copy in, compute on CPU, copy out), which is what the router replaces.

Method: every case is warmed up, then for each of ``--reps`` repetitions and for each
configuration, a block of N calls is timed on flagos and right after it a block of N calls on CPU
(interleaved, so that drift affects both sides alike). The figure per case and side is the
**minimum** over the repetitions of the per-call time of a block (the median is in the JSON too).
N is chosen per case so that one block takes about ``--block-ms`` milliseconds. The time includes
the Python call (the same on both sides); ``loop overhead`` is printed for reference. The routes
in use before the run are reinstalled at the end, even on error.

    python benchmarks/dispatch_overhead.py [--reps 11] [--block-ms 10] [--json out.json]

Prints ratios; asserts nothing about timings.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import statistics
import sys
import time
from collections.abc import Callable

import torch
import torch_fl
from _bench_env import describe, load_avg, record_end
from _report import Table, write_record

C = torch_fl._C
SIZES = (8, 4096)
MODES = ("routed", "boxed", "off")


def make_cases(dev: torch.device, n: int) -> list[tuple[str, Callable[[], object]]]:
    """(label, zero-argument callable) for one device and one element count."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, generator=g).to(dev)
    b = torch.randn(n, generator=g).to(dev)
    ia = a.clone()  # in-place target (values drift; irrelevant for timing)
    if n == 8:
        ma, mb, mm_label = a.view(2, 4), b.view(4, 2), "mm 2x4 @ 4x2"
    else:
        side = int(round(n**0.5))
        assert side * side == n, "the second size must be a square for mm"
        ma, mb, mm_label = (
            a.view(side, side),
            b.view(side, side),
            f"mm {side}x{side} @ {side}x{side}",
        )
    half = n // 2
    return [
        ("add", lambda: torch.add(a, b)),
        ("mul", lambda: torch.mul(a, b)),
        ("relu", lambda: torch.relu(a)),
        ("sum", lambda: a.sum()),
        (mm_label, lambda: torch.mm(ma, mb)),
        (f"view({2},{half}).t().reshape({n})", lambda: a.view(2, half).t().reshape(n)),
        ("add_ (in-place)", lambda: ia.add_(b)),
        (f"empty({n})", lambda: torch.empty(n, device=dev)),
    ]


def per_call(fn: Callable[[], object], n: int) -> float:
    rep = itertools.repeat
    t0 = time.perf_counter()
    for _ in rep(None, n):
        fn()
    return (time.perf_counter() - t0) / n


def install(mode: str, saved: list) -> None:
    if mode == "routed":
        C.router_install(saved, True)
    elif mode == "boxed":
        C.router_install(saved, False)
    elif mode == "off":
        C.router_install([])
    else:
        raise ValueError(mode)


def run(reps: int, block_ms: float, modes: tuple[str, ...]) -> list[dict]:
    fl = torch.device("flagos", 0)
    cpu = torch.device("cpu")
    saved = C.router_routes()
    rows: list[dict] = []
    try:
        for n in SIZES:
            fl_cases = make_cases(fl, n)
            cpu_cases = make_cases(cpu, n)
            # Calibrate N per case on the default configuration (slowest side decides).
            calls = []
            for (_, ff), (_, fc) in zip(fl_cases, cpu_cases, strict=True):
                per_call(ff, 200)
                per_call(fc, 200)
                t = max(per_call(ff, 500), per_call(fc, 500))
                calls.append(max(100, min(50_000, int(block_ms * 1e-3 / t))))
            samples = {
                (i, side, m): []
                for i in range(len(fl_cases))
                for side in ("flagos", "cpu")
                for m in modes
            }
            for _ in range(reps):
                for m in modes:
                    install(m, saved)
                    for i, ((_, ff), (_, fc)) in enumerate(zip(fl_cases, cpu_cases, strict=True)):
                        k = calls[i]
                        # Off is ~10x slower per call; keep its blocks about as long as the others.
                        if m == "off":
                            k = max(50, k // 10)
                        per_call(ff, max(20, k // 20))  # re-warm after a route change
                        samples[(i, "flagos", m)].append(per_call(ff, k))
                        samples[(i, "cpu", m)].append(per_call(fc, k))
                install("routed", saved)
            for i, (label, _) in enumerate(fl_cases):
                row: dict = {"op": label, "numel": n, "calls_per_block": calls[i]}
                # CPU figure: over every block measured on CPU, whichever mode it sat next to.
                cpu_all = [s for m in modes for s in samples[(i, "cpu", m)]]
                row["cpu_us"] = min(cpu_all) * 1e6
                row["cpu_median_us"] = statistics.median(cpu_all) * 1e6
                for m in modes:
                    fs = samples[(i, "flagos", m)]
                    cs = samples[(i, "cpu", m)]
                    row[f"{m}_us"] = min(fs) * 1e6
                    row[f"{m}_median_us"] = statistics.median(fs) * 1e6
                    # Ratio against the CPU blocks interleaved with this mode.
                    row[f"{m}_ratio"] = min(fs) / min(cs)
                    row[f"{m}_median_ratio"] = statistics.median(fs) / statistics.median(cs)
                rows.append(row)
    finally:
        C.router_install(saved, True)
    return rows


def summarize(rows: list[dict], modes: tuple[str, ...]) -> dict:
    out: dict = {}
    for n in SIZES:
        sel = [r for r in rows if r["numel"] == n]
        for m in modes:
            out[f"median_{m}_ratio_n{n}"] = statistics.median(r[f"{m}_ratio"] for r in sel)
        if "boxed" in modes and "routed" in modes:
            out[f"median_boxed_over_routed_n{n}"] = statistics.median(
                r["boxed_us"] / r["routed_us"] for r in sel
            )
    return out


def print_table(rows: list[dict], modes: tuple[str, ...], summary: dict) -> None:
    w = max(len(r["op"]) for r in rows) + 2
    table = Table(
        f"{{:<{w}}}{{:>6}}{{:>9.2f}}" + "{:>11.2f}{:>7.2f}" * len(modes),
        *("op", "numel", "cpu us"),
        *(t for m in modes for t in (m + " us", "x cpu")),
    )
    table.header()
    for n in SIZES:
        for r in (r for r in rows if r["numel"] == n):
            table.row(
                r["op"], n, r["cpu_us"], *(r[m + k] for m in modes for k in ("_us", "_ratio"))
            )
        medians = (summary[f"median_{m}_ratio_n{n}"] for m in modes)
        table.row("median ratio", n, "", *(v for med in medians for v in ("", med)))
        print()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=11, help="repetitions per case (default 11)")
    p.add_argument("--block-ms", type=float, default=10.0, help="target ms per timed block")
    p.add_argument("--modes", default=",".join(MODES), help="subset of routed,boxed,off")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = p.parse_args(argv)
    modes = tuple(m for m in args.modes.split(",") if m)
    if "routed" not in modes:
        modes = ("routed", *modes)

    load0 = load_avg()
    env = describe(load0)
    f = lambda: None  # noqa: E731
    per_call(f, 100_000)
    loop_us = min(per_call(f, 100_000) for _ in range(5)) * 1e6
    print(f"loop overhead (a no-op lambda call): {loop_us:.3f} us, included on both sides")
    print(
        f"method: min over {args.reps} repetitions of a ~{args.block_ms:g} ms block of calls, "
        f"flagos and CPU blocks interleaved; 'x cpu' = flagos time / CPU time\n"
    )

    gc.collect()
    gc.disable()
    t0 = time.perf_counter()
    try:
        rows = run(args.reps, args.block_ms, modes)
    finally:
        gc.enable()
    elapsed = time.perf_counter() - t0
    summary = summarize(rows, modes)
    print_table(rows, modes, summary)

    n0 = SIZES[0]
    print(
        f"median flagos/CPU ratio, {n0}-element tensors: {summary[f'median_routed_ratio_n{n0}']:.2f}"
    )
    print("  target: <= 1.3 for tiny tensors")
    if "off" in modes:
        for n in SIZES:
            print(
                f"router off (CPU fallback), {n} elements: median ratio "
                f"{summary[f'median_off_ratio_n{n}']:.2f}"
                f" vs {summary[f'median_routed_ratio_n{n}']:.2f} routed"
            )
    if "boxed" in modes:
        for n in SIZES:
            print(
                f"boxed vs unboxed route kernels, {n} elements: boxed/unboxed time median "
                f"{summary[f'median_boxed_over_routed_n{n}']:.2f}"
            )
    record_end(env, elapsed, " (this run's own threads included)")

    method = {
        "statistic": "min over repetitions of per-call time of a block",
        "reps": args.reps,
        "block_ms": args.block_ms,
        "modes": list(modes),
        "loop_overhead_us": loop_us,
    }
    write_record(args.json, "dispatch_overhead", env, method, rows=rows, summary=summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
