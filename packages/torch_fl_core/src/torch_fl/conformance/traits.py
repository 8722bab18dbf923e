"""What kind of result an operator gives, which decides how its results are compared.

- random operators (their values depend on the generator, which differs per device): only
  structure, shape, dtype and device are compared;
- operators with uninitialised results (``empty*``, OpInfo's ``has_nondeterministic_output``):
  the same;
- accumulating operators (reductions, contractions): atol scaled by the result's magnitude;
- decompositions defined up to signs or phases: compared again after the sample's
  ``output_process_fn_grad`` (how PyTorch's own CPU-vs-device test handles them) if the raw results
  differ.
"""

from __future__ import annotations

from typing import Any

__all__ = ["accumulates", "is_random", "sign_ambiguous", "uninitialized", "values_comparable"]

RANDOM = frozenset(
    {
        "bernoulli",
        "cauchy",
        "exponential",
        "geometric",
        "log_normal",
        "multinomial",
        "nn.functional.alpha_dropout",
        "nn.functional.dropout",
        "nn.functional.dropout2d",
        "nn.functional.dropout3d",
        "nn.functional.feature_alpha_dropout.with_train",
        "nn.functional.rrelu",
        "normal",
        "normal.in_place",
        "normal.number_mean",
        "rand_like",
        "randint",
        "randint_like",
        "randn",
        "randn_like",
        "uniform",
    }
)

UNINITIALIZED = frozenset(
    {
        "empty",
        "empty_like",
        "empty_permuted",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
    }
)

_ACCUMULATING = frozenset(
    {
        "addbmm",
        "addmm",
        "addmm.decomposed",
        "addmv",
        "addr",
        "baddbmm",
        "bmm",
        "cdist",
        "chain_matmul",
        "cov",
        "corrcoef",
        "cumsum",
        "cumprod",
        "cumulative_trapezoid",
        "dist",
        "dot",
        "einsum",
        "inner",
        "kron",
        "logcumsumexp",
        "logsumexp",
        "matmul",
        "mm",
        "mv",
        "nn.functional.bilinear",
        "nn.functional.linear",
        "tensordot",
        "trapezoid",
        "trapz",
        "vdot",
    }
)

_DECOMPOSITIONS = frozenset(
    {"svd", "svd_lowrank", "pca_lowrank", "qr", "lu", "geqrf", "symeig", "eig", "lobpcg"}
)


def is_random(op: Any) -> bool:
    return op.full_name in RANDOM


def uninitialized(op: Any) -> bool:
    return op.full_name in UNINITIALIZED or bool(getattr(op, "has_nondeterministic_output", False))


def values_comparable(op: Any) -> bool:
    """False when only structure, shape, dtype and device of the results can be compared."""
    return not (is_random(op) or uninitialized(op))


def accumulates(op: Any) -> bool:
    from torch.testing._internal.opinfo.core import ReductionOpInfo

    name = op.name
    return (
        isinstance(op, ReductionOpInfo)
        or name in _ACCUMULATING
        or op.full_name in _ACCUMULATING
        or name.startswith(("linalg.", "fft.", "masked."))
        or "conv" in name
        or name in ("sum", "mean", "nansum", "nanmean", "prod", "std", "var", "norm")
    )


def sign_ambiguous(op: Any) -> bool:
    return op.name in _DECOMPOSITIONS or op.name.startswith("linalg.")
