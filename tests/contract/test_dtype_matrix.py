"""Every dtype, and every pair of dtypes, through common operators: flagos answers as CPU.

A vendor kernel serves the dtypes its library computes in and declines the rest for the CPU to
answer, and PyTorch's own errors (a bool subtraction, silu of integers, an in-place result that
cannot hold the promoted dtype) must come from PyTorch. Each operator runs on a small tensor of
every dtype (pairs of them for binary operators); the outcome on flagos (the result's dtype,
shape and values, or the error's type) must equal the native device's: CPU's, or CUDA's on the
cuda vendor, whose kernels are CUDA's (CUDA takes abs of bool, refuses integer mm, and orders
topk's ties otherwise). Found, when written: bool subtraction
answered on gcu, ascend and musa; silu of integers answered on gcu; all/any of uint8 answered in
bool on ascend; sums into bool on ascend and into int8 on musa handed their library a result
dtype it refuses (a kernel checked the dtypes it reads, not those it writes).
"""

from __future__ import annotations

import functools
import itertools

import pytest
import torch
import torch.nn.functional as F

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


def mk(dt: torch.dtype, shape=(2, 6), k: int = 0) -> torch.Tensor:
    return ((torch.arange(-6, 6).reshape(shape) + k) % 4 - 1).to(dt)


UNARY = {
    "amax": lambda t: t.amax(1),
    "amin": lambda t: t.amin(0),
    "max.dim": lambda t: t.max(1),
    "min.dim": lambda t: t.min(0),
    "argmax": lambda t: t.argmax(1),
    "argmin": lambda t: t.argmin(),
    "all": lambda t: t.all(1),
    "any": lambda t: t.any(),
    "max": lambda t: t.max(),
    "abs": lambda t: t.abs(),
    "neg": lambda t: t.neg(),
    "exp": lambda t: t.exp(),
    "sqrt": lambda t: t.abs().sqrt(),
    "relu": lambda t: torch.relu(t),
    "sigmoid": lambda t: t.sigmoid(),
    "sign": lambda t: t.sign(),
    "logical_not": lambda t: t.logical_not(),
    "softmax": lambda t: t.softmax(1),
    "log_softmax_f32": lambda t: t.log_softmax(1, dtype=torch.float32),
    "softmax_f64": lambda t: t.softmax(0, dtype=torch.float64),
    "cat": lambda t: torch.cat([t, t], 1),
    "stack": lambda t: torch.stack([t, t]),
    "where": lambda t: torch.where(t > 0, t, 0),
    "masked_fill": lambda t: t.masked_fill(t > 0, 3),
    "fill_": lambda t: t.clone().fill_(2),
    "zero_": lambda t: t.clone().zero_(),
    "clamp": lambda t: t.clamp(0, 1),
    "pow2": lambda t: t.pow(2),
    "nonzero": lambda t: t.nonzero(),
    "index_select": lambda t: t.index_select(1, torch.tensor([0, 2, 2], device=t.device)),
    "gather": lambda t: t.gather(1, torch.zeros(2, 3, dtype=torch.long, device=t.device)),
    "cumsum_out": lambda t: torch.cumsum(
        t, 1, out=torch.empty(2, 6, dtype=t.dtype, device=t.device)
    ),
    "sum_out": lambda t: torch.sum(t, 1, out=torch.empty(2, dtype=t.dtype, device=t.device)),
    "mean": lambda t: t.mean(),
    "var": lambda t: t.var(1),
    "norm": lambda t: t.norm(),
    "topk": lambda t: t.topk(2, 1),
    "sort": lambda t: t.sort(1, stable=True),
    "embedding": lambda t: F.embedding(torch.tensor([[0, 1]], device=t.device), t),
    # in-place with a float scalar / tensor into an int tensor: PyTorch's cast error
    "add_float_": lambda t: t.clone().add_(1.5),
    "mul_float_tensor_": lambda t: t.clone().mul_(torch.ones(6, device=t.device) * 0.5),
    "add_out_int": lambda t: torch.add(
        t, t, out=torch.empty(2, 6, dtype=torch.int32, device=t.device)
    ),
    "add_out_float": lambda t: torch.add(
        t, t, out=torch.empty(2, 6, dtype=torch.float32, device=t.device)
    ),
    "sum_out_f64": lambda t: torch.sum(
        t, 1, out=torch.empty(2, dtype=torch.float64, device=t.device)
    ),
    "div_floor": lambda t: torch.div(t, 3, rounding_mode="floor"),
    "div_trunc": lambda t: torch.div(t, 3, rounding_mode="trunc"),
    "floor_divide": lambda t: t // 2,
    "true_div_scalar": lambda t: t / 2,
    "rsub_scalar": lambda t: 3 - t,
    "pow_scalar_neg": lambda t: t**-1 if t.is_floating_point() else t**2,
    "eq_scalar": lambda t: t == 1,
    "gt_float_scalar": lambda t: t > 0.5,
    "mul_bool_scalar": lambda t: t * True,
    "clamp_min": lambda t: t.clamp(min=0),
    "clamp_tensor": lambda t: t.clamp(torch.zeros_like(t), torch.ones_like(t)),
    "where_scalar": lambda t: torch.where(t > 0, 1.5, t),
    "masked_fill_float": lambda t: t.masked_fill(t > 0, 2.5),
    "noncontig_add": lambda t: t.T + t.T,
    "noncontig_sum": lambda t: t.T.sum(0),
    "bcast_add": lambda t: t + t[0],
    "zero_dim": lambda t: t[0, 0] + t,
    "empty_sum": lambda t: t[:, :0].sum(1),
    "empty_cat": lambda t: torch.cat([t[:0], t]),
    "empty_max": lambda t: t[:, :0].amax(0),
    "mean_dtype": lambda t: t.mean(dtype=torch.float32),
    "softmax_dtype": lambda t: F.softmax(t, 1, dtype=torch.float32),
    "cumsum_": lambda t: t.clone().cumsum_(1),
    "index_put": lambda t: t.clone().index_put_(
        (torch.tensor([0, 1], device=t.device),), torch.tensor(1, dtype=t.dtype, device=t.device)
    ),
    "index_int32": lambda t: t[torch.tensor([1, 0], dtype=torch.int32, device=t.device)],
    "masked_select": lambda t: t[t > 0],
    "scatter_add": lambda t: t.clone().scatter_add_(
        1, torch.zeros(2, 2, dtype=torch.long, device=t.device), t[:, :2]
    ),
    "arange_like": lambda t: (
        torch.arange(5, dtype=t.dtype, device=t.device)
        if t.dtype != torch.bool
        else torch.ones(1, device=t.device)
    ),
    "full": lambda t: torch.full((3,), 2, dtype=t.dtype, device=t.device),
    "eye": lambda t: torch.eye(3, dtype=t.dtype, device=t.device),
    "to_f16": lambda t: t.to(torch.float16),
    "to_bool": lambda t: t.to(torch.bool),
    "to_i8": lambda t: t.to(torch.int8),
    "addcdiv": lambda t: (
        torch.addcdiv(t, t, t.abs() + 1, value=0.5) if t.is_floating_point() else t
    ),
    "lerp_tensor_w": lambda t: (
        torch.lerp(t, t * 2, torch.full_like(t, 0.25)) if t.is_floating_point() else t
    ),
    "std_mean": lambda t: torch.std_mean(t, 1) if t.is_floating_point() else t,
    "logsumexp": lambda t: torch.logsumexp(t, 1) if t.is_floating_point() else t,
    "gelu": lambda t: F.gelu(t),
    "silu": lambda t: F.silu(t),
    "layer_norm": lambda t: F.layer_norm(t, (6,)),
    "dropout_eval": lambda t: F.dropout(t, 0.5, training=False),
    "mm_int": lambda t: t @ t.T,
    "bmm_noncontig": lambda t: torch.bmm(
        t[None].transpose(1, 2).contiguous().transpose(1, 2), t.T[None]
    ),
}

BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "eq": lambda a, b: a == b,
    "lt": lambda a, b: a < b,
    "maximum": lambda a, b: torch.maximum(a, b),
    "add_alpha": lambda a, b: torch.add(a, b, alpha=2),
    "add_": lambda a, b: a.clone().add_(b),
    "mul_": lambda a, b: a.clone().mul_(b),
    "add_out": lambda a, b: torch.add(a, b, out=torch.empty(2, 6, dtype=a.dtype, device=a.device)),
    "mm": lambda a, b: a @ b.T,
    "bmm": lambda a, b: torch.bmm(a[None], b.T[None]),
    "addmm": lambda a, b: torch.addmm(a[:, :2], a, b.T),
    "lerp": lambda a, b: torch.lerp(a, b, 0.5),
    "addcmul": lambda a, b: torch.addcmul(a, a, b, value=2),
    "pow": lambda a, b: torch.pow(a, b.abs()),
    "remainder": lambda a, b: torch.remainder(a, b),
    "atan2": lambda a, b: torch.atan2(a, b),
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "fmod": lambda a, b: torch.fmod(a, b),
    "bitwise_and": lambda a, b: a & b,
    "bitwise_or": lambda a, b: a | b,
    "xor": lambda a, b: a ^ b,
    "minimum": lambda a, b: torch.minimum(a, b),
    "ne": lambda a, b: a != b,
    "ge": lambda a, b: a >= b,
    "where_mixed": lambda a, b: torch.where(a > b, a, b),
    "cat_mixed": lambda a, b: torch.cat([a, b]),
    "stack_mixed": lambda a, b: torch.stack([a, b]),
    "masked_fill_t": lambda a, b: a.masked_fill(b > 0, b[0, 0]),
    "copy_": lambda a, b: a.clone().copy_(b),
    "div_": lambda a, b: a.clone().div_(b),
    "add_scalar_t": lambda a, b: a + b[0, 0].item(),
    "logical_and": lambda a, b: torch.logical_and(a, b),
    "hypot": lambda a, b: torch.hypot(a, b),
    "clamp_t": lambda a, b: torch.clamp(a, min=b),
    "lerp_w": lambda a, b: torch.lerp(a, b, 0.3),
    "addcdiv": lambda a, b: torch.addcdiv(a, a, b),
}


def outcome(fn, *ts):
    try:
        r = fn(*ts)
    except Exception as e:  # noqa: BLE001 -- the error's type is what is compared
        return None, type(e)
    return (tuple(x.cpu() for x in r) if isinstance(r, tuple) else r.cpu()), None


def same(got, want) -> bool:
    if isinstance(want, tuple):
        return all(same(g, w) for g, w in zip(got, want, strict=True))
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if got.dtype == torch.bool or not got.is_floating_point():
        return torch.equal(got, want)
    return torch.allclose(got.double(), want.double(), rtol=2e-2, atol=2e-2, equal_nan=True)


def check(name, fn, cases, native: str) -> None:
    wrong = []
    for dts, ts in cases:
        want, want_err = outcome(fn, *(t.to(native) for t in ts))
        got, got_err = outcome(fn, *(t.to("flagos") for t in ts))
        if want_err is not None or got_err is not None:
            if want_err is not got_err:
                wrong.append(f"{name}{dts}: {native} {want_err}, flagos {got_err}")
        elif not same(got, want):
            wrong.append(f"{name}{dts}: {got} != {want}")
    assert not wrong, "\n".join(wrong[:20])


@pytest.mark.parametrize("name", list(UNARY))
def test_each_dtype_answers_as_the_native_device(name, native_device):
    check(name, UNARY[name], [((dt,), (mk(dt),)) for dt in DTYPES], native_device)


@pytest.mark.parametrize("name", list(BINARY))
def test_each_pair_of_dtypes_answers_as_the_native_device(name, native_device):
    pairs = itertools.product(DTYPES, DTYPES)
    cases = [((a, b), (mk(a), mk(b, k=1))) for a, b in pairs]
    check(name, BINARY[name], cases, native_device)


# Reductions and scans into each dtype= (the result dtypes a library writes are not the ones it
# reads: ACLNN's ReduceSum reads bool but never sums into it).
INTO = {
    "sum": lambda t, dt: t.sum(dtype=dt),
    "sum.dim_IntList": lambda t, dt: t.sum(1, dtype=dt),
    "cumsum": lambda t, dt: t.cumsum(1, dtype=dt),
    "prod": lambda t, dt: t.prod(dtype=dt),
    "mean": lambda t, dt: t.mean(1, dtype=dt),
}


@pytest.mark.parametrize("name", list(INTO))
def test_each_input_and_result_dtype_answers_as_the_native_device(name, native_device):
    for dt in DTYPES:
        fn = functools.partial(INTO[name], dt=dt)
        check(f"{name}(dtype={dt})", fn, [((src,), (mk(src),)) for src in DTYPES], native_device)


@pytest.mark.parametrize("name", ["all", "any"])
def test_all_and_any_answer_in_the_native_dtype(name, native_device):
    """bool, except uint8 in uint8, as PyTorch answers (SDKs write bool)."""
    cases = [((dt,), (mk(dt),)) for dt in DTYPES]
    check(name, lambda t: getattr(t, name)(), cases, native_device)
    check(f"{name}(1)", lambda t: getattr(t, name)(1), cases, native_device)
