"""Tolerances for comparing ``flagos`` results with CPU ones: the one table of them.

Operator conformance (:mod:`torch_fl.conformance`) and the contract suites (``tests/``) both take
their tolerances from here; neither keeps a table of its own.

A value ``actual`` matches ``expected`` when ``|actual - expected| <= atol + rtol * |expected|``
(NaN matches NaN, an infinity matches the same infinity). Integer and bool results must be equal.
The per-dtype values (:func:`for_dtype`, the result of one operator) are PyTorch's own defaults
for these dtypes (``torch.testing.assert_close``). Copies are compared bit-exactly, not here.

Results that sum many terms (reductions, contractions, gradients) carry rounding error in
proportion to the magnitude of what they sum, not of the result; for those ``atol`` is scaled by
the largest finite magnitude of the expected tensor (at least 1), see :func:`for_tensor`.

Longer computations have named tolerances below (:data:`FLOAT32_STEPS`, :data:`COLLECTIVE`,
:data:`COMPILED_BLOCK`, :data:`COMPILED_BLOCK_GRAD`, :func:`for_lower_precision`): each is looser
than one operator's and far tighter than a real divergence. ``tol.kwargs()`` gives the
``rtol``/``atol`` keywords of ``torch.testing.assert_close``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = [
    "COLLECTIVE",
    "COMPILED_BLOCK",
    "COMPILED_BLOCK_GRAD",
    "EXACT",
    "FLOAT32_STEPS",
    "Tolerance",
    "for_dtype",
    "for_lower_precision",
    "for_tensor",
]


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float

    @property
    def exact(self) -> bool:
        return self.rtol == 0.0 and self.atol == 0.0

    def kwargs(self) -> dict[str, float]:
        """``{"rtol": ..., "atol": ...}``: ``torch.testing.assert_close(a, e, **tol.kwargs())``."""
        return {"rtol": self.rtol, "atol": self.atol}

    def __str__(self) -> str:
        return "exact" if self.exact else f"rtol={self.rtol:g} atol={self.atol:g}"


EXACT = Tolerance(0.0, 0.0)

_FLOAT: dict[torch.dtype, Tolerance] = {
    torch.float16: Tolerance(1e-3, 1e-5),
    torch.bfloat16: Tolerance(1.6e-2, 1e-5),
    torch.float32: Tolerance(1.3e-6, 1e-5),
    torch.float64: Tolerance(1e-7, 1e-7),
    torch.complex32: Tolerance(1e-3, 1e-5),
    torch.complex64: Tolerance(1.3e-6, 1e-5),
    torch.complex128: Tolerance(1e-7, 1e-7),
}
# float8 formats carry 2-3 mantissa bits: one step apart is the same value computed differently.
_FLOAT8 = Tolerance(0.125, 1e-3)

#: float32 results of several steps of computation: a few training steps (losses, parameters,
#: gradients, optimizer state), a model's forward and backward through its layers (attention may
#: take another SDPA kernel on flagos than on CPU), one model under two route tables, a graph
#: compiled by Inductor against eager.
FLOAT32_STEPS = Tolerance(1e-4, 1e-5)
#: float32 collectives (all-reduce, reduce-scatter, ...) against the same sums on one CPU: the
#: ranks' contributions are added in another order.
COLLECTIVE = Tolerance(1e-5, 1e-5)
#: A transformer block compiled by Inductor (fused kernels, reordered reductions) against eager: the
#: forward output, and (:data:`COMPILED_BLOCK_GRAD`) the gradients of its parameters.
COMPILED_BLOCK = Tolerance(1e-4, 1e-4)
COMPILED_BLOCK_GRAD = Tolerance(1e-3, 1e-4)

# Results computed in float16/bfloat16 (autocast) by two implementations differ by an ulp or two of
# that dtype (order of accumulation) where both run the CPU's kernels ...
_LOWER_PRECISION: dict[torch.dtype, Tolerance] = {
    torch.float16: Tolerance(2e-3, 2e-3),
    torch.bfloat16: Tolerance(1.6e-2, 1.6e-2),
}
# ... and by more where the vendor runs kernels of its own (CUDA's fp16/bf16 kernels accumulate in
# fp32 and round once; CPU kernels may round per step).
_LOWER_PRECISION_DEVICE: dict[torch.dtype, Tolerance] = {
    torch.float16: Tolerance(1e-2, 1e-2),
    torch.bfloat16: Tolerance(5e-2, 5e-2),
}


def for_dtype(dtype: torch.dtype) -> Tolerance:
    """The tolerance for values of ``dtype`` (exact for integer and bool dtypes)."""
    if dtype in _FLOAT:
        return _FLOAT[dtype]
    if dtype.is_floating_point:  # float8 variants and anything newer
        return _FLOAT8
    return EXACT


def for_lower_precision(dtype: torch.dtype, *, cpu_kernels: bool) -> Tolerance:
    """The tolerance for a result computed in ``dtype`` by autocast, against the same policy on CPU.

    ``cpu_kernels``: the flagos result came from ATen's CPU kernels too (the ``exact_kernels``
    fixture of the contract suites, :func:`torch_fl.testing.cpu_kernels`). Dtypes other than
    float16 and bfloat16 get :func:`for_dtype`.
    """
    table = _LOWER_PRECISION if cpu_kernels else _LOWER_PRECISION_DEVICE
    return table.get(dtype) or for_dtype(dtype)


def for_tensor(expected: torch.Tensor, *, accumulates: bool) -> Tolerance:
    """The tolerance for comparing against ``expected``.

    ``accumulates``: the value is a sum of many terms (a reduction, a matrix product, a gradient);
    atol is then scaled by ``max(1, max |expected|)`` over finite values.
    """
    tol = for_dtype(expected.dtype)
    if tol.exact or not accumulates or expected.numel() == 0:
        return tol
    values = expected.detach()
    if values.is_complex():
        values = values.abs()
    values = values.to(torch.float64).abs()
    finite = values[torch.isfinite(values)]
    scale = float(finite.max()) if finite.numel() else 1.0
    return Tolerance(tol.rtol, tol.atol * max(1.0, scale))
