"""Running one OpInfo entry's samples on CPU and on ``flagos`` and classifying the outcome.

For an entry and a dtype, samples are generated on CPU with a fixed seed (the first
``max_samples``), copied to each device with the same layout (:mod:`.transfer`), and the operator
runs on both. Three checks, each classified as in :mod:`.results`:

``forward``
    The function variant. Results must match (:mod:`.compare`), every result tensor must be on
    ``flagos``, a result must alias an input on ``flagos`` exactly when it does on CPU (views stay
    views), and inputs must be left as CPU leaves them (mutations are written back).
``inplace``
    The in-place variant (``Tensor.add_``) where the entry has one, on samples that do not
    broadcast their input: it must return its input when CPU's does, with the same values.
``backward``
    Where the entry supports autograd for the dtype: gradients of a weighted sum of the
    differentiable outputs (fixed random weights, so every output element matters) with respect
    to every input that requires grad.

Random operators and operators with uninitialised results compare structure, shape, dtype and
device only; the result's detail says so.
"""

from __future__ import annotations

import itertools
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import torch

from torch_fl.conformance import traits
from torch_fl.conformance.compare import Mismatch, compare
from torch_fl.conformance.results import CheckResult, OpResult
from torch_fl.conformance.transfer import device_name, tensors_in, transfer

__all__ = ["CHECKS", "DEFAULT_MAX_SAMPLES", "SEED", "check_op", "first_line"]

CHECKS = ("forward", "inplace", "backward")
DEFAULT_MAX_SAMPLES = 8
SEED = 0
_MAX_MESSAGE = 200


def first_line(exc: BaseException) -> str:
    """``Type: first line of the message``, shortened for a table cell."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    message = lines[0] if lines else ""
    if len(message) > _MAX_MESSAGE:
        message = message[: _MAX_MESSAGE - 3] + "..."
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


class _Tally:
    """Per-check bookkeeping: first failure of each kind, counts, CPU errors."""

    def __init__(self, check: str) -> None:
        self.check = check
        self.samples = 0
        self.failed = 0
        self.cpu_errors = 0
        self.first_cpu_error = ""
        self.first_error = ""
        self.first_wrong = ""
        self.notes: list[str] = []

    def cpu_raised(self, exc: BaseException) -> None:
        self.cpu_errors += 1
        self.first_cpu_error = self.first_cpu_error or first_line(exc)

    def raised(self, index: int, exc: BaseException) -> None:
        self.samples += 1
        self.failed += 1
        self.first_error = self.first_error or f"sample {index}: {first_line(exc)}"

    def mismatched(self, index: int, mismatch: Mismatch | str) -> None:
        self.samples += 1
        self.failed += 1
        self.first_wrong = self.first_wrong or f"sample {index}: {mismatch}"

    def passed(self) -> None:
        self.samples += 1

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def result(self, total: int) -> CheckResult:
        counts = {"samples": self.samples, "failed": self.failed, "cpu_errors": self.cpu_errors}
        if total == 0:
            return CheckResult(self.check, "skipped", "no samples", **counts)
        if self.samples == 0:
            return CheckResult(
                self.check,
                "skipped",
                f"CPU raises on every sample ({self.first_cpu_error})",
                **counts,
            )
        of = f" [{self.failed} of {self.samples} samples]"
        if self.first_error:
            return CheckResult(self.check, "error", self.first_error + of, **counts)
        if self.first_wrong:
            return CheckResult(self.check, "wrong", self.first_wrong + of, **counts)
        return CheckResult(self.check, "pass", "; ".join(self.notes), **counts)


def _samples(op: Any, dtype: torch.dtype, requires_grad: bool, max_samples: int) -> list[Any]:
    torch.manual_seed(SEED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(
            itertools.islice(
                op.sample_inputs("cpu", dtype, requires_grad=requires_grad), max_samples
            )
        )


def _inputs(op: Any, sample: Any) -> tuple[tuple[Any, tuple, dict], tuple[Any, tuple, dict]]:
    """Fresh (CPU, flagos) copies of ``sample``'s (input, args, kwargs)."""
    raw = (sample.input, sample.args, sample.kwargs)
    cpu, dev = transfer(raw, "cpu"), transfer(raw, device_name())
    keep = traits.cpu_arguments(op)
    if keep:
        dev_args = list(dev[1])
        for i in keep:
            if i < len(dev_args):
                dev_args[i] = transfer(sample.args[i], "cpu")
        dev = (dev[0], tuple(dev_args), dev[2])
    return cpu, dev


def _call(fn: Callable[..., Any], inputs: tuple[Any, tuple, dict]) -> Any:
    inp, args, kwargs = inputs
    # Same seed for both runs: random operators may then agree, though they need not.
    torch.manual_seed(SEED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(inp, *args, **kwargs)


def _sync() -> None:
    # Surface asynchronous device errors inside the sample that caused them.
    mod = getattr(torch, device_name(), None)
    if mod is not None and hasattr(mod, "synchronize"):
        mod.synchronize()


def _storage_key(t: torch.Tensor) -> int | None:
    try:
        storage = t.untyped_storage()
    except (RuntimeError, NotImplementedError):  # sparse and other storage-less layouts
        return None
    return storage.data_ptr() if storage.nbytes() else None


def _aliases(outputs: Any, inputs: Any) -> list[bool]:
    """For each tensor in ``outputs``: does it share a storage with a tensor in ``inputs``?"""
    keys = {k for k in map(_storage_key, tensors_in(inputs)) if k is not None}
    return [_storage_key(t) in keys for t in tensors_in(outputs)]


def _alias_mismatch(cpu_out: Any, cpu_in: Any, dev_out: Any, dev_in: Any) -> str | None:
    for i, (c, d) in enumerate(
        zip(_aliases(cpu_out, cpu_in), _aliases(dev_out, dev_in), strict=False)
    ):
        if c and not d:
            return f"result tensor {i} is a view of an input on CPU but a copy on flagos"
        if d and not c:
            return f"result tensor {i} shares an input's storage on flagos but not on CPU"
    return None


def _compare_run(
    op: Any,
    sample: Any,
    cpu: tuple[Any, Any],
    dev: tuple[Any, Any],
    tally: _Tally,
    index: int,
) -> None:
    """Compare (result, inputs-after) of a CPU run and a flagos run of one sample."""
    (cpu_out, cpu_in), (dev_out, dev_in) = cpu, dev
    values = traits.values_comparable(op, sample)
    if not values:
        tally.note(_structure_only(op))
    accumulates = traits.accumulates(op)
    mismatch = compare(dev_out, cpu_out, values=values, accumulates=accumulates)
    if mismatch is not None and mismatch.kind == "values" and traits.sign_ambiguous(op):
        processed = compare(
            sample.output_process_fn_grad(dev_out),
            sample.output_process_fn_grad(cpu_out),
            accumulates=accumulates,
        )
        if processed is None:
            tally.note("matches after the sample's output_process_fn_grad (sign/phase)")
            mismatch = None
    if mismatch is not None:
        tally.mismatched(index, mismatch)
        return
    alias = _alias_mismatch(cpu_out, cpu_in, dev_out, dev_in)
    if alias is not None:
        tally.mismatched(index, alias)
        return
    mutated = None
    for part, dev_part, cpu_part in zip(("input", "args", "kwargs"), dev_in, cpu_in, strict=True):
        mutated = mutated or compare(dev_part, cpu_part, values=values, devices=False, path=part)
    if mutated is not None:
        tally.mismatched(index, f"inputs after the call differ: {mutated}")
        return
    tally.passed()


def _run_variant(
    op: Any,
    fn: Callable[..., Any],
    samples: Iterable[Any],
    tally: _Tally,
    *,
    inplace: bool,
) -> int:
    total = 0
    for index, sample in enumerate(samples):
        if inplace and sample.broadcasts_input:
            continue
        total += 1
        cpu_in, dev_in = _inputs(op, sample)
        try:
            cpu_out = _call(fn, cpu_in)
        except Exception as exc:
            tally.cpu_raised(exc)
            continue
        try:
            dev_out = _call(fn, dev_in)
            _sync()
        except Exception as exc:
            tally.raised(index, exc)
            continue
        if inplace and (cpu_out is cpu_in[0]) != (dev_out is dev_in[0]):
            tally.mismatched(
                index,
                "in-place variant returned "
                + (
                    "a new tensor on flagos" if cpu_out is cpu_in[0] else "its input on flagos only"
                ),
            )
            continue
        try:
            _compare_run(op, sample, (cpu_out, cpu_in), (dev_out, dev_in), tally, index)
        except Exception as exc:  # reading the flagos result back failed
            tally.raised(index, exc)
    return total


def _structure_only(op: Any) -> str:
    if traits.uninitialized(op):
        return "uninitialised result: compared structure/shape/dtype/device only"
    if op.full_name in traits.RANDOM:
        return "random op: compared structure/shape/dtype/device only"
    return "random samples: compared structure/shape/dtype/device only"


def _forward(op: Any, dtype: torch.dtype, max_samples: int) -> CheckResult:
    tally = _Tally("forward")
    total = _run_variant(op, op.op, _samples(op, dtype, False, max_samples), tally, inplace=False)
    return tally.result(total)


def _inplace(op: Any, dtype: torch.dtype, max_samples: int) -> CheckResult:
    fn = op.get_inplace()
    if fn is None:
        return CheckResult("inplace", "skipped", "no in-place variant")
    tally = _Tally("inplace")
    samples = _samples(op, dtype, False, max_samples)
    total = _run_variant(op, fn, samples, tally, inplace=True)
    if total == 0 and samples:
        return CheckResult("inplace", "skipped", "every sample broadcasts its input")
    return tally.result(total)


def _weighted_sum(outputs: list[torch.Tensor], index: int, device: str) -> torch.Tensor:
    total = None
    for k, out in enumerate(outputs):
        real = torch.view_as_real(out.resolve_conj()) if out.is_complex() else out
        g = torch.Generator().manual_seed(1000 * index + k + 1)
        weight = torch.randn(real.shape, generator=g, dtype=real.dtype).to(device)
        term = (real * weight).sum()
        total = term if total is None else total + term
    assert total is not None
    return total


def _grads(op: Any, sample: Any, inputs: tuple[Any, tuple, dict], index: int, device: str):
    out = _call(op.op, inputs)
    processed = sample.output_process_fn_grad(out)
    outputs = [t for t in tensors_in(processed) if t.requires_grad]
    leaves = [t for t in tensors_in(inputs) if t.requires_grad]
    if not outputs or not leaves:
        return None
    loss = _weighted_sum(outputs, index, device)
    return list(torch.autograd.grad(loss, leaves, allow_unused=True))


def _backward(op: Any, dtype: torch.dtype, max_samples: int) -> CheckResult:
    if not op.supports_autograd:
        return CheckResult("backward", "skipped", "OpInfo: no autograd support")
    if dtype not in op.supported_backward_dtypes("cpu"):
        return CheckResult(
            "backward", "skipped", f"OpInfo: no {_dtype_name(dtype)} backward on CPU"
        )
    dev = device_name()
    tally = _Tally("backward")
    samples = _samples(op, dtype, True, max_samples)
    total = 0
    for index, sample in enumerate(samples):
        values = traits.values_comparable(op, sample)
        cpu_in, dev_in = _inputs(op, sample)
        try:
            cpu_grads = _grads(op, sample, cpu_in, index, "cpu")
        except Exception as exc:
            total += 1
            tally.cpu_raised(exc)
            continue
        if cpu_grads is None:  # nothing differentiable in this sample
            continue
        total += 1
        try:
            dev_grads = _grads(op, sample, dev_in, index, dev)
            _sync()
            mismatch = compare(dev_grads, cpu_grads, values=values, accumulates=True, path="grad")
        except Exception as exc:
            tally.raised(index, exc)
            continue
        if mismatch is not None:
            tally.mismatched(index, mismatch)
        else:
            tally.passed()
            if not values:
                tally.note(_structure_only(op))
    if samples and total == 0:
        return CheckResult("backward", "skipped", "no sample has a differentiable output")
    return tally.result(total)


def check_op(
    op: Any,
    dtype: torch.dtype = torch.float32,
    *,
    max_samples: int = DEFAULT_MAX_SAMPLES,
    checks: Iterable[str] = CHECKS,
) -> OpResult:
    """Run ``op`` (an OpInfo entry) on CPU and on ``flagos`` for ``dtype`` and classify it."""
    start = time.perf_counter()
    checks = tuple(checks)
    result = OpResult(op.name, op.variant_test_name, _dtype_name(dtype), has_samples=False)
    if dtype not in op.supported_dtypes("cpu"):
        result.checks = [
            CheckResult(c, "skipped", f"OpInfo: {_dtype_name(dtype)} not supported on CPU")
            for c in checks
        ]
        result.seconds = time.perf_counter() - start
        return result
    runners = {"forward": _forward, "inplace": _inplace, "backward": _backward}
    for name in checks:
        try:
            check = runners[name](op, dtype, max_samples)
        except Exception as exc:  # generating samples failed
            check = CheckResult(name, "skipped", f"sample_inputs raised {first_line(exc)}")
        result.checks.append(check)
        if name == "forward":
            result.has_samples = check.samples + check.cpu_errors > 0
    result.seconds = time.perf_counter() - start
    return result
