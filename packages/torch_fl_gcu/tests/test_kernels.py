"""Generated topsaten kernels: CPU-identical results through every quirk of the SDK (no int64,
no rank 0, no strides, no broadcasting), served by the gcu backend, errors that name everything."""

from __future__ import annotations

import pytest
import torch
from torch_fl.native_kernel_tests import *  # noqa: F403  (the kit's rules, collected here)

pytestmark = pytest.mark.gcu

DEV = "flagos:0"


@pytest.fixture
def kernel_backend(gcu):
    return "gcu"


@pytest.fixture
def counts(backend_counts):
    return backend_counts


def close(a, b, **kw):
    torch.testing.assert_close(a.cpu(), b, **kw)


def test_generated_kernels_cover_the_ops_table_categories(gcu):
    from torch_fl_gcu import kernels_manifest

    gen = kernels_manifest()["generated"]
    for op in [
        "aten::abs",
        "aten::add.out",
        "aten::add_.Tensor",
        "aten::mul.out",
        "aten::sub.out",
        "aten::eq.Tensor",
        "aten::sum.dim_IntList",
        "aten::mm",
        "aten::addmm",
        "aten::_softmax",
        "aten::_softmax_backward_data",
        "aten::linalg_vector_norm",
        "aten::native_layer_norm",
        "aten::arange.start_out",
        "aten::fill_.Scalar",
        "aten::zero_",
        "aten::masked_fill_.Scalar",
        "aten::index_select",
        "aten::index_fill_.int_Scalar",
        "aten::embedding_dense_backward",
        "aten::_upsample_nearest_exact2d",
        "aten::where.self",
        "aten::all",
        "aten::cat",
    ]:
        assert op in gen, op


def test_float_ops_run_on_gcu(counts):
    x = torch.randn(6, 5)
    a = x.to(DEV)
    close(torch.abs(a), x.abs())
    close(torch.exp(a), x.exp())
    close(a * 2 + a, x * 2 + x)
    close(torch.softmax(a, -1), torch.softmax(x, -1))
    assert counts("aten::abs") == {"gcu": 1}
    assert counts("aten::exp") == {"gcu": 1}
    assert "gcu" in counts("aten::_softmax")


def test_int64_abs_and_sum_go_to_cpu_and_match(counts):
    x = torch.tensor([[-3, 4, -5], [6, -7, 8]], dtype=torch.int64)
    a = x.to(DEV)
    assert torch.equal(torch.abs(a).cpu(), x.abs())
    assert torch.equal(a.sum(dim=1).cpu(), x.sum(dim=1))
    assert torch.equal(a.sum().cpu(), x.sum())
    assert counts("aten::abs") == {"cpu": 1}  # the dtype rule, not topsaten
    assert counts("aten::sum.dim_IntList") == {"cpu": 1}


def test_int32_sum_is_declined_to_the_counted_cpu_fallback(counts):
    """int32 sums into int64, which topsaten lacks: the kernel declines before any effect."""
    x = torch.tensor([2**30, 2**30, 5], dtype=torch.int32)
    r = x.to(DEV).sum()
    assert r.dtype == torch.int64 and r.item() == x.sum().item()
    # Routed to gcu (counted there), declined, served by the CPU fallback (counted as cpu).
    assert counts("aten::sum") == {"gcu": 1, "cpu": 1}


def test_rank0_inputs(counts):
    for x in (torch.tensor(-2.5), torch.tensor(3.0)):
        a = x.to(DEV)
        close(torch.abs(a), x.abs())
        close(a + a, x + x)
        close(a.sum(), x.sum())
        close(torch.softmax(a, 0), torch.softmax(x, 0))
    assert counts("aten::abs") == {"gcu": 2}


def test_non_contiguous_inputs(counts):
    x = torch.randn(4, 6)
    a = x.to(DEV)
    close(torch.abs(a.t()), x.t().abs())
    close(a[:, ::2] * a[:, 1::2], x[:, ::2] * x[:, 1::2])
    close(a.t().sum(dim=0), x.t().sum(dim=0))
    close(a.t() @ a, x.t() @ x)
    assert counts("aten::mm") == {"gcu": 1}


def test_broadcasting(counts):
    x, y = torch.randn(4, 1, 3), torch.randn(5, 1)
    a, b = x.to(DEV), y.to(DEV)
    close(a + b, x + y)
    close(a * b, x * y)
    close(torch.where(a > 0, a, b), torch.where(x > 0, x, y))
    close(a + 1.5, x + 1.5)  # a 0-dim CPU scalar broadcast too
    close(a.masked_fill(b > 0, 0.0), x.masked_fill(y > 0, 0.0))


def test_addmm_broadcasts_its_bias(gcu):
    bias, m1, m2 = torch.randn(4), torch.randn(3, 5), torch.randn(5, 4)
    close(torch.addmm(bias.to(DEV), m1.to(DEV), m2.to(DEV)), torch.addmm(bias, m1, m2))


def test_out_and_inplace_forms(counts):
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    a, b = x.to(DEV), y.to(DEV)
    out = torch.empty(0, device=DEV)
    torch.add(a, b, alpha=2, out=out)
    close(out, x + 2 * y)
    c = a.clone()
    c.sub_(b).mul_(3)
    close(c, (x - y) * 3)
    assert counts("aten::add.out") == {"gcu": 1}
    assert counts("aten::sub_.Tensor") == {"gcu": 1}
    assert counts("aten::mul_.Tensor") == {"gcu": 1}
    v = torch.zeros(4, 4, device=DEV)[:, 1]  # in-place through a strided view
    v.fill_(7)
    assert torch.equal(v.cpu(), torch.full((4,), 7.0))


def test_half_and_bfloat16(gcu):
    for dt in (torch.float16, torch.bfloat16):
        x, y = torch.randn(8, 8).to(dt), torch.randn(8, 8).to(dt)
        close((x.to(DEV) * y.to(DEV)), x * y)
        close(torch.softmax(x.to(DEV).float(), 1), torch.softmax(x.float(), 1))


def test_indexing_kernels_convert_indices_to_int32(counts):
    w = torch.randn(10, 3)
    idx = torch.tensor([0, 9, 3, 3])
    close(torch.index_select(w.to(DEV), 0, idx.to(DEV)), w.index_select(0, idx))
    e = torch.nn.functional.embedding(idx.to(DEV), w.to(DEV).requires_grad_())
    e.sum().backward()
    assert "gcu" in counts("aten::embedding_dense_backward")
    f = w.clone().index_fill_(1, torch.tensor([2]), -1.0)
    close(w.to(DEV).index_fill_(1, torch.tensor([2]).to(DEV), -1.0), f)


def test_layer_norm_cat_upsample_norm_arange(gcu):
    x = torch.randn(2, 3, 4, 4)
    ln = torch.nn.functional.layer_norm
    close(ln(x.to(DEV), (4,)), ln(x, (4,)))
    close(torch.cat([x.to(DEV), x.to(DEV) * 2], dim=1), torch.cat([x, x * 2], dim=1))
    up = torch.nn.functional.interpolate
    close(
        up(x.to(DEV), scale_factor=2, mode="nearest-exact"),
        up(x, scale_factor=2, mode="nearest-exact"),
    )
    close(torch.linalg.vector_norm(x.to(DEV), dim=(1, 2)), torch.linalg.vector_norm(x, dim=(1, 2)))
    close(torch.arange(0, 5, 0.5, device=DEV), torch.arange(0, 5, 0.5))
    assert torch.equal(torch.arange(7, device=DEV).cpu(), torch.arange(7))  # int64 -> cpu route


def test_topsaten_failure_names_function_op_device_and_status(emu, gcu):
    a = torch.ones(3, device="flagos:1")
    with emu.fault("topsatenAbs", "TOPSATEN_STATUS_EXECUTE_ERROR"):
        with pytest.raises(RuntimeError) as info:
            torch.abs(a)
    msg = str(info.value)
    for part in ("topsatenAbs", "aten::abs", "flagos:1", "TOPSATEN_STATUS_EXECUTE_ERROR", "gcu"):
        assert part in msg, msg
    assert torch.equal(torch.abs(a).cpu(), torch.ones(3))


def test_mixed_devices_are_refused(gcu):
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(2, device="flagos:0") + torch.ones(2, device="flagos:1")
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(2, device="flagos:0") + torch.ones(2)


def test_nonzero_and_index_tensor(counts):
    x = torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, -3.0]])
    a = x.to(DEV)
    nz = torch.nonzero(a)
    assert nz.dtype == torch.int64 and torch.equal(nz.cpu(), torch.nonzero(x))
    st = torch.nonzero_static(a, size=5, fill_value=-1)
    assert torch.equal(st.cpu(), torch.nonzero_static(x, size=5, fill_value=-1))
    assert counts("aten::nonzero") == {"gcu": 1}
    w = torch.randn(6, 4)
    i = torch.tensor([[5, 0], [-1, 2]])
    assert torch.equal(w.to(DEV)[i.to(DEV)].cpu(), w[i])
    j = torch.tensor([1, 3])
    assert torch.equal(w.to(DEV)[i[0].to(DEV), j.to(DEV)].cpu(), w[i[0], j])
    assert counts("aten::index.Tensor") == {"gcu": 2}
    m = x > 0  # a boolean mask: declined, served by the CPU fallback
    assert torch.equal(a[m.to(DEV)].cpu(), x[m])


def test_optimizer_pointwise_updates(counts):
    p, g, v = torch.randn(8), torch.randn(8), torch.rand(8) + 0.1
    a, b, c = p.to(DEV), g.to(DEV), v.to(DEV)
    close(a.clone().addcmul_(b, b, value=0.1), p.clone().addcmul_(g, g, value=0.1))
    close(a.clone().addcdiv_(b, c, value=-0.01), p.clone().addcdiv_(g, v, value=-0.01))
    close(a.clone().lerp_(b, 0.9), p.clone().lerp_(g, 0.9))
    close(torch.lerp(a, b, 0.25), torch.lerp(p, g, 0.25))
    assert counts("aten::addcmul_") == {"gcu": 1}
    assert counts("aten::addcdiv_") == {"gcu": 1}
    assert counts("aten::lerp_.Scalar") == {"gcu": 1}


def test_activation_backward_kernels(counts):
    x = torch.randn(5, 6)
    for fn in (torch.tanh, torch.sigmoid, torch.relu):
        a = x.to(DEV).requires_grad_()
        b = x.clone().requires_grad_()
        fn(a).sum().backward()
        fn(b).sum().backward()
        close(a.grad, b.grad)
    assert "gcu" in counts("aten::tanh_backward")
    assert "gcu" in counts("aten::sigmoid_backward")
    assert "gcu" in counts("aten::threshold_backward")


def test_casts_and_strided_copies_run_on_topsaten_copy(emu, gcu):
    """Same-device copies that are not byte moves go to topsatenCopy (which honours strides) on
    the stream, not through host staging; int64, which topsaten does not move, is staged."""
    import torch_fl

    assert torch_fl._C.vendor_copies()
    x = torch.arange(24.0).reshape(4, 6)
    d = x.to(DEV)
    before = emu.call_count("topsatenCopy")
    t = d.t().contiguous()
    h = d.to(torch.bfloat16)
    i = d[:, ::2].to(torch.int32)
    b = d.to(torch.bool)
    dst = torch.zeros(4, 12, device=DEV)
    dst[:, ::2].copy_(d)
    assert emu.call_count("topsatenCopy") - before == 5
    assert torch.equal(t.cpu(), x.t().contiguous())
    assert torch.equal(h.cpu(), x.to(torch.bfloat16))
    assert torch.equal(i.cpu(), x[:, ::2].to(torch.int32))
    assert torch.equal(b.cpu(), x.to(torch.bool))
    ref = torch.zeros(4, 12)
    ref[:, ::2] = x
    assert torch.equal(dst.cpu(), ref)  # the bytes between its elements keep their values
    before = emu.call_count("topsatenCopy")
    w = d.to(torch.int64).t().contiguous()
    assert torch.equal(w.cpu(), x.to(torch.int64).t().contiguous())
    assert emu.call_count("topsatenCopy") == before
