"""Per-dtype tolerances for comparing ``flagos`` results with CPU ones.

A value ``actual`` matches ``expected`` when ``|actual - expected| <= atol + rtol * |expected|``
(NaN matches NaN, an infinity matches the same infinity). Integer and bool results must be equal.
The float values are PyTorch's own defaults for these dtypes (``torch.testing.assert_close``).

Results that sum many terms (reductions, contractions, gradients) carry rounding error in
proportion to the magnitude of what they sum, not of the result; for those ``atol`` is scaled by
the largest finite magnitude of the expected tensor (at least 1), see :func:`for_tensor`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["EXACT", "Tolerance", "for_dtype", "for_tensor"]


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float

    @property
    def exact(self) -> bool:
        return self.rtol == 0.0 and self.atol == 0.0

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


def for_dtype(dtype: torch.dtype) -> Tolerance:
    """The tolerance for values of ``dtype`` (exact for integer and bool dtypes)."""
    if dtype in _FLOAT:
        return _FLOAT[dtype]
    if dtype.is_floating_point:  # float8 variants and anything newer
        return _FLOAT8
    return EXACT


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
