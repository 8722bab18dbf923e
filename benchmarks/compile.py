"""Eager vs torch.compile step time of a GPT-style block, on flagos and on the native device.

One training step (forward, loss, backward) of a pre-norm transformer block (``_models.Block``,
the block of ``gpt_step.py``'s decoder), four ways: eager and
compiled (default Inductor) on ``flagos``, and the same on the native device the vendor runs on
(CPU for ``sim``; CUDA for the cuda vendor, ``--native cuda``). Printed side by side: step times,
compiled speed-up on each device, and flagos/native ratios (eager and compiled).

Method: compile and warm up each variant, then for ``--reps`` repetitions time a block of
``--steps`` steps of each variant in turn (interleaved, so that drift affects all alike),
synchronizing the device at the end of each block. The figure is the minimum per-step time over
the repetitions (the median is in ``--json``).

    python benchmarks/compile.py [--dim 256] [--seq 128] [--batch 8] [--native cpu|cuda]

Prints ratios; asserts nothing about timings.

With ``--native cuda`` the native side runs in a child process started without torch-fl
(``TORCH_DEVICE_BACKEND_AUTOLOAD=0``): once a PrivateUse1 backend is registered, PyTorch's autograd
engine asserts on a backward over CUDA tensors in that process (seen with torch 2.11), so the native
CUDA side cannot share a process with flagos. Its blocks are then timed in the child, after the
flagos side, instead of interleaved. This host-bound step runs at the speed of its process's host
thread, which differs by up to 1.8x from one process to the next on a shared VM: for a figure,
``--processes N`` runs N fresh pairs of children (flagos, native), both of a pair pinned to one CPU
near the GPU (``--cpus``, as ``gpt_step.py``'s decode), their blocks alternating; the ratios are the
medians over the pairs of each pair's median-block ratio, with their range.

    FLAGOS_VENDOR=cuda python benchmarks/compile.py --native cuda --processes 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
from _bench_env import describe, load_avg
from _gpu_bench import sync
from _models import Block
from _report import write_record


def make_step(device: torch.device, compiled: bool, args: argparse.Namespace):
    torch.manual_seed(0)
    model = Block(args.dim, args.heads).to(device)
    x = torch.randn(args.batch, args.seq, args.dim, device=device)
    fwd = torch.compile(model) if compiled else model

    def step() -> None:
        fwd(x).square().mean().backward()

    return step


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument(
        "--native",
        default=None,
        help="native device (default: cuda if the vendor compiles with Triton for cuda, else cpu)",
    )
    p.add_argument("--json", default=None)
    p.add_argument(
        "--processes", type=int, default=0, help="fresh (flagos, native) child-process pairs"
    )
    p.add_argument("--cpus", default="auto", help="CPUs of each pair: auto|none|N,.. (--processes)")
    p.add_argument("--sides", default="flagos,native", help=argparse.SUPPRESS)
    p.add_argument("--serve", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()

    if args.serve:
        serve(args)
        return

    if args.sides == "native":  # the child of a --native cuda run: no torch-fl in this process
        assert "torch_fl" not in sys.modules
        times = measure({"native": torch.device(args.native)}, args)
        with open(args.json, "w") as f:
            json.dump(times, f)
        return

    import torch_fl

    native = args.native or (torch_fl.compile.triton_target() or "cpu")
    devices = {"flagos": torch.device("flagos"), "native": torch.device(native)}
    env = describe(load_avg())
    print(
        f"vendor {torch_fl.vendor().name!r}, scheduling {torch_fl.compile.scheduling()!r}, "
        f"native {native}; block dim {args.dim} heads {args.heads} batch {args.batch} "
        f"seq {args.seq}; {args.steps} steps x {args.reps} reps"
    )
    if args.processes:
        in_pairs(args, native, env)
        return
    if native == "cuda":
        times = measure({"flagos": devices["flagos"]}, args)
        times.update(native_in_child(args))
    else:
        times = measure(devices, args)
    report(times, devices, env, native, args)


def native_in_child(args: argparse.Namespace) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "native.json")
        cmd = [sys.executable, __file__, "--sides", "native", "--native", "cuda", "--json", out]
        for k in ("dim", "heads", "seq", "batch", "steps", "reps"):
            cmd += [f"--{k}", str(getattr(args, k))]
        env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
        subprocess.run(cmd, check=True, env=env)
        with open(out) as f:
            return json.load(f)


def serve(args: argparse.Namespace) -> None:
    """A child of ``--processes``: builds its side's eager and compiled steps, then times one block
    per ``["timed", variant]`` line on stdin (ms per step, one JSON line on stdout)."""
    out, sys.stdout = sys.stdout, sys.stderr
    dev = torch.device(args.serve)
    if dev.type != "flagos":
        assert "torch_fl" not in sys.modules, "the native child loaded torch-fl"
    variants = prepare({args.serve: dev}, args)
    for line in sys.stdin:
        name = json.loads(line)[1]
        step, _ = variants[f"{args.serve}/{name}"]
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        sync(dev)
        out.write(json.dumps((time.perf_counter() - t0) / args.steps * 1e3) + "\n")
        out.flush()


class Child:
    def __init__(self, device: str, args: argparse.Namespace, cpus: list[int] | None) -> None:
        import gpt_step

        cmd = [sys.executable, __file__, "--serve", device, "--native", args.native or "cuda"]
        for k in ("dim", "heads", "seq", "batch", "steps", "reps"):
            cmd += [f"--{k}", str(getattr(args, k))]
        env = dict(os.environ)
        if device != "flagos":
            env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
        with gpt_step.pinned(cpus):
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
            )

    def timed(self, variant: str) -> float:
        self.proc.stdin.write(json.dumps(["timed", variant]) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("a benchmark child died (see its stderr above)")
        return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def in_pairs(args: argparse.Namespace, native: str, env: dict) -> None:
    import gpt_step

    cpus = gpt_step.decode_cpus(args.cpus, native)
    ratios: dict[str, list[float]] = {"eager": [], "compiled": []}
    medians: dict[str, list[float]] = {}
    for i in range(args.processes):
        order = ("flagos", native) if i % 2 == 0 else (native, "flagos")
        children = {dev: Child(dev, args, cpus) for dev in order}
        try:
            for variant in ("eager", "compiled"):
                times = {dev: [] for dev in order}
                for rep in range(args.reps):
                    for dev in order if rep % 2 == 0 else order[::-1]:
                        times[dev].append(children[dev].timed(variant))
                f, n = statistics.median(times["flagos"]), statistics.median(times[native])
                ratios[variant].append(f / n)
                medians.setdefault(f"flagos/{variant}", []).append(f)
                medians.setdefault(f"native/{variant}", []).append(n)
        finally:
            for child in children.values():
                child.close()
        print(
            f"  pair {i + 1}: flagos/native eager {ratios['eager'][-1]:.3f}, "
            f"compiled {ratios['compiled'][-1]:.3f}"
        )
    print(f"\nstep time (ms, median over {args.processes} process pairs, CPUs {cpus}):")
    for side in ("flagos", "native"):
        e = statistics.median(medians[f"{side}/eager"])
        c = statistics.median(medians[f"{side}/compiled"])
        print(f"  {side:10} eager {e:8.3f}  compiled {c:8.3f}  speed-up {e / c:5.2f}x")
    for variant, rs in ratios.items():
        print(
            f"  flagos/native {variant}: {statistics.median(rs):.3f} "
            f"(pairs {min(rs):.3f}-{max(rs):.3f}); native/flagos speed "
            f"{1 / statistics.median(rs):.3f}"
        )
    write_record(
        args.json,
        "compile",
        env,
        args=vars(args),
        native=native,
        pair_ratios=ratios,
        pair_medians_ms=medians,
        cpus=cpus,
    )


def prepare(devices: dict[str, torch.device], args: argparse.Namespace) -> dict:
    variants = {}
    for side, dev in devices.items():
        for compiled in (False, True):
            name = f"{side}/{'compiled' if compiled else 'eager'}"
            t0 = time.perf_counter()
            step = make_step(dev, compiled, args)
            for _ in range(3):  # compile + warm-up
                step()
            sync(dev)
            print(f"  prepared {name} in {time.perf_counter() - t0:.1f} s")
            variants[name] = (step, dev)
    return variants


def measure(devices: dict[str, torch.device], args: argparse.Namespace) -> dict[str, list[float]]:
    variants = prepare(devices, args)
    times: dict[str, list[float]] = {n: [] for n in variants}
    for _ in range(args.reps):
        for name, (step, dev) in variants.items():
            t0 = time.perf_counter()
            for _ in range(args.steps):
                step()
            sync(dev)
            times[name].append((time.perf_counter() - t0) / args.steps * 1e3)
    return times


def report(times, devices, env, native, args) -> None:
    best = {n: min(v) for n, v in times.items()}
    print(f"\nstep time (ms, min over reps; load avg {load_avg()}):")
    print(f"  {'':10} {'eager':>10} {'compiled':>10} {'speed-up':>9}")
    for side in devices:
        e, c = best[f"{side}/eager"], best[f"{side}/compiled"]
        print(f"  {side:10} {e:10.3f} {c:10.3f} {e / c:9.2f}x")
    print(
        f"  flagos/native: eager {best['flagos/eager'] / best['native/eager']:.3f}, "
        f"compiled {best['flagos/compiled'] / best['native/compiled']:.3f}"
    )
    out = {n: {"min_ms": min(v), "median_ms": statistics.median(v)} for n, v in times.items()}
    write_record(args.json, "compile", env, args=vars(args), native=native, times=out)


if __name__ == "__main__":
    main()
