"""torch.compile on flagos: compiled matches eager, results stay on flagos, no graph breaks.

Every vendor runs this unchanged. Which Inductor scheduling compiles flagos graphs is the vendor's
declared choice (``torch_fl.compile.scheduling()``: C++ on host-addressable devices such as sim,
Triton on vendors whose Triton targets their device); a vendor with neither runs compiled graphs
on its routed kernels. Tests of the generated code skip with the reason where there is none.
Compiles are slow on small CI machines, so the models are tiny and few.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
from _cnn import SmallCNN
from torch import nn
from torch_fl.conformance import tolerances

pytestmark = pytest.mark.compile

TOL = tolerances.FLOAT32_STEPS.kwargs()


# Tests of Inductor's generated code (kernels, wrapper, tuning tables): they skip, saying why,
# where the vendor has no code generation.
needs_codegen = pytest.mark.usefixtures("vendor_codegen")


@pytest.fixture
def dynamo(flagos):
    """torch._dynamo after a reset, with graph-break counters cleared."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    yield torch._dynamo
    torch._dynamo.reset()


def graph_breaks() -> int:
    from torch._dynamo.utils import counters

    return sum(counters["graph_break"].values())


def _on_flagos(*tensors: torch.Tensor) -> None:
    for t in tensors:
        assert t.device.type == "flagos", f"{t.device} is not flagos"


def _assert_same_grads(eager: nn.Module, compiled_model: nn.Module) -> None:
    """The compiled copy's parameter gradients are on flagos and equal to eager's."""
    for (name, pe), pc in zip(eager.named_parameters(), compiled_model.parameters(), strict=True):
        assert pc.grad is not None, name
        _on_flagos(pc.grad)
        torch.testing.assert_close(
            pc.grad, pe.grad, **tolerances.COMPILED_BLOCK_GRAD.kwargs(), msg=name
        )


@needs_codegen
def test_registered_at_import(flagos):
    import torch._inductor.compile_fx  # noqa: F401 - completes the registration, as compile does
    import torch_fl.compile
    from torch._dynamo.device_interface import get_interface_for_device
    from torch._inductor.codegen.common import get_scheduling_for_device

    assert get_interface_for_device("flagos").__name__ == "FlagosInterface"
    kind = torch_fl.compile.scheduling()
    scheduling = get_scheduling_for_device("flagos")
    expected = {"cpp": "CppScheduling", "triton": "TritonScheduling"}.get(kind)
    assert expected is not None, f"vendor cannot compile (scheduling {kind!r})"
    assert issubclass(
        scheduling,
        getattr(__import__(f"torch._inductor.codegen.{kind}", fromlist=[expected]), expected),
    )
    assert torch_fl.compile.registered() == {"dynamo", "inductor"}


def test_pointwise_chain(dynamo):
    def f(x, y):
        return torch.sigmoid(x * 2.0 + y).tanh() - torch.abs(y) / (1.0 + x.exp())

    x = torch.randn(33, 17, device="flagos")
    y = torch.randn(33, 17, device="flagos")
    out = torch.compile(f)(x, y)
    _on_flagos(out)
    torch.testing.assert_close(out, f(x, y), **TOL)
    assert graph_breaks() == 0


def test_reductions(dynamo):
    def f(x):
        return x.sum(0), x.amax(1), x.mean(), torch.softmax(x, dim=-1), x.var(1)

    x = torch.randn(40, 70, device="flagos")
    got = torch.compile(f)(x)
    _on_flagos(*got)
    for g, e in zip(got, f(x), strict=True):
        torch.testing.assert_close(g, e, **TOL)


def test_matmul_bias_activation(dynamo):
    lin = nn.Linear(32, 48).to("flagos")

    def f(x):
        return F.gelu(lin(x)) + F.relu(x @ lin.weight.t() + lin.bias)

    x = torch.randn(16, 32, device="flagos")
    out = torch.compile(f)(x)
    _on_flagos(out)
    torch.testing.assert_close(out, f(x), **TOL)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@needs_codegen
def test_matmul_template_heuristics_found(dynamo):
    """Template selection for mm/addmm on flagos (max-autotune GEMMs) finds Inductor's heuristics
    for the device type flagos shares tuning with: without them Inductor logged "No template
    heuristic found ... device_type=flagos" and left the Triton templates without configs."""
    import torch._inductor.config as inductor_config
    from torch._dynamo.utils import counters

    patches: dict[str, object] = {"max_autotune_gemm": True, "force_disable_caches": True}
    if hasattr(inductor_config.test_configs, "max_mm_configs"):
        patches["test_configs.max_mm_configs"] = 2  # keep GPU autotuning short
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 16)).to("flagos")
    x = torch.randn(8, 32, device="flagos")
    records = _Records()
    logger = logging.getLogger("torch._inductor")  # the registry logs under it
    logger.addHandler(records)
    try:
        with inductor_config.patch(patches), torch.no_grad():
            out = torch.compile(model)(x)
    finally:
        logger.removeHandler(records)
    # A lowering really ran (no cache hit), so the lookups were made.
    assert sum(counters["aten_mm_info"].values()) >= 2, dict(counters["aten_mm_info"])
    missing = [m for m in records.messages if "No template heuristic found" in m]
    assert not missing, missing[0][:400]
    _on_flagos(out)
    with torch.no_grad():
        torch.testing.assert_close(out, model(x), **TOL)


@pytest.mark.vendor_neutral  # CPU-side compile; CI runs it on sim only
def test_cpu_max_autotune_gemms_compile_beside_flagos(flagos):
    """A cpu graph with max-autotune GEMMs compiles in a process where flagos registered with
    Inductor first. A fresh process: before torch 2.12 Inductor fills its device-op table on the
    first lookup, only while it is empty, and an earlier test may have filled it already."""
    code = textwrap.dedent(
        """
        import torch
        import torch._inductor.compile_fx  # flagos registers with Inductor here
        import torch._inductor.config as inductor_config
        from torch import nn

        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        x = torch.randn(4, 8)
        patches = {"max_autotune_gemm": True, "force_disable_caches": True}
        with inductor_config.patch(patches), torch.no_grad():
            out = torch.compile(model)(x)
            torch.testing.assert_close(out, model(x))
        print("COMPILED", out.device)
        """
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert "COMPILED cpu" in r.stdout, r.stdout + r.stderr[-4000:]


@needs_codegen
def test_tuning_tables_are_the_tuning_device_types(flagos):
    """Inductor's device-type-keyed tuning answers for flagos what it answers for
    ``tuning_device_type()`` (the Triton target's type, or cpu under C++ scheduling)."""
    import torch._inductor.compile_fx  # noqa: F401 - completes the registration, as compile does
    import torch_fl.compile
    from torch._inductor.choices import InductorChoices

    source = torch_fl.compile.tuning_device_type()
    assert source is not None
    assert type(InductorChoices().get_config_heuristics("flagos")) is type(
        InductorChoices().get_config_heuristics(source)
    )
    registry = pytest.importorskip("torch._inductor.template_heuristics.registry")
    table = registry._TEMPLATE_HEURISTIC_REGISTRY
    keys = [k for k in table if k[1] == source]
    assert keys, f"Inductor registers no template heuristics for {source!r}"
    for template, _, op in keys:
        assert table.get((template, "flagos", op)) is table[(template, source, op)], (template, op)
        op_name = op or "mm"
        assert type(registry.get_template_heuristic(template, "flagos", op_name)) is type(
            registry.get_template_heuristic(template, source, op_name)
        ), (template, op_name)


class Block(nn.Module):
    """A GPT-style pre-norm block: causal self-attention and an MLP."""

    def __init__(self, dim: int = 32, heads: int = 4, sdpa: bool = False) -> None:
        super().__init__()
        self.heads = heads
        self.sdpa = sdpa
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=-1)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / (c // self.heads) ** 0.5)
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            y = att.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v
        y = y.transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


@pytest.mark.parametrize("attention", ["explicit", "sdpa"])
def test_transformer_block_forward_backward(dynamo, attention):
    torch.manual_seed(0)
    eager = Block(sdpa=attention == "sdpa").to("flagos")
    compiled_model = Block(sdpa=attention == "sdpa").to("flagos")
    compiled_model.load_state_dict(eager.state_dict())
    step = torch.compile(compiled_model)
    x = torch.randn(2, 8, 32, device="flagos")

    out_e = eager(x)
    out_c = step(x)
    _on_flagos(out_c)
    torch.testing.assert_close(out_c, out_e, **tolerances.COMPILED_BLOCK.kwargs())
    out_e.square().mean().backward()
    out_c.square().mean().backward()
    _assert_same_grads(eager, compiled_model)
    assert graph_breaks() == 0, "a fully traceable block must compile to one graph"


# scaled_dot_product_attention: every Hugging Face model calls it. The kernel SDPA picks on flagos is
# asked of the vendor at run time (_fused_sdp_choice); under tracing that choice must come from the
# operands' metadata, not from a dispatcher call recorded in the graph or from their memory.
_FUSED_SDPA_OPS = {
    "flash_attention": (
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_flash_attention",
    ),
    "efficient_attention": ("_scaled_dot_product_efficient_attention",),
    "cudnn_attention": ("_scaled_dot_product_cudnn_attention",),
    "overrideable": ("_scaled_dot_product_fused_attention_overrideable",),
}
_SDPA_CASES = {
    "causal": {"is_causal": True},
    "mask": {"mask": True},
    "plain": {},
    "gqa": {"enable_gqa": True},
}


def _sdpa_inputs(dtype: torch.dtype, case: str, heads_kv: int = 4):
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 4, 8, 16, generator=g, dtype=dtype)
    kv_heads = 2 if case == "gqa" else heads_kv
    k = torch.randn(2, kv_heads, 8, 16, generator=g, dtype=dtype)
    v = torch.randn(2, kv_heads, 8, 16, generator=g, dtype=dtype)
    mask = (torch.rand(8, 8, generator=g) > 0.3) | torch.eye(8, dtype=torch.bool)
    return q, k, v, mask


def _sdpa(case: str):
    kwargs = dict(_SDPA_CASES[case])
    use_mask = kwargs.pop("mask", False)

    def f(q, k, v, mask):
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask if use_mask else None, **kwargs
        )

    return f


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", list(_SDPA_CASES))
def test_sdpa_forward_backward(dynamo, dtype, case):
    import torch_fl.testing

    f = _sdpa(case)
    q, k, v, mask = _sdpa_inputs(dtype, case)
    leaves_c = [t.to("flagos").requires_grad_() for t in (q, k, v)]
    leaves_r = [t.clone().requires_grad_() for t in (q, k, v)]
    out = torch.compile(f)(*leaves_c, mask.to("flagos"))
    ref = f(*leaves_r, mask)
    _on_flagos(out)
    if dtype == torch.float32:
        tol, grad_tol = TOL, tolerances.COMPILED_BLOCK_GRAD.kwargs()
    else:
        tol = grad_tol = tolerances.for_lower_precision(
            dtype, cpu_kernels=torch_fl.testing.cpu_kernels()
        ).kwargs()
    torch.testing.assert_close(out.cpu(), ref, **tol)
    grad = torch.randn(ref.shape, generator=torch.Generator().manual_seed(5), dtype=dtype)
    out.backward(grad.to("flagos"))
    ref.backward(grad)
    for name, a, b in zip("qkv", leaves_c, leaves_r, strict=True):
        assert a.grad is not None, name
        _on_flagos(a.grad)
        torch.testing.assert_close(a.grad.cpu(), b.grad, **grad_tol, msg=name)


def test_sdpa_without_grad_and_dynamic_shapes(dynamo):
    f = _sdpa("causal")
    fn = torch.compile(f, dynamic=True)
    with torch.no_grad():
        for seq in (8, 12, 20):
            q = torch.randn(1, 2, seq, 16)
            out = fn(q.to("flagos"), q.to("flagos"), q.to("flagos"), None)
            _on_flagos(out)
            torch.testing.assert_close(out.cpu(), f(q, q, q, None), **TOL)


def test_sdpa_traced_kernel_is_the_eager_choice(flagos):
    """Tracing asks the vendor's choice on the operands' geometry: the graph holds the fused kernel
    eager mode runs (or the math decomposition where eager runs math), never a call of
    _fused_sdp_choice itself (an int node the joint-graph partitioner rejects)."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.utils._python_dispatch import TorchDispatchMode

    class Called(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.names: set[str] = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.add(func._schema.name.split("::")[-1])
            return func(*args, **(kwargs or {}))

    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    q = torch.randn(2, 4, 8, 16, device="flagos")
    fused = {op for ops in _FUSED_SDPA_OPS.values() for op in ops}
    with Called() as eager:
        f(q, q, q)
    graph = make_fx(f, tracing_mode="fake")(q, q, q)
    called = {
        str(n.target).split(".")[1]
        for n in graph.graph.nodes
        if n.op == "call_function"
        if str(n.target).startswith("aten.")
    }
    assert "_fused_sdp_choice" not in called, sorted(called)
    assert called & fused == eager.names & fused, (
        f"eager runs {sorted(eager.names & fused) or 'math'}; the traced graph calls "
        f"{sorted(called)}"
    )


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("mode", ["inference", "training"])
def test_compiled_cnn(dynamo, layout, mode):
    """The small CNN compiled (Inductor's layout optimisation makes its convolutions channels_last)
    matches eager: what a flagos convolution returns has the strides its fake kernel predicts."""
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    torch.manual_seed(0)
    eager = SmallCNN().to("flagos", memory_format=fmt).train(mode == "training")
    compiled_model = SmallCNN().to("flagos", memory_format=fmt).train(mode == "training")
    compiled_model.load_state_dict(eager.state_dict())
    x = torch.randn(4, 3, 16, 16, device="flagos").to(memory_format=fmt)
    step = torch.compile(compiled_model)
    if mode == "inference":
        with torch.no_grad():
            out_c, out_e = step(x), eager(x)
        _on_flagos(out_c)
        torch.testing.assert_close(out_c, out_e, **tolerances.COMPILED_BLOCK.kwargs())
        return
    out_c, out_e = step(x), eager(x)
    _on_flagos(out_c)
    torch.testing.assert_close(out_c, out_e, **tolerances.COMPILED_BLOCK.kwargs())
    out_c.square().mean().backward()
    out_e.square().mean().backward()
    _assert_same_grads(eager, compiled_model)
    for (name, be), bc in zip(eager.named_buffers(), compiled_model.buffers(), strict=True):
        torch.testing.assert_close(bc, be, **tolerances.COMPILED_BLOCK.kwargs(), msg=name)
    assert graph_breaks() == 0


_CONV_LAYOUTS = [(1, False, False)] + [
    (dims, input_cl, weight_cl)
    for dims in (2, 3)
    for input_cl in (False, True)
    for weight_cl in (False, True)
]


@pytest.mark.parametrize(
    ("dims", "input_cl", "weight_cl"),
    _CONV_LAYOUTS,
    ids=[
        f"{d}d-input_{'cl' if i else 'dense'}-weight_{'cl' if w else 'dense'}"
        for d, i, w in _CONV_LAYOUTS
    ],
)
def test_convolution_strides_are_the_fake_kernels(flagos, dims, input_cl, weight_cl):
    """Eager convolution and its gradients on flagos have the strides PyTorch's fake kernel
    predicts for them, whichever layouts the operands have (compiled graphs assert them)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    fmt = {2: torch.channels_last, 3: torch.channels_last_3d}.get(dims)
    shape = (2, 4) + (6,) * dims
    x = torch.randn(shape, device="flagos")
    w = torch.randn((5, 4) + (3,) * dims, device="flagos")
    if input_cl:
        x = x.to(memory_format=fmt)
    if weight_cl:
        w = w.to(memory_format=fmt)
    x.requires_grad_()
    w.requires_grad_()

    def run(xi, wi):
        out = torch.ops.aten.convolution(
            xi, wi, None, [1] * dims, [0] * dims, [1] * dims, False, [0] * dims, 1
        )
        grads = torch.ops.aten.convolution_backward(
            torch.ones_like(out),
            xi,
            wi,
            None,
            [1] * dims,
            [0] * dims,
            [1] * dims,
            False,
            [0] * dims,
            1,
            [True, True, False],
        )
        return out, grads[0], grads[1]

    with torch.no_grad():
        got = run(x, w)
        native = run(x.cpu(), w.cpu())
        with FakeTensorMode() as mode:
            predicted = run(mode.from_tensor(x), mode.from_tensor(w))
    names = ("output", "grad_input", "grad_weight")
    for name, g, p in zip(names, got, predicted, strict=True):
        assert g.stride() == p.stride(), f"{name}: {g.stride()} != predicted {p.stride()}"
    # The layout CPU (mkldnn) and CUDA (cuDNN) give the same operands: no copy into another one.
    for name, g, n in zip(names, got, native, strict=True):
        assert g.stride() == n.stride(), f"{name}: {g.stride()} != CPU's {n.stride()}"


def test_compiled_code_cache_names_the_build_and_vendor(dynamo):
    """Inductor's FX graph cache key holds flagos's device pass uuid: code compiled by another
    torch-fl build or for another vendor's codegen is never loaded as if it fitted."""
    from torch._inductor.codegen import common
    from torch_fl.compile import choice

    if choice.scheduling() is None:
        pytest.skip(f"vendor {choice.vendor_name()!r} generates no code (routed graphs)")
    torch.compile(lambda t: t * 3)(torch.ones(2, device="flagos"))
    device_pass = common.get_custom_backend_pass_for_device("flagos")
    assert device_pass is not None
    uuid = device_pass.uuid()
    assert uuid.startswith(f"{choice.vendor_name()}:{choice.scheduling()}:"), uuid
    assert len(uuid.rsplit(":", 1)[1]) == 64, uuid


def test_dynamic_shapes(dynamo):
    from torch._dynamo.testing import CompileCounterWithBackend

    counter = CompileCounterWithBackend("inductor")

    def f(x):
        return (x.relu() * x.shape[0]).sum(-1)

    fn = torch.compile(f, backend=counter, dynamic=True)
    for n in (5, 9, 12):
        x = torch.randn(n, 7, device="flagos")
        out = fn(x)
        _on_flagos(out)
        torch.testing.assert_close(out, f(x), **TOL)
    assert counter.frame_count == 1, "dynamic shapes must not recompile per size"


def test_graph_breaks_are_counted(dynamo):
    def f(x):
        y = x * 2
        if y.sum().item() > 0:  # data-dependent Python branch: a graph break
            return y + 1
        return y - 1

    x = torch.randn(8, device="flagos")
    out = torch.compile(f)(x)
    torch.testing.assert_close(out, f(x))
    assert graph_breaks() >= 1


def test_compiled_kernels_wait_for_stream_work(dynamo, flagos):
    # An asynchronous host-to-device copy on the current stream, then a compiled graph reading
    # the destination: the compiled kernels must see the copied values (stream order).
    f = torch.compile(lambda x: x * 3.0 + 1.0)
    dst = torch.empty(1 << 16, device="flagos")
    f(dst)  # compile first
    src = torch.arange(1 << 16, dtype=torch.float32).pin_memory()
    dst.copy_(src, non_blocking=True)
    out = f(dst)
    torch.testing.assert_close(out.cpu(), src * 3.0 + 1.0)


def test_reduce_overhead_mode(dynamo):
    def f(x, w):
        return F.silu(x @ w).sum(0)

    x = torch.randn(16, 24, device="flagos")
    w = torch.randn(24, 24, device="flagos")
    fn = torch.compile(f, mode="reduce-overhead")
    for _ in range(3):  # warm-up runs, then the replayed (or plain) run
        out = fn(x, w)
    _on_flagos(out)
    torch.testing.assert_close(out, f(x, w), **TOL)


def test_reduce_overhead_captures_graphs(dynamo):
    import torch_fl.compile
    from torch_fl.compile import graph_wrapping

    if not torch_fl.compile.graphs_supported():
        pytest.skip(
            f"vendor {torch_fl.vendor().name!r} does not declare compile_graphs or its runtime "
            "records no device graphs: mode='reduce-overhead' runs its compiled code without them"
        )
    before = graph_wrapping.stats()
    fn = torch.compile(lambda x: (x * 2).relu(), mode="reduce-overhead")
    x = torch.randn(64, device="flagos")
    for _ in range(3):
        out = fn(x)
    torch.testing.assert_close(out, (x * 2).relu())
    after = graph_wrapping.stats()
    assert after["captured"] == before["captured"] + 1, after
    assert after["without_graphs"] == before["without_graphs"], after


def test_triton_kernels_run_on_flagos_current_stream(dynamo, flagos):
    import torch_fl.compile
    from torch._inductor.utils import run_and_get_code

    if torch_fl.compile.scheduling() != "triton":
        pytest.skip(
            f"vendor {torch_fl.vendor().name!r} compiles with "
            f"{torch_fl.compile.scheduling()!r} scheduling, not Triton"
        )
    side = flagos.Stream()
    x = torch.randn(4096, device="flagos")
    with flagos.stream(side):
        out, code = run_and_get_code(torch.compile(lambda t: t.sin() * 2 + 1), x)
        side.synchronize()
    assert any("triton" in c for c in code)
    torch.testing.assert_close(out, x.sin() * 2 + 1, **TOL)


@needs_codegen
def test_buffers_are_allocated_on_their_device(dynamo, flagos):
    """Inductor's buffers on flagos come from flagos' direct allocator (as ``empty_strided_cuda``
    on CUDA), on the device of the graph (the last one: another than the current where the vendor
    has two), with the strides Inductor planned."""
    from torch._inductor.utils import run_and_get_code

    def f(x):
        y = (x * 2).t().contiguous()  # a buffer, then a strided output
        return y.sum(1), y.t() + 1

    device = torch.device("flagos", flagos.device_count() - 1)
    x = torch.randn(19, 7, device=device)
    current = flagos.current_device()
    (total, back), code = run_and_get_code(torch.compile(f), x)
    assert flagos.current_device() == current  # the graph's device guard restored it
    assert not any("torch.flagos.device(" in c for c in code), code  # the generic guard
    allocations = [ln for c in code for ln in c.splitlines() if "empty_strided" in ln and "=" in ln]
    assert any("= empty_strided_flagos(" in ln for ln in allocations), code
    assert not any("= empty_strided(" in ln for ln in allocations), allocations  # the generic one
    for got, want in zip((total, back), f(x), strict=True):
        assert got.device == device
        assert got.stride() == want.stride()
        torch.testing.assert_close(got, want, **TOL)


def test_vendor_without_codegen_runs_routed_kernels(dynamo):
    """A vendor without Inductor code generation still runs compiled code: AOTAutograd's graphs,
    each operator on the vendor's routed kernels, eager's results, one notice naming the vendor."""
    import torch_fl.compile
    from torch_fl.compile import routed_graphs

    if torch_fl.compile.scheduling() is not None:
        pytest.skip(
            f"vendor {torch_fl.vendor().name!r} compiles with "
            f"{torch_fl.compile.scheduling()!r} scheduling"
        )
    torch.manual_seed(0)
    lin = nn.Linear(16, 8).to("flagos")
    x = torch.randn(4, 16, device="flagos")
    before = routed_graphs.compiled_graphs()
    out = torch.compile(lambda t: F.gelu(lin(t)).sin() + 1, fullgraph=True)(x)
    assert routed_graphs.compiled_graphs() == before + 1
    _on_flagos(out)
    torch.testing.assert_close(out, F.gelu(lin(x)).sin() + 1, rtol=0, atol=0)  # eager's kernels
    out.sum().backward()
    assert lin.weight.grad is not None
    _on_flagos(lin.weight.grad)


def test_fullgraph_compile_first_in_process(flagos):
    """The first compilation of a process may be a CPU-only fullgraph one: flagos' registration
    completes inside it (an import hook) and must not disturb it or the flagos compiles after."""
    code = textwrap.dedent(
        """
        import torch
        out = torch.compile(lambda x: x * 3, fullgraph=True)(torch.ones(2))
        assert out.tolist() == [3.0, 3.0], out
        x = torch.arange(4.0, device="flagos")
        got = torch.compile(lambda t: t * 2 + 1, fullgraph=True)(x)
        assert got.device.type == "flagos" and got.cpu().tolist() == [1.0, 3.0, 5.0, 7.0], got
        print("COMPILED")
        """
    )
    _run_child(code, "COMPILED")


def _run_child(code: str, marker: str) -> None:
    """Runs ``code`` in a fresh interpreter; it must print ``marker``."""
    r = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert marker in r.stdout, r.stdout + r.stderr[-4000:]


def test_aot_inductor_is_refused_by_name(flagos):
    """Inductor's C++ wrapper (AOTInductor's, and config.cpp_wrapper's) has no flagos device: the
    refusal names the vendor and the way out, instead of "Device flagos not supported". In a child:
    a lowering that raises leaves the model's parameters referenced inside torch (about 1 KiB), which
    would disturb this process's memory accounting tests."""
    code = textwrap.dedent(
        """
        import re
        import torch, torch_fl
        from torch import nn

        def refusal(call):
            try:
                call()
            except Exception as e:  # Inductor wraps it (InductorError, BackendCompilerFailed)
                return str(e)
            raise AssertionError("not refused")

        model = nn.Linear(8, 4).to("flagos")
        x = torch.randn(3, 8, device="flagos")
        exported = torch.export.export(model, (x,))
        aot = refusal(lambda: torch._inductor.aot_compile(exported.module(), (x,)))
        vendor = torch_fl.vendor().name
        assert re.search(rf"AOTInductor.*vendor '{vendor}'", aot) and "ep.module()" in aot, aot
        cpp = refusal(lambda: torch.compile(model, options={"cpp_wrapper": True})(x))
        assert "C++ wrapper" in cpp, cpp
        torch.testing.assert_close(exported.module()(x).cpu(), model(x).cpu())  # the way out
        print("REFUSED")
        """
    )
    _run_child(code, "REFUSED")
