"""Which arguments CUDA's kernels accept as CPU tensors beside CUDA tensors: measured, per overload.

CUDA refuses a CPU tensor beside CUDA tensors ("Expected all tensors to be on the same device"),
except a 0-dim CPU tensor (a scalar operand) and, per operator, arguments its kernel moves or
reads itself (indices of ``index`` and ``index_put_`` ...). Which ones is a fact of
ATen's CUDA kernels, not of the schema, so it is measured: every OpInfo sample runs on CUDA once
per tensor argument other than the input with that argument moved to the CPU, under a dispatch
mode that records each ATen call that succeeded with a non-scalar CPU tensor beside CUDA tensors;
so do a few calls OpInfo's samples leave out (tensor indexing, the in-place index ops), each
with its index, mask or operand on the CPU.
flagos raises where CUDA raises and accepts what it records (``torch_fl.routing.cpu_arguments``).

Needs a CUDA machine with torch (and expecttest for the OpInfo database); torch-fl need not be
installed:

    python tools/cpu_arguments_probe.py --out packages/torch_fl_core/src/torch_fl/routing/cpu_arguments.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map


def _schema_names(func: Any, args: tuple, kwargs: dict) -> list[tuple[str, Any]]:
    names = [a.name for a in func._schema.arguments]
    pairs = list(zip(names, args, strict=False))
    pairs += [(k, v) for k, v in kwargs.items()]
    return pairs


class Recorder(TorchDispatchMode):
    """Records (overload, argument) pairs that ran with a non-scalar CPU tensor beside CUDA ones."""

    def __init__(self) -> None:
        super().__init__()
        self.accepted: dict[str, set[str]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        on_cuda, on_cpu = False, []
        for name, value in _schema_names(func, args, kwargs):
            tensors = value if isinstance(value, (list, tuple)) else [value]
            for t in tensors:
                if not isinstance(t, torch.Tensor):
                    continue
                if t.device.type == "cuda":
                    on_cuda = True
                elif t.device.type == "cpu" and t.dim() > 0:
                    on_cpu.append(name)
        if on_cuda and on_cpu:
            self.accepted.setdefault(func._schema.name + _overload(func), set()).update(on_cpu)
        return out


def _overload(func: Any) -> str:
    overload = func._schema.overload_name
    return f".{overload}" if overload else ""


def probe(max_samples: int, deadline: float) -> tuple[dict[str, list[str]], int, bool]:
    from torch.testing._internal.common_methods_invocations import op_db

    recorder = Recorder()
    runs = 0
    complete = True
    for info in op_db:
        if time.time() > deadline:
            complete = False
            break
        if not info.supports_dtype(torch.float32, "cuda"):
            continue
        try:
            samples = list(info.sample_inputs("cuda", torch.float32))[:max_samples]
        except Exception:
            continue
        for sample in samples:
            slots = [("arg", i) for i, a in enumerate(sample.args) if _has_tensor(a)]
            slots += [("kwarg", k) for k, v in sample.kwargs.items() if _has_tensor(v)]
            for kind, key in slots:
                args, kwargs = list(sample.args), dict(sample.kwargs)
                if kind == "arg":
                    args[key] = tree_map(_to_cpu, args[key])
                else:
                    kwargs[key] = tree_map(_to_cpu, kwargs[key])
                runs += 1
                try:
                    with recorder:
                        info.op(sample.input, *args, **kwargs)
                except Exception:
                    pass
    for _name, call in direct_cases():
        runs += 1
        try:
            with recorder:
                call("cpu")
        except Exception:
            pass
    accepted = {op: sorted(names) for op, names in sorted(recorder.accepted.items())}
    return accepted, runs, complete


def direct_cases() -> list[tuple[str, Any]]:
    """Calls OpInfo samples leave out (indexing with tensors, in-place index ops), each given
    the device of its one index/mask/operand tensor: run with that tensor on the CPU."""
    import torch.nn.functional as F

    def x() -> torch.Tensor:
        return torch.arange(20.0, device="cuda").reshape(5, 4)

    def idx(d: str) -> torch.Tensor:
        return torch.tensor([0, 2], device=d)

    def idx2(d: str) -> torch.Tensor:
        return torch.tensor([[0, 1, 2, 3]], device=d)

    def mask(d: str) -> torch.Tensor:
        return (torch.arange(20, device=d).reshape(5, 4) % 3) == 0

    def src() -> torch.Tensor:
        return torch.ones(2, 4, device="cuda")

    def setitem(t: torch.Tensor, key: Any, value: Any) -> torch.Tensor:
        t[key] = value
        return t

    return [
        ("getitem", lambda d: x()[idx(d)]),
        ("getitem mask", lambda d: x()[mask(d)]),
        ("getitem 2d", lambda d: x()[idx(d), idx(d)]),
        ("setitem scalar", lambda d: setitem(x(), idx(d), 1.0)),
        ("setitem tensor", lambda d: setitem(x(), idx(d), src())),
        ("setitem mask", lambda d: setitem(x(), mask(d), 0.0)),
        ("setitem values", lambda d: setitem(x(), idx("cuda"), src().to(d))),
        ("index_put_", lambda d: x().index_put_((idx(d),), src())),
        ("index_put_ accumulate", lambda d: x().index_put_((idx(d),), src(), accumulate=True)),
        ("index_fill_", lambda d: x().index_fill_(0, idx(d), -1.0)),
        (
            "index_fill_ tensor",
            lambda d: x().index_fill_(0, idx(d), torch.tensor(-1.0, device="cuda")),
        ),
        ("index_select", lambda d: x().index_select(0, idx(d))),
        ("index_add_", lambda d: x().index_add_(0, idx(d), src())),
        ("index_copy_", lambda d: x().index_copy_(0, idx(d), src())),
        ("index_reduce_", lambda d: x().index_reduce_(0, idx(d), src(), "prod")),
        ("gather", lambda d: x().gather(0, idx2(d))),
        ("scatter_", lambda d: x().scatter_(0, idx2(d), torch.ones(1, 4, device="cuda"))),
        ("scatter_add_", lambda d: x().scatter_add_(0, idx2(d), torch.ones(1, 4, device="cuda"))),
        ("take", lambda d: x().take(idx(d))),
        ("put_", lambda d: x().put_(idx(d), torch.ones(2, device="cuda"))),
        ("masked_fill_", lambda d: x().masked_fill_(mask(d), 1.0)),
        ("masked_select", lambda d: x().masked_select(mask(d))),
        ("masked_scatter_", lambda d: x().masked_scatter_(mask(d), torch.ones(20, device="cuda"))),
        ("where", lambda d: torch.where(mask(d), x(), -x())),
        ("embedding", lambda d: F.embedding(idx(d), x())),
        (
            "searchsorted",
            lambda d: torch.searchsorted(
                torch.arange(5.0, device="cuda"), torch.tensor([1.5, 3.0], device=d)
            ),
        ),
        ("bucketize", lambda d: torch.bucketize(x(), torch.tensor([1.0, 5.0], device=d))),
        ("add", lambda d: x() + torch.ones(5, 4, device=d)),
    ]


def _has_tensor(value: Any) -> bool:
    found = []
    tree_map(lambda v: found.append(v) if isinstance(v, torch.Tensor) else None, value)
    return any(t.dim() > 0 for t in found)


def _to_cpu(value: Any) -> Any:
    return value.cpu() if isinstance(value, torch.Tensor) else value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--max-samples", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=600, help="stop (incomplete) after this")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("cpu_arguments_probe: needs a CUDA device", file=sys.stderr)
        return 2
    start = time.time()
    accepted, runs, complete = probe(args.max_samples, start + args.seconds)
    record = {
        "what": "arguments CUDA's kernels accept as non-scalar CPU tensors beside CUDA tensors",
        "command": "python tools/cpu_arguments_probe.py --out <this file>",
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "runs": runs,
        "complete": complete,
        "accepted": accepted,
    }
    args.out.write_text(json.dumps(record, indent=1, sort_keys=False) + "\n")
    print(
        f"{len(accepted)} overloads accept CPU arguments ({runs} runs, {time.time() - start:.0f} s)"
    )
    for op, names in accepted.items():
        print(f"  {op}: {', '.join(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
