"""flex_attention on flagos (torch_fl.integrations.flex_attention)."""

from __future__ import annotations

import pytest
import torch

pytestmark = [pytest.mark.ecosystem, pytest.mark.library("flex_attention", dist="torch")]


def _causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def _inputs():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(1, 2, 16, 16, generator=g) for _ in range(3)]


def test_eager_forward_backward(flagos):
    """flex_attention in eager mode runs forward and backward on flagos as on the CPU"""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    q, k, v = _inputs()
    leaves = [t.to("flagos").requires_grad_() for t in (q, k, v)]
    mask = create_block_mask(_causal, 1, 2, 16, 16, device="flagos")
    out = flex_attention(*leaves, block_mask=mask)
    ref_mask = create_block_mask(_causal, 1, 2, 16, 16, device="cpu")
    ref = flex_attention(q, k, v, block_mask=ref_mask)  # CPU: no backward there, so math below
    torch.testing.assert_close(out.detach().cpu(), ref, atol=1e-5, rtol=1e-5)
    ref_leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    bias = torch.ones(16, 16, dtype=torch.bool).tril()
    math = torch.nn.functional.scaled_dot_product_attention(*ref_leaves, attn_mask=bias)
    out.sum().backward()
    math.sum().backward()
    for a, b in zip(leaves, ref_leaves, strict=True):
        torch.testing.assert_close(a.grad.cpu(), b.grad, atol=1e-5, rtol=1e-5)


def test_compiled_flex_attention(flagos):
    """compiled flex_attention runs on flagos as on the CPU, whatever the vendor's codegen

    Without code generation on the routed kernels; under C++ scheduling through Inductor's CPU
    template (inference, as on the CPU); under Triton scheduling (the cuda vendor) through its
    Triton template, forward and backward."""
    import torch_fl.compile
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    kind = torch_fl.compile.scheduling()
    torch._dynamo.reset()
    q, k, v = _inputs()
    mask = create_block_mask(_causal, 1, 2, 16, 16, device="flagos")
    ref = flex_attention(q, k, v, block_mask=create_block_mask(_causal, 1, 2, 16, 16, "cpu"))
    compiled = torch.compile(flex_attention)
    with torch.no_grad():
        out = compiled(*(t.to("flagos") for t in (q, k, v)), block_mask=mask)
    torch.testing.assert_close(out.cpu(), ref, atol=1e-5, rtol=1e-5)
    # Grad mode on, nothing requiring grad: what the CPU runs too.
    out = compiled(*(t.to("flagos") for t in (q, k, v)), block_mask=mask)
    torch.testing.assert_close(out.cpu(), ref, atol=1e-5, rtol=1e-5)
    if kind == "triton":  # the Triton template has a backward; the CPU one does not
        leaves = [t.to("flagos").requires_grad_() for t in (q, k, v)]
        compiled(*leaves, block_mask=mask).sum().backward()
        ref_leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        bias = torch.ones(16, 16, dtype=torch.bool).tril()
        torch.nn.functional.scaled_dot_product_attention(
            *ref_leaves, attn_mask=bias
        ).sum().backward()
        for a, b in zip(leaves, ref_leaves, strict=True):
            torch.testing.assert_close(a.grad.cpu(), b.grad, atol=1e-4, rtol=1e-4)
    torch._dynamo.reset()
