"""Operators whose CPU kernel lacks dtypes that CUDA's takes work on flagos as on CUDA, whatever
serves them: a vendor's kernel, CUDA's own (box:cuda), or core's ``composite`` backend where the
route ends on the CPU.

``histc`` of integer tensors is the one that matters to model code: transformers' MoE experts
count tokens per expert with ``torch.histc`` on int32 ids on every device but cpu and mps. The
expected counts come from CUDA's integer algorithm, written out in :func:`cuda_histc` (on the cuda
vendor the same test checks that model against CUDA's own kernel).
"""

from __future__ import annotations

import pytest
import torch

pytestmark = [pytest.mark.routing, pytest.mark.usefixtures("flagos")]

INTEGER = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


def cuda_histc(values: list[int], bins: int, lo: float, hi: float) -> list[int]:
    """CUDA's histc of an integer tensor: bounds truncated to 64-bit integers (not to the input's
    dtype); ``min == max`` takes the data's own range, and equal bounds widen by one; ``v`` in
    ``[min, max]`` counts in bin ``(v - min) * bins // (max - min)``, the top edge in the last."""
    low, high = int(lo), int(hi)
    if low == high and values:
        low, high = min(values), max(values)
    if low == high:
        low, high = low - 1, high + 1
    counts = [0] * bins
    for v in values:
        if low <= v <= high:
            counts[min((v - low) * bins // (high - low), bins - 1)] += 1
    return counts


def _ints(dtype: torch.dtype, n: int, low: int, high: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, (n,), generator=g).to(dtype)


CASES = {
    # (values' range, bins, min, max)
    "moe expert ids": ((0, 8), 8, 0, 7),
    "data range (min == max == 0)": ((-20, 30), 7, 0, 0),
    "values outside the bounds are ignored": ((-50, 60), 5, -10, 10),
    "fractional bounds truncate": ((0, 12), 4, 0.5, 9.7),
    "bins wider than the range": ((0, 3), 10, 0, 2),
    "bounds beyond the dtype's range": ((-100, 100), 5, -200, 300),
}


@pytest.mark.parametrize("dtype", INTEGER, ids=str)
@pytest.mark.parametrize("case", list(CASES))
def test_integer_histc_counts_as_cuda(case, dtype):
    """Each case on each integer dtype (the values' range clipped at zero for uint8)."""
    (low, high), bins, lo, hi = CASES[case]
    if dtype == torch.uint8:  # the values' range above zero; bounds may be negative
        low, high = max(low, 0), max(high, 1)
    x = _ints(dtype, 97, low, high, seed=len(case))
    got = torch.histc(x.to("flagos"), bins=bins, min=lo, max=hi)
    assert got.device.type == "flagos"
    assert got.dtype == dtype
    assert got.cpu().tolist() == cuda_histc(x.tolist(), bins, lo, hi)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
def test_integer_histc_of_equal_values_widens_the_range(dtype):
    x = torch.full((6,), 4, dtype=dtype)
    got = torch.histc(x.to("flagos"), bins=4)
    assert got.cpu().tolist() == cuda_histc(x.tolist(), 4, 0, 0) == [0, 0, 6, 0]


def test_integer_histc_of_a_strided_view():
    base = _ints(torch.int32, 60, 0, 9, seed=3).reshape(6, 10)
    view = base.to("flagos").t()[2:, ::2]
    got = torch.histc(view, bins=9, min=0, max=8)
    expected = cuda_histc(base.t()[2:, ::2].reshape(-1).tolist(), 9, 0, 8)
    assert got.cpu().tolist() == expected


def test_integer_histc_of_an_empty_tensor():
    got = torch.histc(torch.empty(0, dtype=torch.int32, device="flagos"), bins=3)
    assert got.cpu().tolist() == [0, 0, 0]
    assert got.dtype == torch.int32


def test_integer_histc_out_resizes_and_converts_like_a_copy():
    x = _ints(torch.int32, 50, 0, 5, seed=7)
    out = torch.empty(2, dtype=torch.int32, device="flagos")
    returned = torch.histc(x.to("flagos"), bins=5, min=0, max=4, out=out)
    assert returned is out
    assert out.shape == (5,)
    assert out.cpu().tolist() == cuda_histc(x.tolist(), 5, 0, 4)


def test_integer_histc_bad_arguments_raise_as_cuda():
    x = torch.arange(5, dtype=torch.int32, device="flagos")
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        torch.histc(x, bins=0)
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(x, bins=3, min=4, max=1)
    # The process stays usable.
    assert torch.histc(x, bins=5, min=0, max=4).cpu().tolist() == [1, 1, 1, 1, 1]


def test_floating_histc_still_matches_cpu():
    x = torch.randn(200, generator=torch.Generator().manual_seed(0))
    got = torch.histc(x.to("flagos"), bins=9, min=-2, max=2)
    torch.testing.assert_close(got.cpu(), torch.histc(x, bins=9, min=-2, max=2))


def _complex_half() -> tuple[torch.Tensor, torch.Tensor]:
    base = torch.tensor([1 + 1j, 0.5 - 2j, -1.5 + 0.25j, 2 - 0j], dtype=torch.complex64)
    return base.to(torch.complex32), torch.tensor([2, 1 + 1j, 0.5, -1], dtype=torch.complex64)


def _pow_as_cuda(a, b) -> torch.Tensor:
    """CUDA's complex32 pow: computed in complex<float>, rounded to complex32."""
    widen = lambda v: v.to(torch.complex64) if isinstance(v, torch.Tensor) else v  # noqa: E731
    return torch.pow(widen(a), widen(b)).to(torch.complex32)


@pytest.mark.parametrize("form", ["tensor_scalar", "tensor_tensor", "scalar_tensor"])
def test_complex_half_pow_as_cuda(form):
    x, e = _complex_half()
    args = {
        "tensor_scalar": (x, 3),
        "tensor_tensor": (x, e.to(torch.complex32)),
        "scalar_tensor": (2, x),
    }[form]
    on_flagos = tuple(a.to("flagos") if isinstance(a, torch.Tensor) else a for a in args)
    got = torch.pow(*on_flagos)
    assert got.dtype == torch.complex32 and got.device.type == "flagos"
    torch.testing.assert_close(
        got.cpu().to(torch.complex64), _pow_as_cuda(*args).to(torch.complex64)
    )


def test_complex_half_pow_out_and_in_place():
    x, _ = _complex_half()
    want = _pow_as_cuda(x, 2).to(torch.complex64)
    out = torch.empty(0, dtype=torch.complex32, device="flagos")
    assert torch.pow(x.to("flagos"), 2, out=out) is out
    torch.testing.assert_close(out.cpu().to(torch.complex64), want)
    y = x.to("flagos")
    assert y.pow_(2) is y
    torch.testing.assert_close(y.cpu().to(torch.complex64), want)
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.pow(x.to("flagos"), 2, out=torch.empty(4, dtype=torch.float16, device="flagos"))
