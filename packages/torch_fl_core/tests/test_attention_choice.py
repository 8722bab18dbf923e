"""scaled_dot_product_attention on flagos: the fused-kernel choice follows the route table.

ATen asks ``_fused_sdp_choice_stub`` for the PrivateUse1 device; core answers with the choice of
the backend ``aten::_fused_sdp_choice`` is routed to, kept only when the kernel ATen then calls is
routed forward and backward (else math). These tests run on the sim vendor (box:cpu); the flash
bridge used by the cuda vendor (choice "overrideable" -> routed ``_scaled_dot_product_flash_attention``)
is exercised here with a test-only Python backend standing in for CUDA's flash kernels.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import torch_fl
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch_fl import _C, routing

pytestmark = pytest.mark.routing

FLASH_CPU = "aten::_scaled_dot_product_flash_attention_for_cpu"


def _sim_only() -> None:
    # What these tests need is a table that sends the CPU flash kernel to box:cpu (the host route).
    routes = {op: backend for op, backend, _ in _C.router_routes()}
    if routes.get(FLASH_CPU) != "box:cpu":
        pytest.skip(
            f"vendor {torch_fl.vendor().name!r}: its table does not route {FLASH_CPU} to box:cpu"
        )


def _qkv(dtype=torch.float32, shape=(2, 4, 16, 8), seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g, dtype=dtype) for _ in range(3)]


def _run(q, k, v, device, **kw):
    leaves = [t.detach().to(device).requires_grad_() for t in (q, k, v)]
    out = F.scaled_dot_product_attention(*leaves, **kw)
    out.float().square().sum().backward()
    return out.detach().cpu(), [t.grad.cpu() for t in leaves]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_sim_runs_the_cpu_flash_kernel_bit_exact(dtype):
    _sim_only()
    q, k, v = _qkv(dtype)
    _C.reset_dispatch_counts()
    out, grads = _run(q, k, v, "flagos", is_causal=True)
    counts = _C.dispatch_counts()
    assert counts.get(FLASH_CPU) == {"box:cpu": 1}
    assert counts.get(FLASH_CPU + "_backward") == {"box:cpu": 1}
    ref_out, ref_grads = _run(q, k, v, "cpu", is_causal=True)
    assert torch.equal(out, ref_out)
    for g, r in zip(grads, ref_grads, strict=True):
        assert torch.equal(g, r)


def test_sdpa_kernel_context_is_honoured():
    _sim_only()
    q, k, v = _qkv()
    _C.reset_dispatch_counts()
    with sdpa_kernel(SDPBackend.MATH):
        out, _ = _run(q, k, v, "flagos", is_causal=True)
    assert FLASH_CPU not in _C.dispatch_counts()
    with sdpa_kernel(SDPBackend.MATH):
        ref, _ = _run(q, k, v, "cpu", is_causal=True)
    torch.testing.assert_close(out, ref)


def _sim_rules() -> list[str]:
    """sim's table written out rule by rule (its derive statement expanded), to leave some out."""
    from torch_fl.routing import generate

    return generate.expanded_text().splitlines()


def test_unrouted_choice_means_math(tmp_path):
    _sim_only()
    table = tmp_path / "no-choice.conf"
    lines = _sim_rules()
    kept = [ln for ln in lines if not ln.startswith("_fused_sdp_choice ")]
    table.write_text("\n".join(kept) + "\n")
    q, k, v = _qkv()
    try:
        routing.load_routes(path=table)
        _C.reset_dispatch_counts()
        out, grads = _run(q, k, v, "flagos", is_causal=True)
        counts = _C.dispatch_counts()
    finally:
        routing.load_routes()
    assert FLASH_CPU not in counts and "aten::_fused_sdp_choice" not in counts
    ref, ref_grads = _run(q, k, v, "cpu", is_causal=True)
    torch.testing.assert_close(out, ref)
    for g, r in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(g, r)


def _fake_flash_backend():
    """CUDA-style flash kernels (9 outputs, rng state) computed by the CPU flash kernels."""
    calls = []

    def flash(q, k, v, dropout_p=0.0, is_causal=False, return_debug_mask=False, *, scale=None):
        calls.append("fwd")
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, dropout_p, is_causal, scale=scale
        )
        empty = torch.empty(0, device=q.device)
        seed = torch.zeros((), dtype=torch.int64, device=q.device)
        return out, lse, empty, empty, q.shape[2], k.shape[2], seed, seed.clone(), empty

    def flash_backward(
        grad_out, q, k, v, out, lse, cum_q, cum_k, max_q, max_k, dropout_p, is_causal,
        seed, offset, *, scale=None,
    ):  # fmt: skip
        calls.append("bwd")
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
            grad_out, q, k, v, out, lse, dropout_p, is_causal, scale=scale
        )

    from torch_fl.routing.python_backend import register_python_backend

    register_python_backend(
        "testflash",
        {
            "_scaled_dot_product_flash_attention": flash,
            "_scaled_dot_product_flash_attention_backward": flash_backward,
        },
    )
    return calls


def test_flash_bridge_through_overrideable(tmp_path):
    """Where only the CUDA-style flash ops are routed, the choice becomes "overrideable" and core's
    overrideable kernels run them through the router; a mask (which flash cannot take) gets math."""
    _sim_only()
    calls = _fake_flash_backend()
    lines = _sim_rules()
    kept = [ln for ln in lines if not ln.startswith("_scaled_dot_product_flash_attention_for_cpu")]
    kept += [
        "_scaled_dot_product_flash_attention = testflash",
        "_scaled_dot_product_flash_attention_backward = testflash",
    ]
    table = tmp_path / "bridge.conf"
    table.write_text("\n".join(kept) + "\n")
    q, k, v = _qkv()
    mask = torch.rand(16, 16, generator=torch.Generator().manual_seed(1)) > 0.3
    try:
        routing.load_routes(path=table)
        _C.reset_dispatch_counts()
        out, grads = _run(q, k, v, "flagos", is_causal=True)
        counts = _C.dispatch_counts()
        masked, _ = _run(q, k, v, "flagos", attn_mask=mask.to("flagos"))
    finally:
        routing.load_routes()
    assert calls == ["fwd", "bwd"]
    assert counts["aten::_scaled_dot_product_flash_attention"] == {"testflash": 1}
    ref, ref_grads = _run(q, k, v, "cpu", is_causal=True)
    assert torch.equal(out, ref)
    for g, r in zip(grads, ref_grads, strict=True):
        assert torch.equal(g, r)
    torch.testing.assert_close(masked, _run(q, k, v, "cpu", attn_mask=mask)[0])
