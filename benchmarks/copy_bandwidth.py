"""Copy bandwidth on flagos against the same copies with native tensors (cuda vendor).

Copies of ``--mib`` MiB (256; 32 when comparing with the CPU) of bytes, each into a preallocated
destination with ``dst.copy_(src, non_blocking=True)``:

- ``H2D``: pinned host memory -> device (``flagos:0`` vs ``cuda:0``);
- ``D2H``: device -> pinned host memory;
- ``D2D``: within device 0;
- ``peer``: device 0 -> device 1 (``flagos:0 -> flagos:1`` vs ``cuda:0 -> cuda:1``); skipped, with
  the reason printed, when fewer than two devices are visible.

Native is ``cuda`` on the cuda vendor, ``cpu`` elsewhere (``--native`` overrides; the CPU figures
only smoke-test the script: every "device" there is host memory). Both sides copy from and into the
same pinned host buffers.

Method: every copy is warmed up, then for each of ``--reps`` repetitions a block of ``--iters``
copies is timed on flagos and on native back to back (which side goes first alternates), from a
drained queue to a synchronize after the block. Bandwidth per side is the bytes moved over the
median block time (GB/s = 1e9 B/s); ``ratio`` is flagos / native (higher is better).

    python benchmarks/copy_bandwidth.py [--mib 256] [--iters 5] [--reps 7] [--native cuda|cpu] [--quick] [--json out.json]

Target, against cuda on the H200: ratio >= 0.95 for every copy. Asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
from _bench_env import record_end
from _gpu_bench import add_common_args, start, timed_block
from _report import Table, median_ratio, write_record


def pinned(nbytes: int) -> tuple[torch.Tensor, bool]:
    try:
        return torch.empty(nbytes, dtype=torch.uint8, pin_memory=True), True
    except RuntimeError:
        return torch.empty(nbytes, dtype=torch.uint8), False


def dev_pair(kind: str, native: str) -> tuple[torch.device, torch.device]:
    if kind == "flagos":
        return torch.device("flagos", 0), torch.device("flagos", 1)
    if native == "cuda":
        return torch.device("cuda", 0), torch.device("cuda", 1)
    return torch.device("cpu"), torch.device("cpu")


def cases(kind: str, native: str, nbytes: int, host_src, host_dst, peer: bool) -> dict:
    """copy name -> (zero-argument callable, device(s) to synchronize)."""
    d0, d1 = dev_pair(kind, native)
    a = torch.empty(nbytes, dtype=torch.uint8, device=d0).fill_(1)
    b = torch.empty(nbytes, dtype=torch.uint8, device=d0)
    out = {
        "H2D": (lambda: a.copy_(host_src, non_blocking=True), d0),
        "D2H": (lambda: host_dst.copy_(a, non_blocking=True), d0),
        "D2D": (lambda: b.copy_(a, non_blocking=True), d0),
    }
    if peer:
        c = torch.empty(nbytes, dtype=torch.uint8, device=d1)
        out["peer"] = (lambda: c.copy_(a, non_blocking=True), (d0, d1))
    return out


def peer_reason(native: str) -> str | None:
    """Why the peer copy is skipped, or None."""
    if torch.flagos.device_count() < 2:
        return f"{torch.flagos.device_count()} flagos device(s) visible; peer copies need 2"
    if native == "cuda" and torch.cuda.device_count() < 2:
        return f"{torch.cuda.device_count()} CUDA device(s) visible; peer copies need 2"
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mib", type=int, default=None, help="MiB per copy (256; 32 vs the CPU)")
    p.add_argument("--iters", type=int, default=5, help="copies per timed block (default 5)")
    p.add_argument("--reps", type=int, default=7, help="interleaved repetitions (default 7)")
    add_common_args(p)
    args = p.parse_args(argv)
    native, env = start(args)
    if args.mib is None:
        args.mib = 32 if (args.quick or native == "cpu") else 256
    if args.quick:
        args.iters, args.reps = min(args.iters, 2), min(args.reps, 3)
    nbytes = args.mib << 20

    host_src, is_pinned = pinned(nbytes)
    host_dst, _ = pinned(nbytes)
    host_src.fill_(3)
    print(f"host buffers: {'pinned' if is_pinned else 'PAGEABLE (pinning failed)'}, {args.mib} MiB")
    why = peer_reason(native)
    if why:
        print(f"peer copy skipped: {why}")
    t0 = time.perf_counter()
    fl = cases("flagos", native, nbytes, host_src, host_dst, why is None)
    nat = cases("native", native, nbytes, host_src, host_dst, why is None)
    rows = []
    for name in fl:
        (ff, fd), (nf, ndev) = fl[name], nat[name]
        timed_block(ff, 2, fd)  # warm up (peer access, pinned-memory registration)
        timed_block(nf, 2, ndev)
        f_s, n_s = [], []
        for r in range(args.reps):
            pair = ((ff, fd, f_s), (nf, ndev, n_s))
            for f, d, acc in pair if r % 2 == 0 else pair[::-1]:
                acc.append(timed_block(f, args.iters, d)[1])
        moved = nbytes * args.iters
        f_bw = moved / statistics.median(f_s) / 1e9
        n_bw = moved / statistics.median(n_s) / 1e9
        rows.append(
            {
                "copy": name,
                "native_gbps": n_bw,
                "flagos_gbps": f_bw,
                "ratio": f_bw / n_bw,
                "paired_median_ratio": median_ratio(n_s, f_s),
            }
        )
    elapsed = time.perf_counter() - t0

    print()
    table = Table(
        "{:<6}{:>11.1f}{:>13.1f}{:>7.3f}{:>8.3f}",
        *("copy", native + " GB/s", "flagos GB/s", "ratio", "paired"),
    )
    table.header()
    for r in rows:
        table.row(
            r["copy"], r["native_gbps"], r["flagos_gbps"], r["ratio"], r["paired_median_ratio"]
        )
    summary = {
        "min_ratio": min(r["ratio"] for r in rows),
        "copies_at_or_above_0_95": sum(r["ratio"] >= 0.95 for r in rows),
        "copies": len(rows),
        "peer_skipped": why,
    }
    print(
        f"\nlowest ratio {summary['min_ratio']:.3f}; copies with ratio >= 0.95 (target, vs cuda): "
        f"{summary['copies_at_or_above_0_95']}/{summary['copies']}"
    )
    record_end(env, elapsed)
    method = {
        "statistic": "bytes over the median time of a block of copies, interleaved",
        "mib": args.mib,
        "iters": args.iters,
        "reps": args.reps,
        "pinned": is_pinned,
        "native": native,
    }
    write_record(args.json, "copy_bandwidth", env, method, rows=rows, summary=summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
