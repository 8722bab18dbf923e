"""Generated muDNN kernels: CPU-identical results, views passed as they are (muDNN honours
strides: no copies), dtypes a mode lacks served by the counted CPU fallback, errors that name the
muDNN operator, the aten overload, the device, the vendor and the status."""

from __future__ import annotations

import pytest
import torch
from torch_fl.native_kernel_tests import *  # noqa: F403  (the kit's rules, collected here)

pytestmark = pytest.mark.musa

DEV = "flagos:0"


@pytest.fixture
def kernel_backend(musa):
    return "musa"


@pytest.fixture
def counts(backend_counts):
    return backend_counts


def close(a, b, **kw):
    torch.testing.assert_close(a.cpu(), b, **kw)


def test_the_ops_table_is_generated_against_the_sdk(musa):
    from torch_fl_musa import kernels_manifest

    m = kernels_manifest()
    gen = m["generated"]
    assert gen["aten::add.Tensor"] == "Binary::ADD"
    assert gen["aten::addmm"] == "MatMul::RunWithBiasAdd"
    assert gen["aten::_log_softmax_backward_data"] == "Softmax::RunBwd"
    assert gen["aten::sum.dim_IntList"] == "Reduce::ADD"
    assert m["dtypes"]["aten::mm"] == ["float32", "float16", "bfloat16"]
    assert not m["skipped"], m["skipped"]


UNARY = ["abs", "neg", "relu", "floor", "ceil", "sqrt", "rsqrt", "exp", "log", "sin", "cos"]
UNARY += ["tanh", "sigmoid", "reciprocal", "erf", "nn.functional.silu", "nn.functional.gelu"]


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_unary_matches_cpu_on_views(counts, name, dtype):
    x = torch.rand(7, 9, dtype=dtype) * 4 + 0.25
    fn = eval(f"torch.{name}")  # noqa: S307 -- names from the list above
    a = x.to(DEV)
    tol = {"atol": 1e-5, "rtol": 1.3e-6} if dtype == torch.float32 else {}
    close(fn(a.t()), fn(x.t()), **tol)  # a transposed view
    close(fn(a[:, ::2]), fn(x[:, ::2]), **tol)  # a strided slice


def test_pow_with_a_scalar_exponent(counts):
    x = torch.rand(5, 3) + 0.5
    a = x.to(DEV)
    close(a**2, x**2)
    close(torch.pow(a.t(), 0.5), torch.pow(x.t(), 0.5))
    i = torch.arange(6, dtype=torch.int32)
    close(i.to(DEV) ** 1.5, i**1.5)  # an integer base: the route's int32 rule sends it to the CPU
    assert counts("aten::pow.Tensor_Scalar") == {"musa": 2, "cpu": 1}


def test_binary_broadcasts_through_zero_strides_without_copies(emu, counts):
    x, y = torch.randn(6, 1, 5), torch.randn(4, 1)
    a, b = x.to(DEV), y.to(DEV)
    torch.flagos.synchronize()
    copies = emu.call_count("musaMemcpyAsync") + emu.call_count("musaMemcpy")
    r = torch.add(a, b, alpha=3)
    s = a.transpose(0, 2) * b.t().unsqueeze(-1)
    torch.flagos.synchronize()
    assert emu.call_count("musaMemcpyAsync") + emu.call_count("musaMemcpy") == copies
    close(r, torch.add(x, y, alpha=3))
    close(s, x.transpose(0, 2) * y.t().unsqueeze(-1))
    assert counts("aten::add.Tensor") == {"musa": 1}
    assert counts("aten::mul.Tensor") == {"musa": 1}


def test_scalars_comparisons_and_promotion(counts):
    x = torch.randint(-5, 5, (4, 6), dtype=torch.int32)
    a = x.to(DEV)
    assert torch.equal((a + 2).cpu(), x + 2)
    assert torch.equal((a * 2.5).cpu(), x * 2.5)  # int * float scalar: float result
    assert torch.equal((a / 2).cpu(), x / 2)  # true division of ints: float32
    assert torch.equal((a >= 0).cpu(), x >= 0)
    assert torch.equal(torch.eq(a, a.t().t()).cpu(), torch.ones(4, 6, dtype=torch.bool))
    assert torch.equal(torch.maximum(a, -a).cpu(), torch.maximum(x, -x))


def test_in_place_and_out_forms_write_their_targets(counts):
    x, y = torch.randn(5, 4), torch.randn(5, 4)
    a, b = x.to(DEV), y.to(DEV)
    v = a.t()  # in-place through a strided view
    v.mul_(2)
    close(a, x * 2)
    out = torch.empty(3, device=DEV)
    with pytest.warns(UserWarning, match="resized"):  # PyTorch's warning, as on the CPU
        torch.sub(a, b, alpha=0.5, out=out)
    close(out, x * 2 - y * 0.5)
    a.addcmul_(b, b, value=-1)
    close(a, x * 2 - y * y)
    a.lerp_(b, 0.25)
    close(a, torch.lerp(x * 2 - y * y, y, 0.25))
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.ones(3, dtype=torch.int32, device=DEV).sqrt_()


def test_where_reductions_and_keepdim(counts):
    x = torch.randn(4, 5, 6)
    a = x.to(DEV)
    close(torch.where(a > 0, a, a * 0.1), torch.where(x > 0, x, x * 0.1))
    close(a.sum(), x.sum(), atol=1e-4, rtol=1e-5)
    close(a.sum((0, 2), keepdim=True), x.sum((0, 2), keepdim=True), atol=1e-5, rtol=1e-5)
    close(a.mean(-1), x.mean(-1))
    close(a.transpose(0, 2).amax(1), x.transpose(0, 2).amax(1))
    close(a.amin((0, 1)), x.amin((0, 1)))
    assert torch.equal((a > 0).all(-1).cpu(), (x > 0).all(-1))
    assert torch.equal((a > 0).any().cpu(), (x > 0).any())
    i = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    s = i.to(DEV).sum(0)
    assert s.dtype == torch.int64 and torch.equal(s.cpu(), i.sum(0))
    e = torch.empty(0, 3, device=DEV)
    assert torch.equal(e.sum(0).cpu(), torch.zeros(3))
    assert counts("aten::sum.dim_IntList")["musa"] >= 2


def test_matmul_family_with_transposed_operands(counts):
    a, b, c = torch.randn(8, 6), torch.randn(5, 6), torch.randn(5)
    da, db, dc = a.to(DEV), b.to(DEV), c.to(DEV)
    close(da @ db.t(), a @ b.t(), atol=1e-5, rtol=1e-5)
    close(
        torch.addmm(dc, da, db.t(), beta=0.5, alpha=2),
        torch.addmm(c, a, b.t(), beta=0.5, alpha=2),
        atol=1e-5,
        rtol=1e-5,
    )
    nan_bias = torch.full((5,), float("nan"), device=DEV)
    close(torch.addmm(nan_bias, da, db.t(), beta=0), a @ b.t(), atol=1e-5, rtol=1e-5)
    x, y = torch.randn(3, 4, 6), torch.randn(3, 5, 6)
    close(
        torch.bmm(x.to(DEV), y.to(DEV).transpose(1, 2)),
        torch.bmm(x, y.transpose(1, 2)),
        atol=1e-5,
        rtol=1e-5,
    )
    lin = torch.nn.Linear(6, 5)
    expected = lin(a)
    close(lin.to(DEV)(da), expected.detach(), atol=1e-5, rtol=1e-5)
    assert counts("aten::addmm")["musa"] >= 2
    assert counts("aten::mm")["musa"] >= 1


def test_softmax_and_its_backward(counts):
    x = torch.randn(4, 7, requires_grad=True)
    a = x.detach().to(DEV).requires_grad_()
    for fn in (torch.softmax, torch.log_softmax):
        g = torch.randn(4, 7)
        close(fn(a, 1), fn(x, 1))
        (ga,) = torch.autograd.grad(fn(a, 0), a, g.to(DEV))
        (gx,) = torch.autograd.grad(fn(x, 0), x, g)
        close(ga, gx, atol=1e-6, rtol=1e-5)
    assert counts("aten::_softmax_backward_data") == {"musa": 1}
    assert counts("aten::_log_softmax_backward_data") == {"musa": 1}


def test_fills_and_their_overflow_error(counts):
    t = torch.empty(3, 4, device=DEV)
    t.t().fill_(2.5)
    assert torch.equal(t.cpu(), torch.full((3, 4), 2.5))
    big = torch.empty(2, dtype=torch.int64, device=DEV).fill_(2**62 + 1)
    assert big.cpu().tolist() == [2**62 + 1] * 2  # exact, not through a double
    t.zero_()
    assert torch.equal(t.cpu(), torch.zeros(3, 4))
    with pytest.raises(RuntimeError, match="overflow"):
        torch.empty(2, dtype=torch.uint8, device=DEV).fill_(300)


def test_dtypes_a_mode_lacks_go_to_the_counted_cpu_fallback(counts):
    from torch_fl.testing import fallback_counts

    x = torch.randn(3, 3, dtype=torch.float64)
    with fallback_counts() as fell:
        close(x.to(DEV).exp(), x.exp())
        close(x.to(DEV) @ x.to(DEV), x @ x)
    assert counts("aten::exp").get("musa", 0) == 0
    assert fell, "float64 must reach the CPU through a counted route"


def test_sums_into_dtypes_reduce_lacks_are_answered_on_the_cpu():
    """Reduce::ADD and MEAN compute in floating types and int32/int64: sum(dtype=int8) used to
    hand muDNN an INT8 reduction, which it refuses (NOT_SUPPORTED); the CPU answers it now."""
    from torch_fl.testing import fallback_counts

    x = torch.arange(-6, 6, dtype=torch.int8)
    for dtype in (torch.int8, torch.uint8, torch.int16, torch.bool):
        with fallback_counts() as fell:
            got = x.to(DEV).sum(dtype=dtype)
        assert torch.equal(got.cpu(), x.sum(dtype=dtype)), dtype
        assert fell, dtype
    assert torch.equal(x.to(DEV).sum().cpu(), x.sum())  # int64: on the device


def test_a_failing_mudnn_call_names_operator_overload_device_vendor_status(emu, musa):
    a = torch.randn(4, device="flagos:1")
    with emu.fault("Binary::Run", "EXECUTION_FAILED"):
        with pytest.raises(RuntimeError) as info:
            torch.mul(a, a)
    msg = str(info.value)
    for part in ("Binary::MUL", "aten::mul.Tensor", "flagos:1", "vendor musa", "EXECUTION_FAILED"):
        assert part in msg, msg
    close(a * 1, a.cpu())  # usable afterwards


def test_relu_backward_and_mse_loss_stay_on_the_device(counts):
    x = torch.randn(6, 5, requires_grad=True)
    y = torch.randn(6, 5)
    a = x.detach().to(DEV).requires_grad_()
    for reduction in ("mean", "sum", "none"):
        loss_fn = torch.nn.MSELoss(reduction=reduction)
        ref = loss_fn(torch.relu(x), y)
        got = loss_fn(torch.relu(a), y.to(DEV))
        close(got, ref.detach(), atol=1e-6, rtol=1e-5)
        g = torch.ones_like(ref)
        (gx,) = torch.autograd.grad(ref, x, g)
        (ga,) = torch.autograd.grad(got, a, g.to(DEV))
        close(ga, gx, atol=1e-6, rtol=1e-5)
    assert counts("aten::threshold_backward") == {"musa": 3}
    assert counts("aten::mse_loss") == {"musa": 3}
    assert counts("aten::mse_loss_backward") == {"musa": 3}
    # Two dtypes: declined by the composed kernel, so the CPU kernel promotes as PyTorch does.
    mixed = torch.nn.functional.mse_loss(a.detach().double(), y.to(DEV))
    close(mixed, torch.nn.functional.mse_loss(x.detach().double(), y))


def test_cat_of_views_and_its_special_cases(counts):
    a, b = torch.randn(3, 4), torch.randn(3, 2)
    da, db = a.to(DEV), b.to(DEV)
    close(torch.cat([da, db.t().t()], 1), torch.cat([a, b], 1))
    close(torch.cat([da.t(), db.t()], 0), torch.cat([a.t(), b.t()], 0))  # strided inputs
    i = torch.arange(6, dtype=torch.int64).reshape(2, 3)
    assert torch.equal(torch.cat([i.to(DEV), i.to(DEV)]).cpu(), torch.cat([i, i]))
    out = torch.empty(0, device=DEV)
    torch.cat([da, da], out=out)
    close(out, torch.cat([a, a]))
    assert counts("aten::cat") == {"musa": 3} and counts("aten::cat.out") == {"musa": 1}
    # PyTorch's special cases are served by the CPU, with its results and errors.
    close(torch.cat([da, torch.empty(0, device=DEV)]), torch.cat([a, torch.empty(0)]))
    close(torch.cat([da, db.double()], 1), torch.cat([a, b.double()], 1))
    with pytest.raises(RuntimeError, match="Sizes of tensors must match"):
        torch.cat([da, db], 0)
    with (
        pytest.warns(UserWarning, match="resized"),
        pytest.raises(RuntimeError, match="unsupported"),
    ):
        torch.cat([da, da], out=da)  # the CPU resizes out (with its warning), then raises


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.int8]
)
def test_cumsum_matches_cpu_on_views_in_every_form(counts, dtype):
    x = (torch.randn(5, 6) * 4).to(dtype)
    a = x.to(DEV)
    tol = {} if dtype != torch.float16 else {"atol": 1e-2, "rtol": 1e-2}
    for dim in (0, 1, -1):
        close(a.cumsum(dim), x.cumsum(dim), **tol)
    close(a.t().cumsum(1), x.t().cumsum(1), **tol)  # a transposed view
    close(a[:, ::2].cumsum(-1), x[:, ::2].cumsum(-1), **tol)  # a strided slice
    out = torch.empty(0, dtype=x.cumsum(0).dtype, device=DEV)
    torch.cumsum(a, 0, out=out)
    close(out, x.cumsum(0), **tol)
    assert out.dtype == x.cumsum(0).dtype  # integers scan into int64
    assert counts("aten::cumsum") == {"musa": 5}
    assert counts("aten::cumsum.out") == {"musa": 1}
    if dtype != torch.int8:
        y, b = x.clone(), a.clone()
        y.cumsum_(1)
        b.cumsum_(1)
        close(b, y, **tol)
        assert counts("aten::cumsum_") == {"musa": 1}


def test_cumsum_dtype_empty_scalar_and_pytorchs_errors(counts):
    x = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    a = x.to(DEV)
    close(a.cumsum(1, dtype=torch.float32), x.cumsum(1, dtype=torch.float32))
    b = torch.tensor([True, False, True, True])
    close(b.to(DEV).cumsum(0), b.cumsum(0))  # bool scans into int64
    close(torch.empty(0, 3, device=DEV).cumsum(0), torch.empty(0, 3).cumsum(0))
    s = torch.tensor(2.5)
    close(s.to(DEV).cumsum(0), s.cumsum(0))
    close(s.to(DEV).cumsum(-1), s.cumsum(-1))
    assert counts("aten::cumsum") == {"musa": 5}
    # Declined: dtype= other than out='s is PyTorch's error, int8 result dtype has no Cum.
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype"):
        torch.cumsum(
            a, 0, dtype=torch.float32, out=torch.empty(3, 4, dtype=torch.int64, device=DEV)
        )
    i8 = torch.arange(6, dtype=torch.int8)
    close(i8.to(DEV).cumsum(0, dtype=torch.int8), i8.cumsum(0, dtype=torch.int8))
    with pytest.raises(IndexError, match="Dimension out of range"):
        a.cumsum(2)


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.bool]
)
def test_stack_matches_cpu_on_views(counts, dtype):
    xs = [(torch.randn(3, 4) * 4).to(dtype) for _ in range(3)]
    ds = [x.to(DEV) for x in xs]
    for dim in (0, 1, 2, -1, -3):
        assert torch.equal(torch.stack(ds, dim).cpu(), torch.stack(xs, dim))
    views = [d.t() for d in ds]  # transposed views
    assert torch.equal(torch.stack(views, 1).cpu(), torch.stack([x.t() for x in xs], 1))
    out = torch.empty(0, dtype=dtype, device=DEV)
    torch.stack(ds, -1, out=out)
    assert torch.equal(out.cpu(), torch.stack(xs, -1))
    assert counts("aten::stack") == {"musa": 6} and counts("aten::stack.out") == {"musa": 1}


def test_stack_empty_scalars_and_pytorchs_errors(counts):
    e = torch.empty(0, 2)
    assert torch.stack([e.to(DEV), e.to(DEV)], 1).shape == torch.stack([e, e], 1).shape
    s = [torch.tensor(1.5), torch.tensor(-2.0)]
    close(torch.stack([t.to(DEV) for t in s]), torch.stack(s))
    assert counts("aten::stack") == {"musa": 2}
    a, b = torch.randn(3, 4, device=DEV), torch.randn(4, 3, device=DEV)
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        torch.stack([a, b])
    with pytest.raises(RuntimeError, match="stack expects a non-empty TensorList"):
        torch.stack([])
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.stack([a, a], 3)


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64]
)
def test_max_dim_values_and_first_indices_match_cpu(counts, dtype):
    x = torch.randint(-3, 3, (4, 5, 6)).to(dtype)  # ties: the first maximal index
    a = x.to(DEV)
    for dim in (0, 1, 2, -1):
        for keepdim in (False, True):
            v, i = a.max(dim, keepdim=keepdim)
            ev, ei = x.max(dim, keepdim=keepdim)
            assert torch.equal(v.cpu(), ev) and torch.equal(i.cpu(), ei)
            assert i.dtype == torch.int64
    v, i = a.transpose(0, 2)[:, ::2].max(1)  # a strided view
    ev, ei = x.transpose(0, 2)[:, ::2].max(1)
    assert torch.equal(v.cpu(), ev) and torch.equal(i.cpu(), ei)
    ov, oi = torch.empty(0, dtype=dtype, device=DEV), torch.empty(0, dtype=torch.long, device=DEV)
    torch.max(a, -2, out=(ov, oi))
    ev, ei = x.max(-2)
    assert torch.equal(ov.cpu(), ev) and torch.equal(oi.cpu(), ei)
    assert counts("aten::max.dim") == {"musa": 9} and counts("aten::max.dim_max") == {"musa": 1}


def test_max_dim_nan_and_declines_to_pytorchs_errors(counts):
    x = torch.tensor([[1.0, float("nan"), 3.0, float("nan")], [2.0, 5.0, 5.0, 0.0]])
    v, i = x.to(DEV).max(1)
    ev, ei = x.max(1)
    torch.testing.assert_close(v.cpu(), ev, equal_nan=True)
    assert torch.equal(i.cpu(), ei)
    assert counts("aten::max.dim") == {"musa": 1}
    s = torch.tensor(4.0)
    v, i = s.to(DEV).max(0)  # 0-dim: declined, the CPU answers
    assert v.item() == 4.0 and i.item() == 0
    with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
        torch.empty(0, 3, device=DEV).max(0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.to(DEV).max(2)
    assert counts("aten::max.dim")["cpu"] == 2  # the declined 0-dim and empty inputs
