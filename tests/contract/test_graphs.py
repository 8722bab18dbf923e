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
    if not _host_addressable() and _falls_back("bernoulli_.float"):
        # The draw runs on the CPU fallback here, which no stream records: refused by name.
        with pytest.raises(RuntimeError, match=r"bernoulli_.*CPU fallback.*captured"):
            with torch.flagos.graph(g):
                torch.nn.functional.dropout(x, 0.5)
        return
    from torch_fl.routing.python_backend import python_backends

    if _route("bernoulli_.float") in python_backends():
        # A Python kernel (FlagGems) takes the seed and offset on the host at the call: a replay
        # would repeat them, so the capture refuses the draw by name.
        with pytest.raises(RuntimeError, match=r"bernoulli_.*every replay would repeat"):
            with torch.flagos.graph(g):
                torch.nn.functional.dropout(x, 0.5)
        return
    with torch.flagos.graph(g):
        y = torch.nn.functional.dropout(x, 0.5)
    masks = []
    for _ in range(3):
        g.replay()
        masks.append(y.cpu().ne(0))
    assert not torch.equal(masks[0], masks[1]) and not torch.equal(masks[1], masks[2])
    share = masks[0].float().mean().item()
    assert 0.4 < share < 0.6, share


def _host_addressable() -> bool:
    import torch_fl

    return bool(
        int(torch_fl._C.runtime_capabilities()) & int(torch_fl._C.CAP_HOST_ADDRESSABLE_MEMORY)
    )


def _route(overload: str) -> str:
    """This vendor's route for ``aten::<overload>`` (its first backend)."""
    import torch_fl.routing

    for line in torch_fl.routing.explain(overload).splitlines():
        if line.strip().startswith("route: "):
            return line.strip()[len("route: ") :].split(",")[0].strip()
    return ""


def _falls_back(overload: str) -> bool:
    """Whether this vendor's route for ``aten::<overload>`` is the CPU fallback."""
    return _route(overload) == "cpu"


def test_layout_changing_copy_inside_a_capture(capturing):
    # A copy that changes the layout (transpose to contiguous): a device copy where the runtime's
    # memory is host-addressable, the backend's own, or the vendor has a copy kernel; elsewhere
    # core stages it through the host, which a capture refuses by name.
    import torch_fl

    x = torch.arange(16.0, device="flagos").reshape(4, 4)
    g = torch.flagos.Graph()
    device_copy = (
        _host_addressable() or _runtime().startswith("delegate:") or torch_fl._C.vendor_copies()
    )
    if not device_copy:
        with pytest.raises(RuntimeError, match=r"strided copy.*captured"):
            with torch.flagos.graph(g):
                x.t().contiguous()
        return
    with torch.flagos.graph(g):
        xt = x.t().contiguous()
    x.add_(1)
    g.replay()
    assert torch.equal(xt.cpu(), (torch.arange(16.0).reshape(4, 4) + 1).t())


def _runtime() -> str:
    import torch_fl

    return str(torch_fl._C.runtime_name())


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


def test_capture_records_without_running(capturing):
    # As on CUDA: captured work does not run at capture, and runs once per replay.
    x = torch.zeros(16, device="flagos")
    x.add_(0)  # warm up
    torch.flagos.synchronize()
    g = torch.flagos.Graph()
    with torch.flagos.graph(g):
        x.add_(1)
        y = x * 2
    assert x.cpu().eq(0).all()
    g.replay()
    assert x.cpu().eq(1).all() and y.cpu().eq(2).all()
    g.replay()
    g.replay()
    assert x.cpu().eq(3).all() and y.cpu().eq(6).all()


def _refused_in_capture(overload: str, fn) -> bool:
    """Where ``aten::<overload>`` runs on the CPU fallback of a runtime whose memory the host
    cannot address, a capture refuses it by name (no stream records host work): asserts that
    and answers True, so the caller tests the rest without it. False where it is captured."""
    if _host_addressable() or not _falls_back(overload):
        return False
    name = overload.partition(".")[0]
    with pytest.raises(RuntimeError, match=rf"{name}.*CPU fallback.*captured"):
        with torch.flagos.graph(torch.flagos.Graph()):
            fn()
    return True


def test_replay_on_another_stream_orders_with_it(capturing):
    a = torch.arange(1024, dtype=torch.float32, device="flagos")

    def scan(t):
        return t.cumsum(0)

    if _refused_in_capture("cumsum", lambda: scan(a)):

        def scan(t):  # another op that reads every element
            return t.sum(0, keepdim=True)

    g = torch.flagos.Graph()
    with torch.flagos.graph(g):
        b = scan(a * 2)
    side = torch.flagos.Stream()
    side.wait_stream(torch.flagos.current_stream())
    with torch.flagos.stream(side):
        a.fill_(1)  # queued before the replay on the same stream
        g.replay()
        got = b.clone()
    torch.flagos.current_stream().wait_stream(side)
    expected = scan(torch.ones(1024) * 2)
    torch.testing.assert_close(got.cpu(), expected)


def test_whole_training_step_replays_as_eager(capturing):
    # torch.cuda's whole-network capture recipe: static input/target, forward, backward and
    # optimizer step in one graph; every replay matches the same step run eagerly.
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)
    ).to("flagos")
    reference = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)
    )
    reference.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    loss_fn = torch.nn.MSELoss()
    static_x = torch.randn(8, 16, device="flagos")
    static_y = torch.randn(8, 4, device="flagos")
    side = torch.flagos.Stream()
    side.wait_stream(torch.flagos.current_stream())
    with torch.flagos.stream(side):  # warm up on a side stream, as CUDA's recipe does
        for _ in range(2):
            opt.zero_grad(set_to_none=True)
            loss_fn(model(static_x), static_y).backward()
    torch.flagos.current_stream().wait_stream(side)
    # The warm-up stepped nothing (no opt.step); the reference starts from the same weights.
    g = torch.flagos.Graph()
    opt.zero_grad(set_to_none=True)
    with torch.flagos.graph(g):
        static_loss = loss_fn(model(static_x), static_y)
        static_loss.backward()
        opt.step()
    for _ in range(3):
        x, y = torch.randn(8, 16), torch.randn(8, 4)
        static_x.copy_(x)
        static_y.copy_(y)
        g.replay()
        ref_opt.zero_grad()
        ref_loss = loss_fn(reference(x), y)
        ref_loss.backward()
        ref_opt.step()
        torch.testing.assert_close(static_loss.cpu(), ref_loss.detach(), rtol=1e-5, atol=1e-5)
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "call, what",
    [
        (lambda x: x.sum().item(), r"item\(\)|captur"),
        (lambda x: x.cpu(), r"copy to host memory|captur"),
        (lambda x: torch.flagos.synchronize(), r"captur"),
        (lambda x: torch.nonzero(x), r"nonzero.*captur|captur"),
    ],
    ids=["item", "cpu", "synchronize", "nonzero"],
)
def test_host_waits_inside_a_capture_are_refused(capturing, call, what):
    x = torch.ones(8, device="flagos")
    g = torch.flagos.Graph()
    with pytest.raises(RuntimeError, match=what):
        with torch.flagos.graph(g):
            y = x + 1
            call(y)
    assert not torch.flagos.is_current_stream_capturing()
    g.reset()
    assert (x * 3).cpu().eq(3).all()  # the device works after the refused capture


def test_reset_returns_the_pool(capturing):
    x = torch.ones(1 << 18, device="flagos")
    torch.flagos.synchronize()
    g = torch.flagos.Graph()
    with torch.flagos.graph(g):
        y = (x * 2).exp()
    del y
    g.replay()
    held = torch.flagos.memory_reserved()
    g.reset()
    torch.flagos.empty_cache()
    assert torch.flagos.memory_reserved() < held


def test_free_of_a_block_the_capture_used_does_not_break_it(capturing):
    # A tensor made outside the capture, used on the capturing stream (record_stream) and freed
    # inside it: its free is ordered after the capture, not recorded into it.
    g = torch.flagos.Graph()
    x = torch.ones(4096, device="flagos")
    with torch.flagos.graph(g):
        y = x * 2
        x.record_stream(torch.flagos.current_stream())
        del x
        y.add_(1)  # allocates nothing; a later allocation processes the deferred free
        torch.empty(4096, device="flagos")
    g.replay()
    torch.flagos.synchronize()
    w = torch.ones(4096, device="flagos")  # the freed block is usable again
    assert (w + 1).cpu().eq(2).all()


def test_accelerator_graph_is_a_flagos_graph():
    if not hasattr(torch.accelerator, "Graph"):
        pytest.skip(f"torch {torch.__version__} has no torch.accelerator.Graph (torch >= 2.12)")
    if not _supported():
        with pytest.raises(RuntimeError, match="cannot capture device graphs"):
            torch.accelerator.Graph()
        return
    x = torch.zeros(64, device="flagos")
    g = torch.accelerator.Graph()
    with torch.Stream(device="flagos"), g:
        x += 1
    assert x.cpu().eq(0).all()
    g.replay()
    g.replay()
    assert x.cpu().eq(2).all()
    assert isinstance(g.pool(), tuple)


def test_views_lists_and_out_arguments_replay(capturing):
    x = torch.zeros(4, 4, device="flagos")
    ps = [torch.full((8,), float(i), device="flagos") for i in range(5)]
    gs = [torch.ones(8, device="flagos") for _ in range(5)]
    a, b = torch.ones(3, device="flagos"), torch.full((2,), 2.0, device="flagos")
    out = torch.empty(5, device="flagos")
    # cat with out= and a multi-output reduction, where the vendor serves them on the device.
    stacked = torch.stack([a, a])
    refused = [
        _refused_in_capture("cat.out", lambda: torch.cat([a, b], out=out)),
        _refused_in_capture("stack", lambda: torch.stack([a, a])),
        _refused_in_capture("max.dim", lambda: stacked.max(dim=0)),
    ]
    g = torch.flagos.Graph()
    with torch.flagos.graph(g):
        x[1].add_(1)  # in place on views
        x[:, 2].mul_(3)
        torch._foreach_add_(ps, gs, alpha=0.5)  # list operators, in place and functional
        doubled = torch._foreach_mul(ps, 2.0)
        if not any(refused):
            torch.cat([a, b], out=out)
            values, indices = torch.stack([a, a]).max(dim=0)
    a.fill_(7)
    g.replay()
    g.replay()
    ref = torch.zeros(4, 4)
    for _ in range(2):
        ref[1].add_(1)
        ref[:, 2].mul_(3)
    assert torch.equal(x.cpu(), ref)
    for i, (p, d) in enumerate(zip(ps, doubled, strict=True)):
        assert p.cpu().eq(i + 1).all() and d.cpu().eq(2 * (i + 1)).all()
    if not any(refused):
        assert out.cpu().tolist() == [7, 7, 7, 2, 2]
        assert values.cpu().eq(7).all() and indices.cpu().eq(0).all()


def test_threads_capture_their_own_graphs(capturing):
    import threading

    errors: list[str] = []
    # torch.flagos.graph, as torch.cuda.graph, synchronizes the device on entry, and CUDA refuses
    # a device-wide wait while another thread's stream captures (it would wait for that stream;
    # the H200 answered cudaErrorStreamCaptureUnsupported and invalidated the other capture):
    # the captures take turns, the graphs are each thread's own and replay concurrently.
    capture_turn = threading.Lock()

    def work(k: int) -> None:
        try:
            x = torch.full((64,), float(k), device="flagos")
            g = torch.flagos.Graph()
            side = torch.flagos.Stream()
            with capture_turn:
                with torch.flagos.graph(g, stream=side, capture_error_mode="thread_local"):
                    y = x * 2 + 1
            for _ in range(3):
                g.replay()
            assert y.cpu().eq(2 * k + 1).all()
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
