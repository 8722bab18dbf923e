"""Generated ACLNN kernels: CPU-matching results on strided, offset, rank-0 and broadcast inputs,
out= and in-place forms, declines to the counted CPU fallback, errors that name everything, tensor
lists over ACLNN's 50, and workspaces that outlive a freed cache."""

from __future__ import annotations

import pytest
import torch
from torch_fl.native_kernel_tests import *  # noqa: F403  (the kit's rules, collected here)

pytestmark = pytest.mark.ascend

DEV = "flagos:0"
TOL = {
    torch.float32: {"rtol": 1.3e-6, "atol": 1e-5},
    torch.float16: {"rtol": 1e-3, "atol": 1e-3},
    torch.bfloat16: {"rtol": 1.6e-2, "atol": 1e-2},
}


@pytest.fixture
def kernel_backend(ascend):
    return "ascend"


@pytest.fixture
def counts(backend_counts):
    return backend_counts


def close(a, b, dtype=torch.float32):
    torch.testing.assert_close(a.cpu(), b, **TOL.get(dtype, {}))


def test_manifest_covers_every_category(ascend):
    from torch_fl_ascend import kernels_manifest

    generated = kernels_manifest()["generated"]
    for op in (
        "aten::abs",
        "aten::add.Tensor",
        "aten::add_.Scalar",
        "aten::mul.out",
        "aten::eq.Scalar",
        "aten::sum.dim_IntList",
        "aten::max.dim",
        "aten::mm",
        "aten::addmm_",
        "aten::_softmax",
        "aten::native_layer_norm_backward",
        "aten::gelu_backward",
        "aten::embedding_dense_backward",
        "aten::scatter_add",
        "aten::cat",
        "aten::stack",
        "aten::where.self",
        "aten::fill_.Scalar",
        "aten::arange.start_out",
        "aten::convolution_backward",
        "aten::_amp_update_scale_",
        "aten::cumsum",
        "aten::mse_loss",
        "aten::mse_loss_backward",
    ):
        assert op in generated, op
    assert generated["aten::gelu"] == "aclnnGeluV2"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_float_ops_match_cpu_per_dtype(counts, dtype):
    x = torch.randn(6, 5).to(dtype)
    y = torch.randn(6, 5).to(dtype)
    d, e = x.to(DEV), y.to(DEV)
    close(torch.exp(d), torch.exp(x), dtype)
    close(torch.add(d, e, alpha=2), torch.add(x, y, alpha=2), dtype)
    close(d * e, x * y, dtype)
    close(torch.nn.functional.gelu(d), torch.nn.functional.gelu(x), dtype)
    close(torch.nn.functional.gelu(d, approximate="tanh"), torch.nn.functional.gelu(x, approximate="tanh"), dtype)  # fmt: skip
    close(torch.softmax(d, 1), torch.softmax(x, 1), dtype)
    close(d.sum(0), x.sum(0), dtype)
    close(torch.mm(d, e.t()), torch.mm(x, y.t()), dtype)
    assert counts("aten::exp") == {"ascend": 1}
    assert counts("aten::mm") == {"ascend": 1}


def test_strided_and_offset_inputs_need_no_copies(counts):
    base = torch.randn(8, 10)
    d = base.to(DEV)
    views = [
        (d.t(), base.t()),
        (d[1:, 2::3], base[1:, 2::3]),  # storage offset and a step
        (d[3], base[3]),
        (d.expand(2, 8, 10)[1], base),
    ]
    for dv, cv in views:
        close(torch.neg(dv), torch.neg(cv))
        close(dv * 2.5, cv * 2.5)
        close(torch.sigmoid(dv), torch.sigmoid(cv))
    close(torch.mm(d.t()[:, :4], d[:4, :5]), base.t()[:, :4] @ base[:4, :5])
    assert "cpu" not in counts("aten::neg")


def test_rank0_and_broadcast(counts):
    a, b = torch.tensor(-2.5), torch.randn(4, 1)
    da, db = a.to(DEV), b.to(DEV)
    close(torch.abs(da), torch.abs(a))
    close(da + db, a + b)
    close(db + torch.randn(3).to(DEV) * 0, b + torch.zeros(3))
    close(torch.where(db > 0, da, db), torch.where(b > 0, a, b))
    close(da.sum(), a.sum())
    assert counts("aten::abs") == {"ascend": 1}


def test_out_and_inplace_forms(counts):
    x, y = torch.randn(5, 4), torch.randn(5, 4)
    d, e = x.to(DEV), y.to(DEV)
    out = torch.empty(0, device=DEV)
    torch.mul(d, e, out=out)
    close(out, x * y)
    assert out.shape == (5, 4)
    t = d.clone()
    t.add_(e, alpha=3)
    close(t, x + 3 * y)
    v = d.clone()
    v[:, 1].mul_(4.0)  # in place on a strided view
    ref = x.clone()
    ref[:, 1].mul_(4.0)
    close(v, ref)
    s = d.clone()
    s.sigmoid_()
    close(s, x.sigmoid())
    assert counts("aten::mul.out") == {"ascend": 1}
    assert counts("aten::add_.Tensor") == {"ascend": 1}


def test_declined_dtype_falls_back_and_is_counted(counts):
    """int32 first operand routes to ascend; the compute dtype is float64, which ACLNN's Add lacks:
    the kernel declines before any effect and core's CPU fallback serves the call, counted."""
    a = torch.arange(6, dtype=torch.int32)
    b = torch.linspace(0, 1, 6, dtype=torch.float64)
    r = torch.add(a.to(DEV), b.to(DEV))
    assert r.dtype == torch.float64
    torch.testing.assert_close(r.cpu(), a + b)
    assert counts("aten::add.Tensor") == {"ascend": 1, "cpu": 1}


def test_float64_never_reaches_the_kernel(counts):
    x = torch.randn(4, dtype=torch.float64)
    torch.testing.assert_close(torch.exp(x.to(DEV)).cpu(), torch.exp(x))
    assert counts("aten::exp") == {"cpu": 1}  # the route table's exp[float64, ...] rule


def test_errors_name_function_overload_device_vendor_status_and_message(emu, ascend):
    a = torch.ones(3, device="flagos:1")
    with emu.fault("aclnnAbsGetWorkspaceSize", 161002):
        with pytest.raises(RuntimeError) as info:
            torch.abs(a)
    msg = str(info.value)
    for part in (
        "aclnnAbsGetWorkspaceSize",
        "aten::abs",
        "flagos:1",
        "ascend",
        "161002",
        "ACLNN_ERR_PARAM_INVALID",
    ):
        assert part in msg, msg
    with emu.fault("aclnnExp", 361001):
        with pytest.raises(RuntimeError) as info:
            torch.exp(a)
    msg = str(info.value)
    for part in (
        "aclnnExp",
        "aten::exp",
        "flagos:1",
        "ascend",
        "361001",
        "ACLNN_ERR_RUNTIME_ERROR",
    ):
        assert part in msg, msg
    assert torch.equal(torch.abs(a).cpu(), torch.ones(3))  # nothing left armed or broken


def test_cat_and_stack_of_60_tensors(emu, counts):
    """ACLNN lists take at most 50 tensors: longer lists are joined in stages."""
    xs = [torch.randn(2, 3) for _ in range(60)]
    ds = [x.to(DEV) for x in xs]
    before = emu.call_count("aclnnCat")
    close(torch.cat(ds, 1), torch.cat(xs, 1))
    assert emu.call_count("aclnnCat") - before == 3  # 50 + 10, then the 2 parts
    close(torch.stack(ds, 0), torch.stack(xs, 0))
    close(torch.cat(ds[::7], 0), torch.cat(xs[::7], 0))
    assert counts("aten::cat") == {"ascend": 2}


def test_reductions_norms_indexing_and_conv(ascend):
    x = torch.randn(4, 6)
    d = x.to(DEV)
    v, i = d.max(1)
    cv, ci = x.max(1)
    close(v, cv)
    assert torch.equal(i.cpu(), ci)
    assert torch.equal(d.argmax().cpu(), x.argmax())
    close(d.mean((0, 1)), x.mean((0, 1)))
    w, b = torch.randn(6), torch.randn(6)
    out, mean, rstd = torch.native_layer_norm(d, [6], w.to(DEV), b.to(DEV), 1e-5)
    ref = torch.native_layer_norm(x, [6], w, b, 1e-5)
    close(out, ref[0])
    close(mean, ref[1])
    idx = torch.tensor([3, 0, 2])
    close(d.index_select(0, idx.to(DEV)), x.index_select(0, idx))
    emb = torch.nn.functional.embedding(idx.to(DEV), d)
    close(emb, torch.nn.functional.embedding(idx, x))
    g = torch.tensor([[0, 1], [2, 3], [1, 1], [5, 0]])
    close(d.gather(1, g.to(DEV)), x.gather(1, g))
    close(
        torch.zeros(4, 6, device=DEV).scatter_add(1, g.to(DEV), d[:, :2]),
        torch.zeros(4, 6).scatter_add(1, g, x[:, :2]),
    )
    img, k = torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3)
    close(
        torch.nn.functional.conv2d(img.to(DEV), k.to(DEV), padding=1),
        torch.nn.functional.conv2d(img, k, padding=1),
    )
    r = torch.empty(0, device=DEV, dtype=torch.int32)
    torch.arange(2, 11, 3, out=r)
    assert torch.equal(r.cpu(), torch.arange(2, 11, 3, dtype=torch.int32))
    z = d.clone()
    z.zero_()
    assert torch.equal(z.cpu(), torch.zeros(4, 6))
    z.fill_(1.5)
    assert torch.equal(z.cpu(), torch.full((4, 6), 1.5))


def test_autograd_through_native_backward_kernels(counts):
    x = torch.randn(3, 8, requires_grad=True)
    lin = torch.nn.Linear(8, 4)
    ln = torch.nn.LayerNorm(4)
    ref = ln(torch.nn.functional.gelu(lin(x))).softmax(-1).sum()
    ref.backward()
    xd = x.detach().to(DEV).requires_grad_()
    lin_d = torch.nn.Linear(8, 4).to(DEV)
    lin_d.load_state_dict(lin.state_dict())
    ln_d = torch.nn.LayerNorm(4).to(DEV)
    out = ln_d(torch.nn.functional.gelu(lin_d(xd))).softmax(-1).sum()
    out.backward()
    close(xd.grad, x.grad)
    close(lin_d.weight.grad, lin.weight.grad)
    assert counts("aten::native_layer_norm_backward") == {"ascend": 1}
    assert counts("aten::gelu_backward") == {"ascend": 1}


def test_amp_kernels(ascend):
    grads = [torch.randn(4).to(DEV) for _ in range(55)]
    found = torch.zeros(1, device=DEV)
    inv = torch.full((1,), 0.5, device=DEV)
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found, inv)
    assert found.item() == 0.0
    grads[53][1] = float("inf")
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found, inv)
    assert found.item() == 1.0
    scale = torch.full((1,), 8.0, device=DEV)
    tracker = torch.zeros(1, dtype=torch.int32, device=DEV)
    torch._amp_update_scale_(scale, tracker, found, 2.0, 0.5, 3)
    assert scale.item() == 4.0 and tracker.item() == 0


def test_workspaces_and_temporaries_outlive_an_emptied_cache(emu, ascend):
    """Blocks dropped right after their op is queued (each mm's workspace, and the results
    themselves) must not be aclrtFree'd (here: by empty_cache) before the stream passes the ops
    that use them: the emulator counts such a free as a contract violation and fails the op."""
    emu.clear_faults()
    big = torch.randn(512, 512).to(DEV)
    before = torch.flagos.memory_allocated()
    sums = []
    for _ in range(5):
        r = torch.mm(big, big)  # a workspace per call; the stream is still busy
        sums.append(r.sum(0))  # queued behind the mm, reads r
        del r
        torch.flagos.empty_cache()
    torch.flagos.synchronize()
    assert emu.violation_count() == 0, emu.last_violation()
    ref = big.cpu() @ big.cpu()
    close(sums[-1], ref.sum(0), torch.float16)  # loose: 512-term float32 sums
    del sums
    # Nothing is held past its tensors: workspaces are ordinary stream-ordered temporaries.
    assert torch.flagos.memory_allocated() == before


_IDX = [[0, 1], [2, 3], [4, 5], [0, 2]]
CASES = {
    "masked_fill": lambda t: t.masked_fill(t > 0, 2.0),
    "masked_fill_": lambda t: t.clone().masked_fill_(t > 0, -1.0),
    "where_scalar": lambda t: torch.where(t > 0, t, 0.0),
    "pow_scalar": lambda t: t.abs().pow(2.5),
    "pow_tensor": lambda t: t.abs().pow(t),
    "eq_inplace": lambda t: t.clone().eq_(0.5),
    "lt_tensor": lambda t: t < t.flip(0),
    "amin": lambda t: t.amin(1, keepdim=True),
    "all": lambda t: (t > -10).all(),
    "any_dim": lambda t: (t > 1).any(1),
    "argmin_dim": lambda t: t.argmin(1, keepdim=True),
    "min_dim": lambda t: t.min(0).values,
    "bmm": lambda t: torch.bmm(t.reshape(2, 2, 6), t.reshape(2, 6, 2)),
    "addmm_": lambda t: torch.ones(4, 4, device=t.device).addmm_(t, t.t(), beta=0.5, alpha=2),
    "log_softmax_backward": lambda t: torch.ops.aten._log_softmax_backward_data(
        t, t.log_softmax(1), 1, t.dtype
    ),
    "softmax_backward": lambda t: torch.ops.aten._softmax_backward_data(
        t, t.softmax(1), 1, t.dtype
    ),
    "scatter": lambda t: torch.zeros(4, 6, device=t.device).scatter(
        1, torch.tensor(_IDX, device=t.device), t[:, :2]
    ),
    "scatter_reduce_add": lambda t: torch.ones(4, 6, device=t.device).scatter(
        1, torch.tensor(_IDX, device=t.device), t[:, :2], reduce="add"
    ),
    "embedding_backward": lambda t: torch.ops.aten.embedding_dense_backward(
        t[:3], torch.tensor([1, 0, 1], device=t.device), 4, -1, False
    ),
    "threshold_backward": lambda t: torch.ops.aten.threshold_backward(t, t.flip(1), 0.0),
    "tanh_backward": lambda t: torch.ops.aten.tanh_backward(t, t.tanh()),
    "sigmoid_backward": lambda t: torch.ops.aten.sigmoid_backward(t, t.sigmoid()),
    "logical_not": lambda t: torch.logical_not(t > 0),
    "div_scalar": lambda t: t / 3,
    "sub_scalar": lambda t: t - 3,
    "maximum": lambda t: torch.maximum(t, t.flip(0)),
    "int32_sum": lambda t: (t * 10).to(torch.int32).sum(1),
    "mean_keepdim": lambda t: t.mean(1, keepdim=True),
    "rsqrt": lambda t: t.abs().rsqrt(),
    "conv_transpose2d": lambda t: torch.nn.functional.conv_transpose2d(
        t.reshape(1, 1, 4, 6), torch.ones(1, 2, 3, 3, device=t.device)
    ),
    "cumsum": lambda t: t.cumsum(1),
    "cumsum_int_to_int64": lambda t: (t * 10).to(torch.int32).cumsum(0),
    "cumsum_dtype_out": lambda t: torch.cumsum(
        t, -1, dtype=torch.float32, out=torch.empty(4, 6, device=t.device)
    ),
    "mse_loss_none": lambda t: torch.nn.functional.mse_loss(t, t.flip(0), reduction="none"),
    "mse_loss_sum": lambda t: torch.nn.functional.mse_loss(t, t.flip(1), reduction="sum"),
    "mse_loss_backward_mean": lambda t: torch.ops.aten.mse_loss_backward(
        torch.tensor(0.5, device=t.device), t, t.flip(0), 1
    ),
    "conv1d_bias_stride": lambda t: torch.nn.functional.conv1d(
        t.reshape(1, 4, 6),
        torch.ones(3, 4, 2, device=t.device),
        torch.ones(3, device=t.device),
        stride=2,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_category_routines_match_cpu(ascend, case):
    torch.manual_seed(0)
    x = torch.randn(4, 6)
    ref = CASES[case](x)
    got = CASES[case](x.to(DEV))
    torch.testing.assert_close(got.cpu(), ref, rtol=1e-5, atol=1e-5)


def test_convolution_backward(counts):
    img = torch.randn(1, 2, 5, 5, requires_grad=True)
    k = torch.randn(3, 2, 3, 3, requires_grad=True)
    b = torch.randn(3, requires_grad=True)
    torch.nn.functional.conv2d(img, k, b, padding=1).square().sum().backward()
    dev = [t.detach().to(DEV).requires_grad_() for t in (img, k, b)]
    torch.nn.functional.conv2d(*dev, padding=1).square().sum().backward()
    for a, c in zip(dev, (img, k, b), strict=True):
        torch.testing.assert_close(a.grad.cpu(), c.grad, rtol=1e-4, atol=1e-4)
    assert counts("aten::convolution_backward") == {"ascend": 1}


def test_cumsum_and_mse_loss_run_on_aclnn(counts):
    x = torch.randn(8, 3)
    target = torch.randn(8, 3)
    d = x.to(DEV).requires_grad_()
    loss = torch.nn.functional.mse_loss(d.cumsum(0), target.to(DEV))
    loss.backward()
    ref = x.clone().requires_grad_()
    ref_loss = torch.nn.functional.mse_loss(ref.cumsum(0), target)
    ref_loss.backward()
    torch.testing.assert_close(loss.cpu(), ref_loss.detach())
    torch.testing.assert_close(d.grad.cpu(), ref.grad)
    assert counts("aten::cumsum") == {"ascend": 2}, "forward, and its backward's reversed cumsum"
    for op in ("aten::mse_loss", "aten::mse_loss_backward"):
        assert counts(op) == {"ascend": 1}, op


def test_a_cpu_scalar_operand_is_a_device_fill_not_a_copy(counts):
    # A copy from pageable host memory waits for the stream and cannot be captured into a graph;
    # a fill carries the value as stream work.
    d = torch.arange(6, dtype=torch.float32, device=DEV)
    got = d * 2 + torch.tensor(1.5)
    torch.testing.assert_close(got.cpu(), torch.arange(6, dtype=torch.float32) * 2 + 1.5)
    assert counts("aten::fill_.Scalar") == {"ascend": 2}
    assert counts("aten::_copy_from") == {}
    # The value is cast to the operand's dtype first, wrapping as PyTorch does.
    u = torch.tensor([1, 250], dtype=torch.uint8)
    assert torch.equal((u.to(DEV) + 300).cpu(), u + 300)
    i = torch.tensor([3, -7], dtype=torch.int8)
    assert torch.equal((i.to(DEV) * 1000).cpu(), i * 1000)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_bernoulli_on_the_dropout_mask_ops(counts, dtype):
    """bernoulli_(p) from aclnnDropoutGenMaskV2 + DoMask: exactly 0 or 1, share p, seeded runs
    repeat, consecutive draws differ, strided targets are written in place."""
    torch.flagos.manual_seed(5)
    x = torch.empty(3000, device=DEV, dtype=dtype).bernoulli_(0.3)
    v = x.float().cpu()
    assert set(v.unique().tolist()) <= {0.0, 1.0}
    assert abs(v.mean().item() - 0.3) < 0.05
    torch.flagos.manual_seed(5)
    again = torch.empty(3000, device=DEV, dtype=dtype).bernoulli_(0.3)
    assert torch.equal(again.cpu(), x.cpu())
    assert not torch.equal(torch.empty_like(x).bernoulli_(0.3).cpu(), x.cpu())
    assert torch.empty(100, device=DEV, dtype=dtype).bernoulli_(1.0).cpu().eq(1).all()
    assert torch.empty(100, device=DEV, dtype=dtype).bernoulli_(0.0).cpu().eq(0).all()
    base = torch.full((40, 30), 7.0, device=DEV, dtype=dtype)
    base[:, ::3].bernoulli_(0.5)
    cpu = base.cpu()
    assert cpu[:, 1::3].eq(7).all() and set(cpu[:, ::3].unique().tolist()) <= {0.0, 1.0}
    assert counts("aten::bernoulli_.float") == {"ascend": 6}


def test_bernoulli_float64_goes_to_the_cpu_up_front(counts):
    x = torch.empty(64, device=DEV, dtype=torch.float64).bernoulli_(0.5)
    assert set(x.cpu().unique().tolist()) <= {0.0, 1.0}
    assert counts("aten::bernoulli_.float") == {"cpu": 1}


def test_dropout_replays_draw_anew_in_a_graph(ascend):
    """In a capture the mask reads its seed and offset from device words the graph rewrites
    before each replay (aclnnDropoutGenMaskV2Tensor): replays differ, and the generator advances
    as eager calls would."""
    torch.flagos.manual_seed(3)
    x = torch.ones(4096, device=DEV)
    g = torch.flagos.Graph()
    with torch.flagos.graph(g):
        y = torch.nn.functional.dropout(x, 0.5)
    after_capture = torch.flagos.get_rng_state()
    masks = []
    for _ in range(3):
        g.replay()
        masks.append(y.cpu().ne(0))
    assert not torch.equal(masks[0], masks[1]) and not torch.equal(masks[1], masks[2])
    assert all(0.45 < m.float().mean().item() < 0.55 for m in masks)
    assert set(y.cpu().unique().tolist()) <= {0.0, 2.0}
    assert not torch.equal(torch.flagos.get_rng_state(), after_capture)


def test_casts_and_strided_copies_run_on_aclnn_inplace_copy(emu, ascend):
    """Same-device copies that are not byte moves go to aclnnInplaceCopy on the stream (core's
    vendor copy kernel), not through host staging."""
    import torch_fl

    assert torch_fl._C.vendor_copies()
    x = torch.arange(24.0).reshape(4, 6)
    d = x.to(DEV)
    before = emu.call_count("aclnnInplaceCopy")
    t = d.t().contiguous()
    h = d.to(torch.float16)
    i = d[:, ::2].to(torch.int64)
    b = d.to(torch.bool)
    assert emu.call_count("aclnnInplaceCopy") - before == 4
    assert torch.equal(t.cpu(), x.t().contiguous())
    assert torch.equal(h.cpu(), x.to(torch.float16))
    assert torch.equal(i.cpu(), x[:, ::2].to(torch.int64))
    assert torch.equal(b.cpu(), x.to(torch.bool))
    # Into a strided destination: the bytes between its elements keep their values.
    dst = torch.zeros(4, 12, device=DEV)
    dst[:, ::2].copy_(d)
    ref = torch.zeros(4, 12)
    ref[:, ::2] = x
    assert torch.equal(dst.cpu(), ref)


def test_a_dtype_the_copy_kernel_lacks_is_staged_through_the_host(emu, ascend):
    z = torch.randn(3, 5, dtype=torch.complex64)
    before = emu.call_count("aclnnInplaceCopy")
    t = z.to(DEV).t().contiguous()
    assert torch.equal(t.cpu(), z.t().contiguous())
    assert emu.call_count("aclnnInplaceCopy") == before


def test_a_layout_changing_copy_records_into_a_graph(ascend):
    d = torch.randn(16, 8, device=DEV)
    g = torch.flagos.Graph()
    with torch.flagos.graph(g):
        t = d.t().contiguous()
        h = d.to(torch.bfloat16)
    fresh = torch.randn(16, 8)
    d.copy_(fresh.to(DEV))
    g.replay()
    assert torch.equal(t.cpu(), fresh.t().contiguous())
    assert torch.equal(h.cpu(), fresh.to(torch.bfloat16))
