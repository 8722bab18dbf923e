"""Reductions and scans into any ``dtype=`` answer as the native device's (CPU's; CUDA's on the
cuda vendor), whatever serves them.

A vendor kernel serves the dtypes its library computes in and declines the rest, which the CPU
then answers. The input dtypes a kernel reads and the result dtypes it writes are different sets
(ACLNN's ReduceSum reads bool but never sums into it; muDNN's Reduce::ADD sums in no 8- or 16-bit
integer type): a kernel that checked only one of them handed its library a call it refuses, and
``x.sum(dtype=torch.bool)`` raised the library's status where CPU answers.
"""

from __future__ import annotations

import itertools

import pytest
import torch

pytestmark = [pytest.mark.routing, pytest.mark.usefixtures("flagos")]

DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
]

OPS = {
    "sum": lambda t, dt: t.sum(dtype=dt),
    "sum.dim_IntList": lambda t, dt: t.sum(1, dtype=dt),
    "cumsum": lambda t, dt: t.cumsum(1, dtype=dt),
    "prod": lambda t, dt: t.prod(dtype=dt),
    "mean": lambda t, dt: t.mean(1, dtype=dt),
}


def _outcome(fn, t: torch.Tensor, dt: torch.dtype):
    try:
        return fn(t, dt).cpu(), None
    except Exception as e:  # noqa: BLE001 -- the error's type is what is compared
        return None, e


@pytest.mark.parametrize("op", list(OPS))
def test_every_input_and_result_dtype_answers_as_the_native_device(op, native_device):
    fn = OPS[op]
    wrong = []
    for src, dt in itertools.product(DTYPES, DTYPES):
        x = (torch.arange(-6, 6).reshape(2, 6) % 3).to(src)
        want, want_err = _outcome(fn, x.to(native_device), dt)
        got, got_err = _outcome(fn, x.to("flagos"), dt)
        case = f"{op}: {src} -> dtype={dt}"
        if want_err is not None or got_err is not None:
            if type(want_err) is not type(got_err):
                wrong.append(f"{case}: {native_device} {want_err!r}, flagos {got_err!r}")
        elif got.dtype != want.dtype or not torch.allclose(
            got.double(), want.double(), rtol=1e-2, atol=1e-2, equal_nan=True
        ):
            wrong.append(f"{case}: {got} != {want}")
    assert not wrong, "\n".join(wrong[:20])


@pytest.mark.parametrize("op", ["all", "any"])
def test_all_and_any_answer_in_the_native_dtype(op, native_device):
    """bool, except uint8 in uint8, as PyTorch answers (SDKs write bool)."""
    for src in DTYPES:
        x = (torch.arange(-6, 6).reshape(2, 6) % 3).to(src)
        for args in ((), (1,)):
            want = getattr(x.to(native_device), op)(*args).cpu()
            got = getattr(x.to("flagos"), op)(*args).cpu()
            assert got.dtype == want.dtype and torch.equal(got, want), (op, src, args)
