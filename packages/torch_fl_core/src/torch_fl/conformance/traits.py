"""What kind of result an operator gives, which decides how its results are compared.

- random operators and random samples (their values depend on each device's generator, e.g.
  attention with ``dropout_p > 0``, fractional max pooling without ``_random_samples``): only
  structure, shape, dtype and device are compared;
- operators with uninitialised results (``empty*``, OpInfo's ``has_nondeterministic_output``):
  the same;
- accumulating operators (reductions, contractions): atol scaled by the result's magnitude;
- arguments the operator requires on the CPU whatever the device (``tensor_split``'s tensor of
  indices): left on the CPU in the ``flagos`` run;
- decompositions defined up to signs or phases: compared again after the sample's
  ``output_process_fn_grad`` (how PyTorch's own CPU-vs-device test handles them) if the raw results
  differ.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = [
    "accumulates",
    "cpu_arguments",
    "is_random",
    "random_sample",
    "sign_ambiguous",
    "uninitialized",
    "values_comparable",
]

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


def _positional(sample: Any, index: int, default: Any) -> Any:
    return sample.args[index] if len(sample.args) > index else default


# Entries whose samples are random only with some arguments.
_RANDOM_WHEN: dict[str, Callable[[Any], bool]] = {
    "nn.functional.scaled_dot_product_attention": lambda s: s.kwargs.get("dropout_p", 0.0) > 0,
    # multi_head_attention_forward(query, key, value, embed_dim, num_heads, in_proj_weight,
    #     in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p, ...): dropout_p is args[9].
    "nn.functional.multi_head_attention_forward": lambda s: (
        bool(s.kwargs.get("training", True)) and _positional(s, 9, 0.0) > 0
    ),
    "nn.functional.fractional_max_pool2d": lambda s: s.kwargs.get("_random_samples") is None,
    "nn.functional.fractional_max_pool3d": lambda s: s.kwargs.get("_random_samples") is None,
}

# Positional arguments (indexes into SampleInput.args) the operator requires on the CPU.
_CPU_ARGUMENTS: dict[str, tuple[int, ...]] = {
    "tensor_split": (0,),  # tensor_indices_or_sections must be a CPU tensor
}


def is_random(op: Any) -> bool:
    """Every sample of ``op`` draws from the generator (seeded before each call)."""
    return op.full_name in RANDOM or op.full_name in _RANDOM_WHEN


def random_sample(op: Any, sample: Any) -> bool:
    """``op`` on ``sample`` draws from the generator, so values differ between devices."""
    if op.full_name in RANDOM:
        return True
    rule = _RANDOM_WHEN.get(op.full_name)
    return bool(rule is not None and rule(sample))


def uninitialized(op: Any) -> bool:
    return op.full_name in UNINITIALIZED or bool(getattr(op, "has_nondeterministic_output", False))


def values_comparable(op: Any, sample: Any) -> bool:
    """False when only structure, shape, dtype and device of the results can be compared."""
    return not (uninitialized(op) or random_sample(op, sample))


def cpu_arguments(op: Any) -> tuple[int, ...]:
    """Indexes of ``SampleInput.args`` that stay on the CPU in the ``flagos`` run."""
    return _CPU_ARGUMENTS.get(op.full_name, ())


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
