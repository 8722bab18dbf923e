"""flagos over torch's CUDA backend: one memory pool, one stream order, one RNG per device.

All marked ``gpu``: they need a GPU with the cuda vendor active (``FLAGOS_VENDOR=cuda`` on the H200).
"""

from __future__ import annotations

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.cuda]

CUDA = torch.device("cuda")


def alias(t):
    return torch.ops.torch_fl.alias_as(t, CUDA)


def test_runtime_and_backends():
    import torch_fl

    assert torch_fl._C.runtime_name() == "delegate:cuda"
    assert "box:cuda" in torch_fl._C.router_backends()
    assert torch.flagos.device_count() == torch.cuda.device_count()


def test_flagos_memory_is_cuda_memory():
    x = torch.arange(6, dtype=torch.float32, device="flagos").reshape(2, 3)
    v = alias(x)
    assert v.device == torch.device("cuda", 0) and v.data_ptr() == x.data_ptr()
    v.mul_(2)
    assert torch.equal(x.cpu(), torch.arange(6.0).reshape(2, 3) * 2)


def test_one_pool_memory_stats_are_cuda_stats():
    torch.flagos.synchronize()
    before = torch.cuda.memory_allocated(0)
    x = torch.empty(1 << 20, device="flagos")
    assert torch.cuda.memory_allocated(0) - before >= 4 << 20
    assert torch.flagos.memory_allocated(0) == torch.cuda.memory_allocated(0)
    y = x + 1  # a boxed CUDA kernel's output joins flagos without a copy
    assert y.device.type == "flagos"
    assert torch.cuda.memory_allocated(0) - before == 8 << 20
    del x, y


def test_copies_between_cuda_and_flagos_tensors():
    c = torch.arange(12, dtype=torch.float32, device="cuda").reshape(3, 4)
    f = c.to("flagos")
    assert f.device == torch.device("flagos", 0) and f.data_ptr() != c.data_ptr()
    assert torch.equal(f.cpu(), c.cpu())
    back = (f * 2).to("cuda")
    assert back.device == torch.device("cuda", 0)
    assert torch.equal(back.cpu(), c.cpu() * 2)
    dst = torch.empty(4, 3, device="flagos")
    dst.copy_(c.t().half())  # strided source, cast on the way
    assert torch.equal(dst.cpu(), c.t().cpu())


def test_flagos_stream_is_cuda_stream():
    s = torch.Stream(device="flagos:0")
    with torch.flagos.stream(s):
        assert torch.cuda.current_stream(0).stream_id == s.stream_id
        x = torch.ones(1024, device="flagos")
        y = x * 3
    assert torch.cuda.current_stream(0).stream_id == torch.flagos.current_stream(0).stream_id
    s.synchronize()
    assert y.sum().item() == 3072


def test_one_rng_stream_shared_with_cuda():
    torch.manual_seed(123)
    a = torch.randn(1000, device="flagos")
    torch.manual_seed(123)
    b = torch.randn(1000, device="cuda")
    assert torch.equal(a.cpu(), b.cpu())
    # The flagos generator is a view of CUDA's: drawing on either advances both.
    g = torch.flagos.default_generators[0]
    off = g.get_offset()
    torch.rand(4096, device="cuda")
    assert g.get_offset() > off
    state = g.get_state()
    assert torch.equal(state, torch.cuda.default_generators[0].get_state())


def test_pinned_memory_and_non_blocking_copies():
    h = torch.randn(1 << 16).pin_memory()
    assert h.is_pinned()
    d = h.to("flagos", non_blocking=True)
    back = torch.empty_like(h).pin_memory()
    back.copy_(d, non_blocking=True)
    torch.flagos.synchronize()
    assert torch.equal(back, h)


def test_generated_route_kernels_use_box_cuda():
    import torch_fl

    torch_fl._C.reset_dispatch_counts()
    x = torch.randn(8, device="flagos")
    (x + x).relu_()
    counts = torch_fl._C.dispatch_counts()
    assert counts.get("aten::add.Tensor", {}).get("box:cuda", 0) >= 1, counts


def test_convolution_runs_on_cudnn_route():
    # convolution and its backward are routed to box:cuda directly (derived), so cuDNN computes
    # them, in TF32 by default as for CUDA tensors: compare in full fp32.
    import torch_fl

    conv = torch.nn.Conv2d(3, 8, 3).to("flagos")
    x = torch.randn(2, 3, 16, 16, device="flagos", requires_grad=True)
    torch_fl._C.reset_dispatch_counts()
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        y = conv(x)
        y.sum().backward()
    counts = torch_fl._C.dispatch_counts()
    assert counts.get("aten::convolution_backward") == {"box:cuda": 1}, counts
    assert counts.get("aten::convolution") == {"box:cuda": 1}, counts
    ref = torch.nn.functional.conv2d(x.detach().cpu(), conv.weight.detach().cpu(), conv.bias.cpu())
    torch.testing.assert_close(y.detach().cpu(), ref, rtol=1e-3, atol=1e-3)
    assert x.grad.device.type == "flagos"


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_peer_copy_and_model_on_second_device():
    x = torch.randn(1 << 20, device="flagos:0")
    y = x.to("flagos:1")
    assert y.device == torch.device("flagos", 1)
    assert torch.equal(x.cpu(), y.cpu())
    model = torch.nn.Linear(64, 64).to("flagos:1")
    inp = torch.randn(8, 64, device="flagos:1")
    torch.flagos.set_device(0)  # an op on flagos:1 while device 0 is current
    out = model(inp)
    assert out.device == torch.device("flagos", 1)
    ref = torch.nn.functional.linear(
        inp.cpu(), model.weight.detach().cpu(), model.bias.detach().cpu()
    )
    torch.testing.assert_close(out.detach().cpu(), ref, rtol=1e-4, atol=1e-4)


def test_flaggems_backend_serves_a_route(monkeypatch):
    from torch_fl_cuda import flaggems

    if not flaggems.status().startswith("on"):
        pytest.skip(f"flaggems backend {flaggems.status()}")
    import torch_fl
    from torch_fl.routing import load_routes

    monkeypatch.setenv("FLAGOS_OP_abs", "flaggems")
    load_routes()
    try:
        torch_fl._C.reset_dispatch_counts()
        x = torch.randn(4, 1000, device="flagos")
        y = torch.abs(x)
        assert y.device.type == "flagos"
        torch.testing.assert_close(y.cpu(), x.cpu().abs())
        counts = torch_fl._C.dispatch_counts()
        assert counts["aten::abs"].get("flaggems", 0) == 1, counts
    finally:
        monkeypatch.delenv("FLAGOS_OP_abs")
        load_routes()


@pytest.mark.parametrize(
    "op",
    [
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_cudnn_attention",
    ],
)
def test_fused_attention_results_land_where_cuda_puts_them(op):
    """Outputs of CUDA-only attention kernels (unboxed box:cuda routes): CUDA tensors become
    flagos tensors, tensors CUDA returns on the host (philox seed/offset) stay there."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 16, 64, generator=g, dtype=torch.float16) for _ in range(3))
    fn = getattr(torch.ops.aten, op)
    extra = {
        "_scaled_dot_product_efficient_attention": (None, True),
        "_scaled_dot_product_flash_attention": (),
        "_scaled_dot_product_cudnn_attention": (None, True),
    }[op]
    try:
        native = fn(q.cuda(), k.cuda(), v.cuda(), *extra)
    except RuntimeError as exc:  # a kernel this GPU/build lacks: nothing to compare with
        pytest.skip(f"{op} does not run natively here: {str(exc).splitlines()[0]}")
    routed = fn(q.to("flagos"), k.to("flagos"), v.to("flagos"), *extra)
    assert len(routed) == len(native)
    for r, n in zip(routed, native, strict=True):
        if isinstance(n, torch.Tensor):
            want = "flagos" if n.device.type == "cuda" else n.device.type
            assert isinstance(r, torch.Tensor) and r.device.type == want, (op, n.device, r)
        else:  # None (an undefined tensor), or a SymInt such as max_q
            assert r == n, (op, r, n)
    torch.testing.assert_close(routed[0].cpu(), native[0].cpu(), atol=2e-3, rtol=2e-3)


def test_native_stream_is_torchs_cuda_stream():
    # runtime ABI v1.2: what a Triton launcher (FlagGems) enqueues on is the CUDA stream torch's
    # kernels use, the current one included.
    assert torch.ops.torch_fl._native_stream(0) == torch.cuda.current_stream(0).cuda_stream
    side = torch.cuda.Stream(0)
    with torch.cuda.stream(side):
        assert torch.ops.torch_fl._native_stream(0) == side.cuda_stream
    with pytest.raises(RuntimeError, match="device"):
        torch.ops.torch_fl._native_stream(torch.cuda.device_count())
