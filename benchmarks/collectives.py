"""all_reduce bus bandwidth on flagos against the same collective on native tensors.

``--world`` ranks (default 2; one subprocess each, launched by this script) run
``all_reduce(SUM)`` on float32 tensors of several sizes through:

- ``native``: the library the flagos tier wraps, on plain tensors in a group of its own
  (gloo on CPU tensors for the gloo tiers; NCCL on CUDA tensors for the nccl tier);
- ``flagos``: the ``flagos`` backend on flagos tensors, as ``init_process_group("flagos")`` makes it;
- ``flagos-nocheck``: the same with the cross-rank shape check off (``FLAGOS_DIST_CHECK_SHAPES=0``;
  it is on by default on the gloo tiers only, see docs/distributed.md);
- ``flagos-vendor``: a group on the ``vendor`` tier (the vendor's collective library through
  core's c10d backend over the collective ABI), where that is not already the default tier and
  the vendor has such a library (on the cuda vendor: NCCL through the seat, so the seat's cost is
  measured against ProcessGroupNCCL).

Method: per size, rounds alternate the variants (the first one rotates each round); a round
times ``--iters`` back-to-back all-reduces followed by a device synchronize, so queued device
work is inside the timed region. Per variant the median round is kept. Bus bandwidth is
``2 (n-1)/n * bytes / time`` (NCCL's definition); every variant's ``ratio`` is native's time over
its time (1.00: as fast as native). With one rank (``--world 1``, one GPU) the collective moves no
bytes between ranks, so the times are what each layer costs per call.

    python benchmarks/collectives.py [--world 2] [--sizes 64K,1M,16M,64M] [--rounds 7] [--iters 3] [--json out.json]

On an H200 run it with ``FLAGOS_VENDOR=cuda``: the default tier is then nccl and native is NCCL on
CUDA tensors. Prints figures; asserts nothing about timings.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def _size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def _human(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} B"


def rank_main(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist
    import torch_fl
    from torch_fl import distributed as fld

    rank = args.rank
    dev = torch.device("flagos", rank % torch.flagos.device_count())
    torch.flagos.set_device(dev)
    dist.init_process_group(
        "flagos",
        init_method=f"file://{args.store}",
        rank=rank,
        world_size=args.world,
        timeout=datetime.timedelta(seconds=120),
    )
    choice = fld.tier()
    os.environ["FLAGOS_DIST_CHECK_SHAPES"] = "0"
    nocheck = dist.new_group(backend="flagos")
    vendor_group = None
    if choice.name != "vendor" and fld.tiers.vendor_library_path() is not None:
        os.environ["FLAGOS_DIST_TIER"] = "vendor"
        vendor_group = dist.new_group(backend="flagos")
        del os.environ["FLAGOS_DIST_TIER"]
    if choice.name == "nccl":
        native_group = dist.new_group(backend="nccl")
        native_device = torch.device("cuda", dev.index)

        def sync() -> None:
            torch.cuda.synchronize(native_device)
    else:
        native_group = dist.new_group(backend="gloo")
        native_device = torch.device("cpu")

        def sync() -> None:
            pass

    def flagos_sync() -> None:
        torch.flagos.synchronize(dev)

    results = []
    for nbytes in args.sizes:
        n = nbytes // 4
        variants = {
            "native": (torch.ones(n, device=native_device), native_group, sync),
            "flagos": (torch.ones(n, device=dev), None, flagos_sync),
            "flagos-nocheck": (torch.ones(n, device=dev), nocheck, flagos_sync),
        }
        if vendor_group is not None:
            variants["flagos-vendor"] = (torch.ones(n, device=dev), vendor_group, flagos_sync)
        names = list(variants)
        times: dict[str, list[float]] = {k: [] for k in names}
        for name in names:  # warm up (connections, allocator)
            t, group, s = variants[name]
            dist.all_reduce(t, group=group)
            s()
        for r in range(args.rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                t, group, s = variants[name]
                # Every side aligns the ranks with the default (flagos) group: with torch-fl loaded,
                # torch's accelerator is flagos, so barrier() on a plain NCCL group looks for a
                # flagos backend there and fails (docs/distributed.md, known limitations).
                dist.barrier()
                start = time.perf_counter()
                for _ in range(args.iters):
                    dist.all_reduce(t, group=group)
                s()
                times[name].append((time.perf_counter() - start) / args.iters)
        row = {"bytes": nbytes}
        for name in names:
            seconds = statistics.median(times[name])
            row[name] = {
                "seconds": seconds,
                "busbw_GBps": 2 * (args.world - 1) / args.world * nbytes / seconds / 1e9,
            }
        results.append(row)
    if rank == 0:
        print(
            json.dumps(
                {
                    "tier": choice.name,
                    "vendor": str(torch_fl.vendor().name),
                    "world": args.world,
                    "rows": results,
                }
            )
        )
    dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--world", type=int, default=2, help="ranks (default 2)")
    p.add_argument("--sizes", default="64K,1M,16M,64M")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    p.add_argument("--store", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.sizes = [_size(s) for s in args.sizes.split(",")]
    if args.rank is not None:
        rank_main(args)
        return

    from _bench_env import describe, load_avg
    from _report import Table, write_record

    env = describe(load_avg())
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        argv = [sys.executable, os.path.abspath(__file__), "--store", store]
        argv += ["--world", str(args.world)]
        argv += ["--sizes", ",".join(str(s) for s in args.sizes), "--rounds", str(args.rounds)]
        argv += ["--iters", str(args.iters)]
        procs = [
            subprocess.Popen(
                [*argv, "--rank", str(r)],
                stdout=subprocess.PIPE,
                text=True,
                env={**os.environ, "OMP_NUM_THREADS": "1"},
            )
            for r in range(args.world)
        ]
        outs = [proc.communicate(timeout=900)[0] for proc in procs]
        if any(proc.returncode for proc in procs):
            sys.exit(f"a rank failed: exit codes {[proc.returncode for proc in procs]}")
    doc = json.loads(outs[0].strip().splitlines()[-1])
    variants = [k for k in doc["rows"][0] if k not in ("bytes", "native")]
    print(
        f"all_reduce(SUM) float32, {args.world} ranks, vendor {doc['vendor']}, tier {doc['tier']}"
        "; per call: microseconds, and native's time over the variant's (ratio)"
    )
    table = Table(
        "{:>9} | {:>10.1f}" + " | {:>10.1f} {:>6.2f}" * len(variants),
        "size",
        "native us",
        *(title for v in variants for title in (f"{v} us", "ratio")),
    )
    print(table.line(*table.titles))
    for row in doc["rows"]:
        nat = row["native"]["seconds"]
        cells = [x for v in variants for x in (row[v]["seconds"] * 1e6, nat / row[v]["seconds"])]
        table.row(_human(row["bytes"]), nat * 1e6, *cells)
    write_record(args.json, "collectives", env, **doc)


if __name__ == "__main__":
    main()
