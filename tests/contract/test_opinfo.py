"""Operator conformance over a stable subset of PyTorch's OpInfo database, against CPU.

Each test runs one OpInfo entry's sample inputs (the first few, generated on CPU with a fixed seed)
on CPU and on ``flagos`` through :mod:`torch_fl.conformance` and requires the same results: values
within the dtype's tolerance, results on ``flagos``, views aliasing their input, inputs mutated as
on CPU. float32 forward and backward for ~200 common operators, plus int64 and bool forward for a
handful. ``python -m torch_fl.conformance`` runs every entry and writes
``docs/operator-conformance.md``.

Known product bugs stay in the suite as ``xfail`` with their diagnosis from
:mod:`torch_fl.conformance.diagnoses`, strict where every operator runs ATen's CPU kernels through
torch-fl's core paths (``torch_fl.testing.cpu_kernels()``: sim, where the diagnoses were made); a
vendor with its own kernel for the operator may pass. Fixing one turns its xfail into a failure
there: then drop it from ``KNOWN_BUGS``.
"""

from __future__ import annotations

import pytest
import torch
from torch_fl import conformance
from torch_fl.conformance.diagnoses import diagnosis

pytestmark = [pytest.mark.opinfo, pytest.mark.usefixtures("flagos")]

FLOAT32_OPS = (
    # pointwise unary
    "abs",
    "neg",
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "sqrt",
    "rsqrt",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "tanh",
    "asinh",
    "acosh",
    "atanh",
    "sigmoid",
    "erf",
    "erfc",
    "erfinv",
    "floor",
    "ceil",
    "round",
    "trunc",
    "frac",
    "sign",
    "reciprocal",
    "square",
    "lgamma",
    "digamma",
    "nan_to_num",
    "clamp",
    "isnan",
    "isinf",
    "isfinite",
    "logit",
    # pointwise binary and ternary
    "add",
    "sub",
    "mul",
    "div.no_rounding_mode",
    "div.floor_rounding",
    "div.trunc_rounding",
    "true_divide",
    "floor_divide",
    "remainder",
    "fmod",
    "pow",
    "atan2",
    "maximum",
    "minimum",
    "fmax",
    "fmin",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "hypot",
    "copysign",
    "lerp",
    "xlogy",
    "logaddexp",
    "addcmul",
    "addcdiv",
    "where",
    "masked_fill",
    # reductions and scans
    "sum",
    "mean",
    "prod",
    "amax",
    "amin",
    "max.reduction_with_dim",
    "max.reduction_no_dim",
    "min.reduction_with_dim",
    "argmax",
    "argmin",
    "std",
    "var",
    "var_mean",
    "norm",
    "logsumexp",
    "cumsum",
    "cumprod",
    "all",
    "any",
    "nansum",
    "count_nonzero",
    "median",
    "aminmax",
    # matmul family
    "matmul",
    "mm",
    "bmm",
    "addmm",
    "addmv",
    "baddbmm",
    "mv",
    "dot",
    "outer",
    "einsum",
    "tensordot",
    "linalg.vector_norm",
    # torch.nn.functional
    "nn.functional.relu",
    "nn.functional.relu6",
    "nn.functional.leaky_relu",
    "nn.functional.elu",
    "nn.functional.selu",
    "nn.functional.gelu",
    "nn.functional.silu",
    "nn.functional.mish",
    "nn.functional.softplus",
    "nn.functional.hardtanh",
    "nn.functional.hardswish",
    "nn.functional.logsigmoid",
    "nn.functional.prelu",
    "softmax",
    "log_softmax",
    "nn.functional.linear",
    "nn.functional.layer_norm",
    "nn.functional.group_norm",
    "nn.functional.batch_norm",
    "nn.functional.conv1d",
    "nn.functional.conv2d",
    "nn.functional.max_pool2d",
    "nn.functional.avg_pool2d",
    "nn.functional.adaptive_avg_pool2d",
    "nn.functional.embedding",
    "nn.functional.dropout",
    "nn.functional.cross_entropy",
    "nn.functional.nll_loss",
    "nn.functional.mse_loss",
    "nn.functional.l1_loss",
    "nn.functional.smooth_l1_loss",
    "nn.functional.binary_cross_entropy",
    "nn.functional.binary_cross_entropy_with_logits",
    "nn.functional.kl_div",
    "nn.functional.cosine_similarity",
    "nn.functional.pad.constant",
    "nn.functional.pad.reflect",
    "nn.functional.interpolate.nearest",
    "nn.functional.interpolate.bilinear",
    "nn.functional.normalize",
    "nn.functional.glu",
    "nn.functional.scaled_dot_product_attention",
    "nn.functional.pixel_shuffle",
    # shapes, views and indexing
    "cat",
    "stack",
    "hstack",
    "split",
    "chunk",
    "reshape",
    "view",
    "permute",
    "transpose",
    "t",
    "squeeze",
    "unsqueeze",
    "flatten",
    "expand",
    "repeat",
    "flip",
    "roll",
    "narrow",
    "select",
    "unbind",
    "movedim",
    "index_select",
    "index_add",
    "index_copy",
    "index_fill",
    "index_put",
    "gather",
    "scatter",
    "scatter_add",
    "masked_select",
    "masked_scatter",
    "take_along_dim",
    "tril",
    "triu",
    "diagonal",
    "nonzero",
    "sort",
    "topk",
    "argsort",
    "unique",
    "searchsorted",
    "__getitem__",
    "clone",
    "contiguous",
    "to",
    "full_like",
    "zeros_like",
    "ones_like",
    "arange",
    "linspace",
    "item",
)

INT64_OPS = (
    "add",
    "mul",
    "sub",
    "floor_divide",
    "remainder",
    "bitwise_and",
    "sum",
    "cumsum",
    "eq",
    "lt",
    "where",
    "cat",
    "index_select",
    "gather",
    "argmax",
    "max.reduction_with_dim",
    "sort",
    "nonzero",
    "unique",
    "flip",
)

BOOL_OPS = (
    "logical_and",
    "logical_or",
    "logical_not",
    "logical_xor",
    "bitwise_and",
    "any",
    "all",
    "eq",
    "where",
    "cat",
    "nonzero",
    "masked_select",
)

# (entry, dtype, check) known to fail because of a product bug; the diagnosis is the xfail reason.
KNOWN_BUGS: set[tuple[str, str, str]] = set()


def _vendor() -> str:
    try:
        import torch_fl

        return str(torch_fl.vendor().name)
    except Exception:
        return "<unknown>"


def _cpu_kernels() -> bool:
    try:
        from torch_fl import testing

        return testing.cpu_kernels()
    except Exception:  # collection must not fail here; the tests themselves will
        return False


# The diagnoses were made where every operator runs ATen's CPU kernels through torch-fl's core paths
# (sim); where a vendor runs kernels of its own one may fix the operator, so an unexpected pass is
# reported rather than failed.
_STRICT = _cpu_kernels()


def _params(names: tuple[str, ...], dtype: str, check: str) -> list:
    params = []
    for name in names:
        op = conformance.find(name)
        if check == "backward" and op is not None:
            if not op.supports_autograd or getattr(
                torch, dtype
            ) not in op.supported_backward_dtypes("cpu"):
                continue  # no gradient to compare: not a test
        marks = []
        if (name, dtype, check) in KNOWN_BUGS:
            reason = diagnosis(name) or "known product bug"
            marks.append(pytest.mark.xfail(strict=_STRICT, reason=reason))
        params.append(pytest.param(name, id=name, marks=marks))
    return params


def _check(name: str, dtype: torch.dtype, check: str) -> None:
    op = conformance.find(name)
    if op is None:
        pytest.skip(f"{name} is not in torch {torch.__version__}'s OpInfo database")
    result = conformance.check_op(op, dtype, checks=(check,))
    outcome = result.check(check)
    assert outcome is not None
    if outcome.outcome == "skipped":
        pytest.skip(f"{name} {check} ({result.dtype}): {outcome.detail}")
    assert outcome.outcome == "pass", (
        f"{name} {check} ({result.dtype}) on vendor {_vendor()!r}: {outcome.outcome}: "
        f"{outcome.detail}"
    )


@pytest.mark.parametrize("name", _params(FLOAT32_OPS, "float32", "forward"))
def test_float32_forward(name):
    _check(name, torch.float32, "forward")


@pytest.mark.parametrize("name", _params(FLOAT32_OPS, "float32", "backward"))
def test_float32_backward(name):
    _check(name, torch.float32, "backward")


@pytest.mark.parametrize("name", _params(INT64_OPS, "int64", "forward"))
def test_int64_forward(name):
    _check(name, torch.int64, "forward")


@pytest.mark.parametrize("name", _params(BOOL_OPS, "bool", "forward"))
def test_bool_forward(name):
    _check(name, torch.bool, "forward")
