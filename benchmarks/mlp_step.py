"""Training-step time of a 3-layer MLP on flagos against the same step on CPU.

The model is ``_models.mlp``: Linear-ReLU-Linear-ReLU-Linear (in = out = width, hidden = width), the loss is the
cross entropy against random class labels, and one step is ``zero_grad(set_to_none=True)``,
forward, loss, backward and the optimizer step. Both copies start from the same weights and
see the same batch. Configurations: width x batch x optimizer (SGD with momentum, Adam), each
run with PyTorch's default optimizer implementation for the device (on ``flagos`` that is the
``foreach`` one, on CPU the per-tensor loop; ``--impl`` forces one on both sides).

Method: each configuration is warmed up, then single steps are timed alternately on flagos and on
CPU (which side goes first alternates too) for about ``--seconds`` per configuration. ``ratio`` is
the **minimum** flagos step time over the minimum CPU step time; ``paired`` is the median, over
adjacent (flagos, CPU) pairs, of their ratio, which is robust to slow drift and to other load on
the machine. Medians per side are in the JSON too. Every step ends with the loss read back on the host
(``loss.item()``), so queued device work is inside the timed region on every vendor.

Also reports the calls served by ATen's CPU fallback during the flagos steps
(``torch_fl._C.fallback_counts()``): on the sim vendor every operator of this step is routed, so
it should be empty.

    python benchmarks/mlp_step.py [--seconds 3] [--impl default] [--threads N] [--json out.json]

Prints ratios; asserts nothing about timings.
"""

from __future__ import annotations

import argparse
import copy
import gc
import statistics
import sys
import time

import torch
import torch_fl
from _bench_env import describe, load_avg, record_end
from _models import mlp, optimizer_impl
from _report import Table, median_ratio, write_record
from torch import nn

C = torch_fl._C
CONFIGS = [  # (width, batch)
    (256, 64),
    (256, 256),
    (1024, 64),
    (1024, 256),
]
OPTIMIZERS = ("sgd", "adam")


def make_opt(name: str, params, impl: str) -> torch.optim.Optimizer:
    kw = {} if impl == "default" else {"foreach": impl == "foreach"}
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, **kw)
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-4, **kw)
    raise ValueError(name)


class Trainer:
    def __init__(
        self, model: nn.Module, opt_name: str, impl: str, x: torch.Tensor, y: torch.Tensor
    ):
        self.model = model
        self.impl = impl
        self.opt = make_opt(opt_name, model.parameters(), impl)
        self.x = x
        self.y = y
        self.loss_fn = nn.CrossEntropyLoss()

    def step(self) -> float:
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.model(self.x), self.y)
        loss.backward()
        self.opt.step()
        return loss.item()

    def timed(self) -> float:
        t0 = time.perf_counter()
        self.step()
        return time.perf_counter() - t0


def opt_impl(t: Trainer) -> str:
    """Which implementation the optimizer runs (foreach or per-tensor loop)."""
    return t.impl if t.impl != "default" else optimizer_impl(t.opt)


def run_config(width: int, batch: int, opt_name: str, impl: str, seconds: float) -> dict:
    torch.manual_seed(0)
    base = mlp(width)
    x = torch.randn(batch, width)
    y = torch.randint(0, width, (batch,))
    dev = torch.device("flagos", 0)
    cpu_t = Trainer(copy.deepcopy(base), opt_name, impl, x, y)
    fl_t = Trainer(copy.deepcopy(base).to(dev), opt_name, impl, x.to(dev), y.to(dev))

    # Warm up (optimizer state allocation, allocator caches, first-call dispatch), and size
    # the run: as many step pairs as fit in about `seconds`.
    for _ in range(3):
        cpu_t.step()
        fl_t.step()
    est = max(min(cpu_t.timed() for _ in range(3)), min(fl_t.timed() for _ in range(3)))
    pairs = max(10, min(500, int(seconds / (2 * est))))

    C.reset_fallback_counts()
    fl_s: list[float] = []
    cpu_s: list[float] = []
    for i in range(pairs):
        # One step on each side, adjacent in time; alternate which goes first.
        if i % 2 == 0:
            fl_s.append(fl_t.timed())
            cpu_s.append(cpu_t.timed())
        else:
            cpu_s.append(cpu_t.timed())
            fl_s.append(fl_t.timed())
    fallbacks = dict(C.fallback_counts())
    # Same start, same data: the losses agree closely (a sanity check, not a timing).
    loss_gap = abs(fl_t.step() - cpu_t.step())
    return {
        "width": width,
        "batch": batch,
        "optimizer": opt_name,
        "impl_flagos": opt_impl(fl_t),
        "impl_cpu": opt_impl(cpu_t),
        "pairs": pairs,
        "cpu_ms": min(cpu_s) * 1e3,
        "flagos_ms": min(fl_s) * 1e3,
        "ratio": min(fl_s) / min(cpu_s),
        "cpu_median_ms": statistics.median(cpu_s) * 1e3,
        "flagos_median_ms": statistics.median(fl_s) * 1e3,
        "paired_median_ratio": median_ratio(fl_s, cpu_s),
        "fallback_calls": sum(fallbacks.values()),
        "fallback_ops": fallbacks,
        "loss_gap": loss_gap,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--seconds", type=float, default=3.0, help="time per configuration (default 3 s)"
    )
    p.add_argument(
        "--threads", type=int, default=0, help="torch.set_num_threads (default: torch's own)"
    )
    p.add_argument(
        "--impl",
        choices=("default", "foreach", "for-loop"),
        default="default",
        help="optimizer implementation on both sides (default: each device's PyTorch default)",
    )
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = p.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    load0 = load_avg()
    env = describe(load0)
    print(
        "method: single steps, flagos and CPU alternating (about "
        f"{args.seconds:g} s per configuration);\n"
        "  ratio = min flagos step / min CPU step; paired = median over adjacent (flagos, CPU) "
        "pairs of flagos/CPU\n"
    )

    t0 = time.perf_counter()
    rows = []
    table = Table(
        "{:>6}{:>6}  {:<5}{:>9.3f}{:>11.3f}{:>7.2f}{:>8.2f}{:>11}  {}",
        *("width", "batch", "optim", "cpu ms", "flagos ms", "ratio", "paired", "fallbacks"),
        "impl (flagos/cpu)",
    )
    table.header()
    gc.collect()
    for width, batch in CONFIGS:
        for opt_name in OPTIMIZERS:
            r = run_config(width, batch, opt_name, args.impl, args.seconds)
            rows.append(r)
            table.row(
                *(width, batch, opt_name, r["cpu_ms"], r["flagos_ms"], r["ratio"]),
                *(r["paired_median_ratio"], r["fallback_calls"]),
                f"{r['impl_flagos']}/{r['impl_cpu']}",
            )
    elapsed = time.perf_counter() - t0
    ratios = [r["ratio"] for r in rows]
    paired = [r["paired_median_ratio"] for r in rows]
    worst = max(rows, key=lambda r: r["ratio"])
    summary = {
        "median_ratio": statistics.median(ratios),
        "median_paired_ratio": statistics.median(paired),
        "max_ratio": worst["ratio"],
        "max_ratio_config": f"{worst['width']}x{worst['batch']} {worst['optimizer']}",
        "configs_within_1_1": sum(r <= 1.1 for r in ratios),
        "configs_within_1_1_paired": sum(r <= 1.1 for r in paired),
        "configs": len(rows),
        "fallback_calls": sum(r["fallback_calls"] for r in rows),
    }
    print(
        f"\nmedian ratio {summary['median_ratio']:.2f} (paired {summary['median_paired_ratio']:.2f})"
        f", worst {summary['max_ratio']:.2f} ({summary['max_ratio_config']}); within 1.1x of CPU "
        f"(target): {summary['configs_within_1_1']}/{summary['configs']} configurations "
        f"(paired: {summary['configs_within_1_1_paired']}/{summary['configs']})"
    )
    print(f"CPU fallback calls during the flagos steps: {summary['fallback_calls']}")
    for r in rows:
        if r["fallback_ops"]:
            print(f"  {r['width']}x{r['batch']} {r['optimizer']}: {r['fallback_ops']}")
    record_end(env, elapsed, " (this run's own threads included)")

    method = {
        "statistic": "min per side over single alternating steps; also the median of "
        "the per-pair ratios",
        "seconds_per_config": args.seconds,
        "impl": args.impl,
    }
    write_record(args.json, "mlp_step", env, method, rows=rows, summary=summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
