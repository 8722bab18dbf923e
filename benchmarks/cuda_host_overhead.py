"""Host submit time per op of small-tensor operators on flagos against native tensors (cuda vendor).

For each operator, a block of N calls is issued on ``flagos`` and timed from the first call to the
return of the last one, before a single synchronize (``torch.flagos.synchronize`` /
``torch.cuda.synchronize``): the **submit** time, which on a GPU is the host cost of dispatch and
launch while the GPU runs behind. The same block is then issued on native tensors (``cuda`` on the
cuda vendor, ``cpu`` elsewhere, ``--native`` overrides). Operators: ``add``, ``mul``, ``relu``,
``sum``, 512x512 ``mm``, ``softmax``, ``layer_norm``, in-place ``add_`` and ``add(out=)``, on
64x64 float32 tensors (``--side``), a 3x3 ``conv2d`` of 8x16x32x32 (contiguous and channels_last),
and ``torch._foreach_add_`` over lists of 10 and 150 tensors of
256 floats (the list operators of a foreach optimizer), and ``add_`` again with its blocks run on
a worker thread (autograd runs the backward pass on a device thread of its own).

Method: every case is warmed up, then for each of ``--reps`` repetitions the flagos and native
blocks of each case are timed back to back (which side goes first alternates). The figure per case
and side is the **median** over the repetitions of the per-op submit time; ``ratio`` is flagos over
native. The time to the end of the synchronize (``total``) is in the JSON too. N is ``--n`` (2000),
lowered for a case when a block would exceed ``--max-block-ms`` (only on the CPU, where a 512x512
``mm`` runs on the host).

    python benchmarks/cuda_host_overhead.py [--n 2000] [--reps 9] [--native cuda|cpu] [--quick] [--json out.json]

Targets, against cuda on the H200: small ops <= 1.03; ``_foreach_add_`` over 150 tensors <= 1.3,
over 10 <= 1.15. Prints ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.nn.functional as F
from _bench_env import record_end
from _gpu_bench import add_block_args, add_common_args, start, sync
from _gpu_bench import timed_block as _timed_block
from _report import Table, median_ratio, write_record

# A case whose label starts with this runs its blocks on a worker thread, as autograd's backward
# runs on a device thread of its own (thread-local state is that thread's).
OTHER_THREAD = "thread: "


def make_cases(
    dev: torch.device, side: int, mm_side: int
) -> list[tuple[str, Callable[[], object]]]:
    """(label, zero-argument callable) for one device; the same values on every device."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(side, side, generator=g).to(dev)
    b = torch.randn(side, side, generator=g).to(dev)
    ma = torch.randn(mm_side, mm_side, generator=g).to(dev)
    mb = torch.randn(mm_side, mm_side, generator=g).to(dev)
    w = torch.randn(side, generator=g).to(dev)
    bias = torch.randn(side, generator=g).to(dev)
    ia = a.clone()  # in-place target (values drift; irrelevant for timing)
    out = torch.empty_like(a)
    # List operators over an optimizer's worth of small parameters (one step of AdamW's foreach
    # implementation makes a dozen such calls).
    lists = {n: [torch.randn(256, generator=g).to(dev) for _ in range(2 * n)] for n in (10, 150)}
    # A small convolution (ATen's overrideable path on flagos), contiguous and channels_last
    # (flagos returns the fake kernel's contiguous layout: one copy there).
    image = torch.randn(8, 16, 32, 32, generator=g).to(dev)
    kernel = torch.randn(16, 16, 3, 3, generator=g).to(dev)
    image_cl = image.to(memory_format=torch.channels_last)
    kernel_cl = kernel.to(memory_format=torch.channels_last)
    return [
        ("add", lambda: torch.add(a, b)),
        ("mul", lambda: torch.mul(a, b)),
        ("relu", lambda: torch.relu(a)),
        ("sum", lambda: a.sum()),
        (f"mm {mm_side}x{mm_side}", lambda: torch.mm(ma, mb)),
        ("softmax", lambda: torch.softmax(a, dim=-1)),
        ("layer_norm", lambda: F.layer_norm(a, (side,), w, bias)),
        ("add_ (in-place)", lambda: ia.add_(b)),
        ("add (out=)", lambda: torch.add(a, b, out=out)),
        ("conv2d", lambda: F.conv2d(image, kernel, padding=1)),
        ("conv2d channels_last", lambda: F.conv2d(image_cl, kernel_cl, padding=1)),
        ("_foreach_add_ x10", lambda: torch._foreach_add_(lists[10][:10], lists[10][10:])),
        ("_foreach_add_ x150", lambda: torch._foreach_add_(lists[150][:150], lists[150][150:])),
        (OTHER_THREAD + "add_ (in-place)", lambda: ia.add_(b)),
    ]


def run(native: str, n: int, reps: int, side: int, mm_side: int, max_block_ms: float) -> list:
    with ThreadPoolExecutor(1) as worker:
        return _run(worker, native, n, reps, side, mm_side, max_block_ms)


def _run(worker, native: str, n: int, reps: int, side: int, mm_side: int, max_block_ms: float):
    fl = torch.device("flagos", 0)
    nd = torch.device(native, 0) if native == "cuda" else torch.device("cpu")
    fl_cases = make_cases(fl, side, mm_side)
    nat_cases = make_cases(nd, side, mm_side)
    rows = []
    calls = []

    def timed_block(fn, k, d, label=""):
        if label.startswith(OTHER_THREAD):
            return worker.submit(_timed_block, fn, k, d).result()
        return _timed_block(fn, k, d)

    for (label, ff), (_, fn) in zip(fl_cases, nat_cases, strict=True):
        # Warm up (first-call dispatch, allocator caches, cuBLAS handles) and size the block.
        timed_block(ff, 20, fl, label)
        timed_block(fn, 20, nd, label)
        per = max(timed_block(ff, 20, fl, label)[1], timed_block(fn, 20, nd, label)[1]) / 20
        calls.append(max(10, min(n, int(max_block_ms * 1e-3 / max(per, 1e-9)))))
    samples: dict[tuple[int, str], list[tuple[float, float]]] = {
        (i, s): [] for i in range(len(fl_cases)) for s in ("flagos", "native")
    }
    for r in range(reps):
        for i, ((label, ff), (_, fn)) in enumerate(zip(fl_cases, nat_cases, strict=True)):
            k = calls[i]
            order = (("flagos", ff, fl), ("native", fn, nd))
            for side_name, f, d in order if (r + i) % 2 == 0 else order[::-1]:
                sub, tot = timed_block(f, k, d, label)
                samples[(i, side_name)].append((sub / k, tot / k))
    for i, (label, _) in enumerate(fl_cases):
        fs = samples[(i, "flagos")]
        ns = samples[(i, "native")]
        f_sub = statistics.median(s for s, _ in fs)
        n_sub = statistics.median(s for s, _ in ns)
        f_tot = statistics.median(t for _, t in fs)
        n_tot = statistics.median(t for _, t in ns)
        rows.append(
            {
                "op": label,
                "calls_per_block": calls[i],
                "native_submit_us": n_sub * 1e6,
                "flagos_submit_us": f_sub * 1e6,
                "ratio": f_sub / n_sub,
                "native_total_us": n_tot * 1e6,
                "flagos_total_us": f_tot * 1e6,
                "total_ratio": f_tot / n_tot,
                "paired_median_ratio": median_ratio((f for f, _ in fs), (n for n, _ in ns)),
            }
        )
    sync(fl)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--side", type=int, default=64, help="small tensors are side x side (64)")
    p.add_argument("--mm-side", type=int, default=512, help="mm is side x side @ side x side")
    add_block_args(p, 2000, 9, "ops")
    add_common_args(p)
    args = p.parse_args(argv)
    if args.quick:
        args.n, args.reps = min(args.n, 200), min(args.reps, 3)
    native, env = start(args)

    print(
        f"method: median over {args.reps} interleaved repetitions of the submit time of a block of "
        f"up to {args.n} ops (before one synchronize), per op; ratio = flagos / {native}\n"
    )
    gc.collect()
    t0 = time.perf_counter()
    rows = run(native, args.n, args.reps, args.side, args.mm_side, args.max_block_ms)
    elapsed = time.perf_counter() - t0

    w = max(len(r["op"]) for r in rows) + 2
    table = Table(
        f"{{:<{w}}}{{:>6}}{{:>10.2f}}{{:>11.2f}}{{:>7.2f}}{{:>8.2f}}{{:>13.2f}}",
        *("op", "N", native + " us", "flagos us", "ratio", "paired", "total ratio"),
    )
    table.header()
    for r in rows:
        table.row(
            *(r["op"], r["calls_per_block"], r["native_submit_us"], r["flagos_submit_us"]),
            *(r["ratio"], r["paired_median_ratio"], r["total_ratio"]),
        )
    small = [r for r in rows if not r["op"].startswith("_foreach")]  # the medians' cases
    summary = {
        "median_ratio": statistics.median(r["ratio"] for r in small),
        "median_paired_ratio": statistics.median(r["paired_median_ratio"] for r in small),
        "median_total_ratio": statistics.median(r["total_ratio"] for r in small),
        "max_ratio": max(r["ratio"] for r in small),
        "foreach_ratio": {r["op"]: r["ratio"] for r in rows if r["op"].startswith("_foreach")},
    }
    print(
        f"\nmedian flagos/{native} submit ratio of the small ops: {summary['median_ratio']:.2f} "
        f"(paired {summary['median_paired_ratio']:.2f}; to the end of the sync "
        f"{summary['median_total_ratio']:.2f}); targets (vs cuda): small ops <= 1.03, foreach <= 1.15/1.3"
    )
    record_end(env, elapsed)
    method = {
        "statistic": "median over interleaved repetitions of per-op submit time",
        "n": args.n,
        "reps": args.reps,
        "side": args.side,
        "mm_side": args.mm_side,
        "native": native,
    }
    write_record(args.json, "cuda_host_overhead", env, method, rows=rows, summary=summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
