"""Sparse operators on flagos against the same calls on native tensors (cuda vendor).

The sparse operators whose CPU and CUDA kernels differ have no flagos kernel: flagos runs them on
the kernels of the backend whose memory flagos memory is (``box:cuda`` on the cuda vendor,
``box:cpu`` on sim), over aliases of the sparse tensors' parts, or on CPU copies where there is
none (``torch_fl._C.layout_backend()``). Cases, float32, sizes from ``--side`` (1024) and
``--nnz`` (16384 entries, a quarter of them duplicates):

- ``coalesce``: a COO tensor with duplicate entries coalesced;
- ``add``: the sum of two coalesced COO tensors (sparse ``add.out``);
- ``sparse @ dense``: ``torch.sparse.mm`` of a coalesced COO matrix and a ``side x 64`` matrix;
- ``csr @ dense``: the same with a CSR matrix;
- ``coo * coo``: the elementwise product of two coalesced COO tensors (sparse ``mul.out``).

Method: every case is warmed up, then for each of ``--reps`` repetitions a block of calls is run on
flagos and on native back to back (which side goes first alternates) and timed to the end of a
synchronize after it. The figure per case and side is the median per-call time over the
repetitions; ``ratio`` is flagos / native time (lower is better), with the backend that served
flagos's calls (from ``torch_fl._C.dispatch_counts()``, counted in a separate call).

    python benchmarks/sparse_ops.py [--side 1024] [--nnz 16384] [--n 20] [--reps 7] [--native cuda|cpu] [--quick] [--json out.json]

Target, against cuda: ratio <= 1.1 for every case (the kernels are CUDA's on both sides). Asserts
nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import torch
from _bench_env import record_end
from _gpu_bench import add_block_args, add_common_args, start, timed_block
from _report import Table, median_ratio, write_record


def make_cases(
    dev: torch.device, side: int, nnz: int
) -> list[tuple[str, str, Callable[[], object]]]:
    """(label, the operator to look up in the counts, zero-argument callable) on one device."""
    g = torch.Generator().manual_seed(0)
    unique = nnz - nnz // 4
    idx = torch.randint(0, side, (2, unique), generator=g)
    idx = torch.cat([idx, idx[:, : nnz - unique]], dim=1)  # duplicates, summed by coalescing
    vals = torch.randn(nnz, generator=g)
    raw = torch.sparse_coo_tensor(idx, vals, (side, side)).to(dev)
    a = raw.coalesce()
    b = torch.sparse_coo_tensor(idx.flip(0), vals, (side, side)).coalesce().to(dev)
    dense = torch.randn(side, 64, generator=g).to(dev)
    csr = a.to_sparse_csr()
    return [
        ("coalesce", "aten::_coalesce", lambda: raw.coalesce()),
        ("add", "aten::add.out", lambda: a + b),
        ("sparse @ dense", "aten::addmm", lambda: torch.sparse.mm(a, dense)),
        ("csr @ dense", "aten::addmm.out", lambda: csr @ dense),
        ("coo * coo", "aten::mul.out", lambda: a * b),
    ]


def served_by(fn: Callable[[], object], op: str) -> str:
    """The backend(s) that served ``op`` in one call of ``fn`` on flagos."""
    from torch_fl import _C

    _C.reset_dispatch_counts()
    fn()
    got = _C.dispatch_counts().get(op, {})
    return ",".join(sorted(got)) or "(not called)"


def run(native: str, side: int, nnz: int, n: int, reps: int, max_block_ms: float) -> list[dict]:
    fl = torch.device("flagos", 0)
    nd = torch.device(native, 0) if native == "cuda" else torch.device("cpu")
    fl_cases = make_cases(fl, side, nnz)
    nat_cases = make_cases(nd, side, nnz)
    calls, backends = [], []
    for (_, op, ff), (_, _, fn) in zip(fl_cases, nat_cases, strict=True):
        timed_block(ff, 3, fl)
        timed_block(fn, 3, nd)
        per = max(timed_block(ff, 3, fl)[1], timed_block(fn, 3, nd)[1]) / 3
        calls.append(max(3, min(n, int(max_block_ms * 1e-3 / max(per, 1e-9)))))
        backends.append(served_by(ff, op))
    samples: dict[tuple[int, str], list[float]] = {
        (i, s): [] for i in range(len(fl_cases)) for s in ("flagos", "native")
    }
    for r in range(reps):
        for i, ((_, _, ff), (_, _, fn)) in enumerate(zip(fl_cases, nat_cases, strict=True)):
            order = (("flagos", ff, fl), ("native", fn, nd))
            for side_name, f, d in order if (r + i) % 2 == 0 else order[::-1]:
                samples[(i, side_name)].append(timed_block(f, calls[i], d)[1] / calls[i])
    rows = []
    for i, (label, op, _) in enumerate(fl_cases):
        fs, ns = samples[(i, "flagos")], samples[(i, "native")]
        f, nat = statistics.median(fs), statistics.median(ns)
        rows.append(
            {
                "case": label,
                "op": op,
                "served_by": backends[i],
                "calls_per_block": calls[i],
                "native_us": nat * 1e6,
                "flagos_us": f * 1e6,
                "ratio": f / nat,
                "paired_median_ratio": median_ratio(fs, ns),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--side", type=int, default=1024, help="the sparse matrices are side x side")
    p.add_argument("--nnz", type=int, default=16384, help="entries before coalescing")
    add_block_args(p, 20, 7, "calls")
    add_common_args(p)
    args = p.parse_args(argv)
    if args.quick:
        args.side, args.nnz, args.n, args.reps = 128, 512, 3, 3
    native, env = start(args)
    from torch_fl import _C

    print(
        f"method: median over {args.reps} interleaved repetitions of the time per call of a block "
        f"of up to {args.n} calls to the end of a synchronize; ratio = flagos / {native} time; "
        f"sparse operators without a flagos kernel run on: {_C.layout_backend()}\n"
    )
    t0 = time.perf_counter()
    rows = run(native, args.side, args.nnz, args.n, args.reps, args.max_block_ms)
    elapsed = time.perf_counter() - t0
    w = max(len(r["case"]) for r in rows) + 2
    table = Table(
        f"{{:<{w}}}{{:<11}}{{:>5}}{{:>12.1f}}{{:>12.1f}}{{:>8.2f}}{{:>8.2f}}",
        *("case", "served by", "N", native + " us", "flagos us", "ratio", "paired"),
    )
    table.header()
    for r in rows:
        table.row(
            *(r["case"], r["served_by"], r["calls_per_block"], r["native_us"], r["flagos_us"]),
            *(r["ratio"], r["paired_median_ratio"]),
        )
    summary = {
        "layout_backend": _C.layout_backend(),
        "median_ratio": statistics.median(r["ratio"] for r in rows),
        "max_ratio": max(r["ratio"] for r in rows),
        "cases": len(rows),
        "cases_at_or_below_1_1": sum(r["ratio"] <= 1.1 for r in rows),
    }
    print(
        f"\nflagos/{native} time: median {summary['median_ratio']:.2f}, worst "
        f"{summary['max_ratio']:.2f}; target (vs cuda): <= 1.1 for every case"
    )
    record_end(env, elapsed)
    method = {
        "statistic": "median over interleaved repetitions of per-call time to the end of a sync",
        "side": args.side,
        "nnz": args.nnz,
        "n": args.n,
        "reps": args.reps,
        "native": native,
    }
    write_record(args.json, "sparse_ops", env, method, rows=rows, summary=summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
