"""The kernel rules every native vendor's category routines share, tested through torch on the
vendor's SDK (emulated or real): one suite, each vendor naming its backend.

The rules live once in core's kit (``include/torch_fl/kit/``: ``category_operands.h``,
``reduction_shape.h``, ``write_back.h``); each test checks flagos against the CPU and that the
vendor's kernel served the call (or declined it to the counted CPU fallback, where PyTorch's error
is the CPU's to raise). A vendor's ``tests/test_kernels.py``::

    from torch_fl.native_kernel_tests import *  # noqa: F403  (the shared tests)

    @pytest.fixture
    def kernel_backend(gcu):
        return "gcu"
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

__all__ = [
    "backend_counts",
    "test_cpu_scalar_operands_cast_as_on_cpu",
    "test_empty_reductions_follow_pytorch",
    "test_inplace_results_of_a_larger_shape_are_pytorchs_error",
    "test_out_and_inplace_write_back_casts_as_pytorch",
    "test_zero_dim_reductions_follow_pytorch",
]

DEV = "flagos:0"


@pytest.fixture
def backend_counts(kernel_backend: str) -> Callable[[str], dict[str, int]]:
    """Calls per backend of one overload since the test began (``torch_fl._C.dispatch_counts``)."""
    import torch_fl

    torch_fl._C.reset_dispatch_counts()

    def served(op: str) -> dict[str, int]:
        return dict(torch_fl._C.dispatch_counts().get(op, {}))

    return served


def _close(a: torch.Tensor, b: torch.Tensor, **kw) -> None:
    torch.testing.assert_close(a.cpu(), b, equal_nan=True, **kw)


def test_zero_dim_reductions_follow_pytorch(kernel_backend, backend_counts):
    """A 0-dim input reduces its one element over no dim, dim 0 or -1 (keepdim or not), and any
    other dim raises PyTorch's IndexError (kit/reduction_shape.h)."""
    x = torch.tensor(2.5)
    a = x.to(DEV)
    _close(a.sum(), x.sum())
    for dim in (0, -1, [0], []):
        for keepdim in (False, True):
            _close(a.sum(dim, keepdim=keepdim), x.sum(dim, keepdim=keepdim))
            _close(a.mean(dim, keepdim=keepdim), x.mean(dim, keepdim=keepdim))
            _close(a.amax(dim, keepdim=keepdim), x.amax(dim, keepdim=keepdim))
    assert backend_counts("aten::sum.dim_IntList") == {kernel_backend: 8}
    assert backend_counts("aten::amax") == {kernel_backend: 8}
    for dim in (1, -2, [0, 1]):
        with pytest.raises(IndexError, match="Dimension out of range"):
            x.sum(dim)
        with pytest.raises(IndexError, match="Dimension out of range"):
            a.sum(dim)


def test_empty_reductions_follow_pytorch(kernel_backend, backend_counts):
    """A sum over no elements is 0 and a mean NaN, computed by the vendor's kernel
    (kit::empty_sum); amax / amin of nothing is PyTorch's error, raised by the CPU the call is
    declined to (kit::need_elements)."""
    x = torch.empty(0, 3)
    a = x.to(DEV)
    _close(a.sum(), x.sum())
    _close(a.sum(0), x.sum(0))
    _close(a.mean(0), x.mean(0))
    _close(a.sum(1, keepdim=True), x.sum(1, keepdim=True))
    assert backend_counts("aten::sum.dim_IntList").get(kernel_backend, 0) >= 2
    with pytest.raises(RuntimeError) as cpu:
        x.amax()
    with pytest.raises(RuntimeError) as dev:
        a.amax()
    assert str(cpu.value) in str(dev.value)
    _close(a.amax(1), x.amax(1))  # an empty result is no error


def test_out_and_inplace_write_back_casts_as_pytorch(kernel_backend, backend_counts):
    """A result goes into an out= / in-place target of another dtype only where PyTorch allows
    the cast, and an in-place target must already have the result's shape (kit/write_back.h)."""
    x = torch.randn(3, 4)
    i = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    a, j = x.to(DEV), i.to(DEV)
    fout = torch.empty(0, device=DEV)
    torch.add(j, j, out=fout)  # an int32 result cast into a float32 out=, resized
    assert fout.dtype == torch.float32 and fout.shape == (3, 4)
    _close(fout, (i + i).float())
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Int"):
        torch.add(a, a, out=torch.empty(3, 4, dtype=torch.int32, device=DEV))
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Int"):
        j.clone().add_(a)
    with pytest.raises(RuntimeError, match=r"output with shape \[3, 1\] doesn't match"):
        a[:, :1].clone().add_(a)
    assert backend_counts("aten::add.out").get(kernel_backend, 0) >= 1


def test_inplace_results_of_a_larger_shape_are_pytorchs_error(kernel_backend, backend_counts):
    """An in-place op whose operands broadcast beyond self raises PyTorch's shape error, for every
    category (the result takes the broadcast shape; kit/write_back.h refuses it), and self is
    left as it was."""
    x, big = torch.randn(3, 1), torch.randn(3, 4)
    mask = torch.rand(3, 4) > 0.5
    calls = {
        "mul_": lambda s, b, m: s.mul_(b),
        "masked_fill_": lambda s, b, m: s.masked_fill_(m, 1.0),
        "addcmul_": lambda s, b, m: s.addcmul_(b, b),
    }
    for name, call in calls.items():
        with pytest.raises(RuntimeError) as cpu:
            call(x.clone(), big, mask)
        a = x.to(DEV)
        with pytest.raises(RuntimeError) as dev:
            call(a, big.to(DEV), mask.to(DEV))
        assert "doesn't match the broadcast shape" in str(cpu.value), name
        assert "doesn't match the broadcast shape" in str(dev.value), name
        _close(a, x)


def test_cpu_scalar_operands_cast_as_on_cpu(kernel_backend, backend_counts):
    """A CPU 0-dim tensor beside flagos ones reaches the kernel in the compute dtype as the CPU
    casts it (an out-of-range value wraps, it is no error), whichever way the vendor moves it
    (kit::on_device, kit::on_device_filled)."""
    u = torch.tensor([1, 2, 250], dtype=torch.uint8)
    _close(u.to(DEV) + torch.tensor(300), u + torch.tensor(300))
    x = torch.randn(4)
    _close(x.to(DEV) * torch.tensor(2.5), x * torch.tensor(2.5))
    _close(x.to(DEV) + torch.tensor(3), x + torch.tensor(3))
    assert backend_counts("aten::mul.Tensor").get(kernel_backend, 0) >= 1
