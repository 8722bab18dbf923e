"""Device graphs: ``torch.flagos.Graph`` / ``torch.flagos.graph``, and ``mode="reduce-overhead"``.

A declared capability: a runtime that records graphs (the delegate runtime over CUDA) captures;
every other vendor raises one clear error naming the vendor and its runtime, which the first test
checks. On a vendor that captures: replays see updated inputs, graphs share memory pools, RNG
state advances per replay, the capturing stream is reported, capturing on the default stream and
running a CPU-fallback operator inside a capture are refused with errors naming them, and compiled
code in ``mode="reduce-overhead"`` replays a flagos graph.
"""

from __future__ import annotations

import pytest
import torch

pytestmark = [pytest.mark.graphs, pytest.mark.usefixtures("flagos")]


def _supported() -> bool:
    return torch.flagos.graphs.supported()


@pytest.fixture
def capturing():
    if not _supported():
        import torch_fl

        pytest.skip(
            f"vendor {torch_fl.vendor().name!r} (runtime {torch_fl._C.runtime_name()!r}) does not "
            "record device graphs (a declared capability, docs/compile.md)"
        )


def test_absent_capability_is_a_clear_error():
    if _supported():
        pytest.skip("this runtime records graphs")
    import torch_fl

    with pytest.raises(RuntimeError, match="cannot capture device graphs") as info:
        torch.flagos.Graph()
    assert repr(torch_fl.vendor().name) in str(info.value)
    assert str(torch_fl._C.runtime_name()) in str(info.value)
    assert not torch.flagos.is_current_stream_capturing()
    x = torch.ones(4, device="flagos")
    assert (x + 1).sum().item() == 8  # nothing half-initialised by the refused graph


def test_replay_sees_updated_inputs(capturing):
    x = torch.randn(64, 64, device="flagos")
    w = torch.randn(64, 64, device="flagos")
    for _ in range(2):  # warm up (cuBLAS handles, lazy state) outside the graph
        torch.nn.functional.gelu(x @ w).sum(0)
    torch.flagos.synchronize()
    g = torch.flagos.Graph()
    with torch.flagos.graph(g):
        assert torch.flagos.is_current_stream_capturing()
        out = torch.nn.functional.gelu(x @ w).sum(0)
    assert not torch.flagos.is_current_stream_capturing()
    assert out.device.type == "flagos"
    for _ in range(3):
        x.copy_(torch.randn(64, 64))
        g.replay()
        torch.testing.assert_close(out, torch.nn.functional.gelu(x @ w).sum(0))


def test_graphs_share_a_pool(capturing):
    a = torch.ones(1024, device="flagos")
    pool = torch.flagos.graph_pool_handle()
    g1, g2 = torch.flagos.Graph(), torch.flagos.Graph()
    with torch.flagos.graph(g1, pool=pool):
        b = a * 2
    with torch.flagos.graph(g2, pool=g1.pool()):
        c = b + 1
    a.fill_(3)
    g1.replay()
    g2.replay()
    assert c.cpu().eq(7).all()


def test_rng_advances_per_replay(capturing):
    x = torch.ones(4096, device="flagos")
    torch.nn.functional.dropout(x, 0.5)
    g = torch.flagos.Graph()
    with torch.flagos.graph(g):
        y = torch.nn.functional.dropout(x, 0.5)
    masks = []
    for _ in range(3):
        g.replay()
        masks.append(y.cpu().ne(0))
    assert not torch.equal(masks[0], masks[1]) and not torch.equal(masks[1], masks[2])
    share = masks[0].float().mean().item()
    assert 0.4 < share < 0.6, share


def test_default_stream_capture_is_refused(capturing):
    g = torch.flagos.Graph()
    with torch.flagos.stream(torch.flagos.default_stream()):
        with pytest.raises(RuntimeError, match="non-default stream"):
            g.capture_begin()


# An operator with a CPU kernel only: on flagos it reaches the CPU fallback. Defined once per
# process and never destroyed (a destroyed library leaves a stale op behind in torch.ops, which
# Inductor's decomposition tables trip over later).
_HOST_ONLY: list = []


def _host_only_op():
    if not _HOST_ONLY:
        lib = torch.library.Library("flagos_graph_test", "FRAGMENT")  # noqa: TOR901
        lib.define("host_only(Tensor x) -> Tensor")
        lib.impl("host_only", lambda x: x + 1, "CPU")
        _HOST_ONLY.append(lib)
    return torch.ops.flagos_graph_test.host_only


def test_cpu_fallback_inside_a_capture_names_the_operator(capturing):
    host_only = _host_only_op()
    x = torch.zeros(8, device="flagos")
    assert host_only(x).cpu().eq(1).all()  # eager: the CPU fallback
    g = torch.flagos.Graph()
    with pytest.raises(RuntimeError, match=r"host_only.*CPU fallback.*captured"):
        with torch.flagos.graph(g):
            host_only(x)
    assert not torch.flagos.is_current_stream_capturing()
    assert (x + 2).cpu().eq(2).all()  # the device is usable after the refused capture


def test_reduce_overhead_replays_a_flagos_graph(capturing):
    import torch._dynamo
    import torch._inductor.compile_fx  # noqa: F401 - Inductor first, as torch.compile imports it
    import torch_fl.compile
    from torch_fl.compile import graph_wrapping

    if not torch_fl.compile.graphs_supported():
        pytest.skip("the vendor records graphs but does not declare compile_graphs")
    torch._dynamo.reset()
    before = graph_wrapping.stats()["captured"]

    def f(x, w):
        return torch.nn.functional.silu(x @ w).sum(0)

    fn = torch.compile(f, mode="reduce-overhead")
    w = torch.randn(32, 32, device="flagos")
    for i in range(4):
        x = torch.randn(16, 32, device="flagos") + i
        out = fn(x, w)
        torch.testing.assert_close(out, f(x, w), rtol=1e-4, atol=1e-4)
    assert graph_wrapping.stats()["captured"] > before
    torch._dynamo.reset()
