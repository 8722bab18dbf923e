"""Shared pieces of the GPU benchmarks (cuda vendor): the native device, synchronisation, the GPU.

On the ``cuda`` vendor ``flagos:i`` mirrors ``cuda:i`` and the benchmarks compare flagos tensors with
native ``cuda`` tensors. Anywhere else (the ``sim`` vendor on a CPU-only machine) they compare with
``cpu`` tensors, so the scripts can be smoke-tested without a GPU; those figures are not the targets.
"""

from __future__ import annotations

import argparse
import time

import torch
from _bench_env import describe, load_avg


def vendor_name() -> str:
    # Imported here, not at module level: gpt_step.py's native child must never load torch-fl.
    import torch_fl

    return str(torch_fl.vendor().name)


def default_native() -> str:
    """``cuda`` when the active vendor is ``cuda`` and torch sees a GPU, else ``cpu``."""
    if vendor_name() == "cuda" and torch.cuda.is_available():
        return "cuda"
    return "cpu"


def add_common_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--native",
        choices=("cuda", "cpu"),
        default=None,
        help="the device flagos is compared with (default: cuda on the cuda vendor, else cpu)",
    )
    p.add_argument("--quick", action="store_true", help="small sizes and few repetitions (smoke)")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")


def add_block_args(p: argparse.ArgumentParser, n: int, reps: int, what: str) -> None:
    """``--n`` (``what`` per timed block), ``--reps`` and ``--max-block-ms``: the block sizes of
    the per-call benchmarks."""
    p.add_argument("--n", type=int, default=n, help=f"{what} per timed block (default {n})")
    p.add_argument(
        "--reps", type=int, default=reps, help=f"interleaved repetitions (default {reps})"
    )
    p.add_argument("--max-block-ms", type=float, default=50.0, help="cap on one block's length")


def native_type(args: argparse.Namespace) -> str:
    return args.native or default_native()


def start(args: argparse.Namespace) -> tuple[str, dict]:
    """The native device of the comparison, and the machine and its accelerators described
    (printed, and returned for the JSON record)."""
    native = native_type(args)
    env = describe(load_avg())
    env["devices"] = describe_devices(native)
    return native, env


def sync(dev) -> None:
    """Wait for the work queued on device ``dev`` (a device, or a tuple of devices); nothing to
    wait for on the CPU."""
    if isinstance(dev, (tuple, list)):
        for d in dev:
            sync(d)
        return
    d = torch.device(dev)
    if d.type == "flagos":
        torch.flagos.synchronize(d if d.index is not None else None)
    elif d.type == "cuda":
        torch.cuda.synchronize(d if d.index is not None else None)


def describe_devices(native: str) -> dict:
    """The accelerator part of the machine description, printed and returned."""
    info: dict = {"native": native, "flagos_devices": torch.flagos.device_count()}
    if torch.cuda.is_available():
        info["cuda_devices"] = torch.cuda.device_count()
        info["gpu"] = torch.cuda.get_device_name(0)
        info["cuda"] = torch.version.cuda
        print(
            f"GPU: {info['gpu']} x {info['cuda_devices']} (CUDA {info['cuda']}); "
            f"flagos devices: {info['flagos_devices']}"
        )
    else:
        print(f"no CUDA device; flagos devices: {info['flagos_devices']}")
    print(f"comparing flagos with native '{native}' tensors (vendor {vendor_name()})")
    if native == "cpu":
        print("  (CPU comparison: a smoke test of the script, not the GPU targets)")
    return info


def gpu_local_cpus(index: int = 0) -> list[int]:
    """The CPUs sysfs lists as local to CUDA device ``index`` (its NUMA node), or []."""
    try:
        props = torch.cuda.get_device_properties(index)
        bus = f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
        with open(f"/sys/bus/pci/devices/{bus}/local_cpulist") as fh:
            text = fh.read().strip()
    except (AttributeError, OSError, RuntimeError, AssertionError):
        return []
    cpus: list[int] = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def timed_block(fn, k: int, dev) -> tuple[float, float]:
    """(submit, total) seconds of ``k`` calls of ``fn``: submit ends when the last call returns,
    total after the one synchronize that follows. The queue is drained before."""
    sync(dev)
    t0 = time.perf_counter()
    for _ in range(k):
        fn()
    t1 = time.perf_counter()
    sync(dev)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t0
