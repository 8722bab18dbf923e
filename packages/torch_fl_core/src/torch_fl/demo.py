"""``python -m torch_fl.demo``: train a small model on ``flagos`` and check it against the CPU.

A two-layer MLP learns a synthetic 4-class problem (seeded) for ``--steps`` SGD steps on
``flagos``, then again on the CPU from the same initial weights and the same batches. The final
loss and parameters must match within a tolerance (exit status 1 if not). It prints what is under
``flagos`` and where the operators ran (the census of :mod:`torch_fl.census`: per operator, the
backend of the route table that served it and how often, and every operator the CPU fallback
served), and the minimal set core runs natively.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import torch_fl
from torch_fl import census
from torch_fl.testing import to_cpu

FEATURES, HIDDEN, CLASSES, SAMPLES, BATCH = 32, 64, 4, 1024, 64
RTOL, ATOL = 1e-3, 1e-4

NATIVE_SET = (
    "empty.memory_format, empty_strided (allocation), _copy_from / _copy_from_and_resize "
    "(copies and casts), as_strided, view, _reshape_alias and the other views, resize_, set_, "
    "_local_scalar_dense (.item())"
)


class _LineBar:
    """A one-line ``\\r`` progress bar for when tqdm is not installed."""

    def __init__(self, total: int, desc: str) -> None:
        self.total, self.desc, self.n, self.postfix, self._shown = total, desc, 0, "", -1

    def update(self, n: int = 1) -> None:
        self.n += n
        percent = 100 * self.n // max(self.total, 1)
        if percent != self._shown:
            self._shown = percent
            filled = 30 * self.n // max(self.total, 1)
            bar = "#" * filled + "." * (30 - filled)
            line = f"\r{self.desc:>8} [{bar}] {self.n}/{self.total} {self.postfix}"
            sys.stderr.write(line)
            sys.stderr.flush()

    def set_postfix_str(self, text: str) -> None:
        self.postfix = text

    def close(self) -> None:
        sys.stderr.write("\n")
        sys.stderr.flush()


def _progress(total: int, desc: str, enabled: bool) -> Any:
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return _LineBar(total, desc)
    return tqdm(total=total, desc=desc, unit="step", leave=True)


def make_data(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A learnable 4-class problem: labels from a random teacher network, on the CPU."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(SAMPLES, FEATURES, generator=gen)
    teacher = torch.randn(FEATURES, CLASSES, generator=gen)
    y = (torch.tanh(x @ teacher) + 0.1 * torch.randn(SAMPLES, CLASSES, generator=gen)).argmax(1)
    return x, y


def make_model(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, CLASSES))


def train(
    model: nn.Module,
    device: torch.device,
    data: tuple[torch.Tensor, torch.Tensor],
    batches: list[torch.Tensor],
    progress: bool,
) -> tuple[float, float]:
    """Train in place on ``device``; returns (final full-data loss, seconds)."""
    x_all, y_all = data
    model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    bar = _progress(len(batches), device.type, progress)
    start = time.perf_counter()
    for step, idx in enumerate(batches):
        xb, yb = x_all[idx].to(device), y_all[idx].to(device)
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if bar is not None:
            if step % 10 == 0 or step == len(batches) - 1:
                bar.set_postfix_str(f"loss {loss.item():.4f}")
            bar.update(1)
    with torch.no_grad():
        final = F.cross_entropy(model(x_all.to(device)), y_all.to(device)).item()
    seconds = time.perf_counter() - start
    if bar is not None:
        bar.close()
    return final, seconds


def _census_report(counts: census.Counts) -> str:
    lines = [census.summary(counts, title="Operators on flagos")]
    lines.append(f"Ran natively on flagos (core's own kernels, not counted): {NATIVE_SET}.")
    return "\n".join(lines)


def _compare(
    model_fl: nn.Module, model_cpu: nn.Module, loss_fl: float, loss_cpu: float
) -> list[str]:
    problems = []
    if abs(loss_fl - loss_cpu) > ATOL + RTOL * abs(loss_cpu):
        problems.append(f"final loss {loss_fl:.6f} on flagos vs {loss_cpu:.6f} on CPU")
    params_cpu = dict(model_cpu.named_parameters())
    for name, p_fl in model_fl.named_parameters():
        got, want = to_cpu(p_fl), params_cpu[name].detach()
        if not torch.allclose(got, want, rtol=RTOL, atol=ATOL):
            diff = (got - want).abs().max().item()
            problems.append(f"parameter {name}: max abs difference {diff:.3g}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_fl.demo", description=__doc__)
    parser.add_argument("--steps", type=int, default=300, help="SGD steps (default 300)")
    parser.add_argument("--device", default="flagos", help="flagos device (default: current)")
    parser.add_argument("--seed", type=int, default=0, help="seed for data and weights")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)

    print(torch_fl.info())
    device = torch.device(args.device)
    if device.type != "flagos":
        parser.error(f"--device must be a flagos device, got {args.device!r}")
    try:  # a clear error now if there is no such device
        if device.index is None:
            device = torch.device("flagos", torch.flagos.current_device())
        torch.flagos.get_device_name(device)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

    data = make_data(args.seed)
    order = torch.Generator().manual_seed(args.seed + 1)
    batches = [torch.randint(0, SAMPLES, (BATCH,), generator=order) for _ in range(args.steps)]
    model_fl = make_model(args.seed)
    model_cpu = copy.deepcopy(model_fl)

    print(f"Training a {FEATURES}-{HIDDEN}-{CLASSES} MLP for {args.steps} steps on {device}")
    with census.counting() as counts:
        loss_fl, secs_fl = train(model_fl, device, data, batches, not args.no_progress)
    print("... and the same on cpu, from the same weights and batches")
    loss_cpu, secs_cpu = train(model_cpu, torch.device("cpu"), data, batches, not args.no_progress)

    print()
    print(
        f"final loss  {device}: {loss_fl:.6f} ({secs_fl:.1f} s)   cpu: {loss_cpu:.6f} ({secs_cpu:.1f} s)"
    )
    print()
    print(_census_report(counts))
    print()
    problems = _compare(model_fl, model_cpu, loss_fl, loss_cpu)
    if problems:
        print(f"MISMATCH: {device} and cpu disagree beyond rtol={RTOL}, atol={ATOL}:")
        for problem in problems:
            print(f"  {problem}")
        return 1
    print(
        f"OK: {device} matches cpu (final loss and all parameters within rtol={RTOL}, atol={ATOL})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
