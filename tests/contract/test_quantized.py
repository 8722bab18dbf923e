"""Quantized tensors on flagos (qint8, quint8, qint32; per-tensor and per-channel) against CPU.

A quantized flagos tensor is its integer representation in flagos memory plus a quantizer. Making
one, views, ``int_repr``, ``clone``, ``copy_`` and ``resize_`` run on flagos (views share its
memory); the quantized operators that compute (``dequantize``, quantized ``add``, activations,
comparisons, pooling, ...) run where flagos memory is another backend's on that backend's kernels
over aliases (``box:cpu`` on sim, ``box:cuda`` on the cuda vendor where CUDA has the kernel),
else on CPU copies with CPU's kernels counted as CPU fallbacks; CPU's kernels give CPU's answers
exactly. The quantize operators on float flagos tensors take their routes.
PyTorch deprecates these tensor types; their creation warns.
"""

from __future__ import annotations

import io

import pytest
import torch

pytestmark = [
    pytest.mark.quantized,
    pytest.mark.usefixtures("flagos"),
    pytest.mark.filterwarnings("ignore:.*quantized tensor creation functions.*:UserWarning"),
    # torch.save of a quantized tensor goes through TypedStorage, on CPU as well.
    pytest.mark.filterwarnings("ignore:TypedStorage is deprecated:UserWarning"),
]

X = [1.0, 2.0, -3.0, 0.5, 7.25, -0.4, 0.06, -12.7, 3.3, 0.0, 1.15, -1.15]


def _x(device: str = "cpu") -> torch.Tensor:
    return torch.tensor(X, device=device).reshape(3, 4)


def _per_tensor(device: str, dtype: torch.dtype = torch.qint8) -> torch.Tensor:
    return torch.quantize_per_tensor(_x(device), 0.1, 3, dtype)


def _per_channel(device: str, dtype: torch.dtype = torch.quint8) -> torch.Tensor:
    scales = torch.tensor([0.1, 0.05, 0.2], dtype=torch.float64, device=device)
    zero_points = torch.tensor([10, 0, 100], device=device)
    return torch.quantize_per_channel(_x(device), scales, zero_points, 0, dtype)


def _moved(make, *args) -> tuple[torch.Tensor, torch.Tensor]:
    """(the CPU quantized tensor moved to flagos, the CPU one): the same integers on both sides,
    whatever a device's quantize kernel would round."""
    want = make("cpu", *args)
    return want.to("flagos"), want


def _same(got: torch.Tensor, want: torch.Tensor, steps: int = 0) -> None:
    """Same quantized value as CPU: dtype, scheme, parameters, shape, strides and integers (within
    ``steps`` quantization steps)."""
    assert got.device.type == "flagos", got.device
    assert got.is_quantized and want.is_quantized
    assert got.dtype == want.dtype and got.qscheme() == want.qscheme()
    assert got.shape == want.shape and got.stride() == want.stride()
    if want.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        assert got.q_scale() == want.q_scale() and got.q_zero_point() == want.q_zero_point()
    else:
        scales, zero_points = got.q_per_channel_scales(), got.q_per_channel_zero_points()
        # Where the tensor is, as on CUDA: a CPU kernel never reads flagos memory through them.
        assert scales.device == got.device and zero_points.device == got.device
        torch.testing.assert_close(scales.cpu(), want.q_per_channel_scales(), rtol=0, atol=0)
        assert torch.equal(zero_points.cpu(), want.q_per_channel_zero_points())
        assert got.q_per_channel_axis() == want.q_per_channel_axis()
    diff = got.int_repr().cpu().long() - want.int_repr().long()
    assert diff.abs().max().item() <= steps, (got.int_repr(), want.int_repr())


#: A quantize kernel on the device (CUDA's, on the cuda vendor's box:cuda route) may round a value
#: lying on a half step the other way from CPU's (1.15 / 0.1 is 11.5 in float arithmetic; CUDA
#: gives 11, CPU 12): where flagos quantizes, its answer may be one step from CPU's.
DEVICE_ROUNDING = 1

MAKERS = {
    "per_tensor_qint8": lambda d: _per_tensor(d, torch.qint8),
    "per_tensor_quint8": lambda d: _per_tensor(d, torch.quint8),
    "per_tensor_qint32": lambda d: _per_tensor(d, torch.qint32),
    "per_channel_quint8": lambda d: _per_channel(d, torch.quint8),
    "per_channel_qint8": lambda d: _per_channel(d, torch.qint8),
    "tensor_qparams": lambda d: torch.quantize_per_tensor(
        _x(d), torch.tensor(0.25, device=d), torch.tensor(2, device=d), torch.quint8
    ),
    "from_int_repr": lambda d: torch._make_per_tensor_quantized_tensor(
        torch.arange(-6, 6, dtype=torch.int8, device=d).reshape(3, 4), 0.5, 1
    ),
}


@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
def test_made_as_cpu_makes_it(make, mem_snapshot):
    before = mem_snapshot()
    q, want = make("flagos"), make("cpu")
    # The scales and zero points it was made from are gone; their memory is taken again.
    reuse = [torch.full((3,), -1.0, dtype=torch.float64, device="flagos") for _ in range(8)]
    reuse += [torch.full((3,), -1, dtype=torch.int64, device="flagos") for _ in range(8)]
    _same(q, want, DEVICE_ROUNDING)
    assert q.device == torch.device("flagos", 0)
    step = want.q_scale() if want.qscheme() == torch.per_tensor_affine else 0.2
    torch.testing.assert_close(q.dequantize().cpu(), want.dequantize(), rtol=0, atol=step * 1.001)
    assert "quantization_scheme" in repr(q)
    del q, reuse
    assert mem_snapshot() == before


@pytest.mark.parametrize("make", [_per_tensor, _per_channel], ids=["per_tensor", "per_channel"])
def test_moves_between_cpu_and_flagos(make):
    cpu = make("cpu")
    moved = cpu.to("flagos")
    _same(moved, cpu)
    back = moved.cpu()
    assert back.device.type == "cpu"
    assert torch.equal(back.int_repr(), cpu.int_repr())
    assert torch.equal(back.dequantize(), cpu.dequantize())


def test_factories_allocate_on_the_device_named(flagos):
    n = flagos.device_count()
    device = f"flagos:{n - 1}"
    q = torch._empty_affine_quantized(
        (2, 3), scale=0.5, zero_point=1, dtype=torch.qint8, device=device
    )
    assert q.device == torch.device(device) and q.untyped_storage().device == q.device
    assert q.q_scale() == 0.5 and q.q_zero_point() == 1
    like = torch.empty_like(q)
    assert like.device == q.device and like.q_scale() == 0.5
    made = torch.quantize_per_tensor(_x(device), 0.1, 0, torch.qint8)
    assert made.device == torch.device(device)
    assert made.dequantize().device == torch.device(device)
    _same(
        torch.relu(made),
        torch.relu(torch.quantize_per_tensor(_x(), 0.1, 0, torch.qint8)),
        DEVICE_ROUNDING,
    )


VIEWS = {
    "view": lambda q: q.view(4, 3),
    "t": lambda q: q.t(),
    "select": lambda q: q[1],
    "slice": lambda q: q[:, 1:3],
    "unsqueeze": lambda q: q.unsqueeze(0),
    "squeeze": lambda q: q.unsqueeze(1).squeeze(1),
    "permute": lambda q: q.permute(1, 0),
    "as_strided": lambda q: q.as_strided((2, 2), (4, 1), 1),
    "unfold": lambda q: q.unfold(1, 2, 1),
    "expand": lambda q: q[:1].expand(3, 4),
    "reshape": lambda q: q.reshape(12),
    "detach": lambda q: q.detach(),
}


@pytest.mark.parametrize("view", VIEWS.values(), ids=VIEWS.keys())
def test_views_share_memory_as_on_cpu(view):
    q, want = _moved(_per_tensor)
    v = view(q)
    _same(v, view(want))
    assert v.untyped_storage().data_ptr() == q.untyped_storage().data_ptr()
    # A write through the base is seen by the view.
    q.copy_(torch.full((3, 4), 2.0, device="flagos"))
    want.copy_(torch.full((3, 4), 2.0))
    _same(v, view(want))


def test_per_channel_slice_keeps_its_channels():
    q, want = _moved(_per_channel)
    _same(q[1:], want[1:])


OPS = {
    "relu": lambda q: torch.relu(q),
    "add": lambda q: torch.ops.quantized.add(q, q, 0.2, 5),
    "mul_scalar": lambda q: torch.ops.quantized.mul(q, 2.0),
    "cat": lambda q: torch.cat([q, q], dim=1),
    "flip": lambda q: q.flip(0),
    "index_select": lambda q: q.index_select(1, torch.tensor([3, 0], device=q.device)),
    "max_dim": lambda q: q.max(1)[0],
    "mean": lambda q: q.mean(1),
    "sigmoid": lambda q: torch.sigmoid(q),
    "hardtanh": lambda q: torch.nn.functional.hardtanh(q),
    "avg_pool": lambda q: torch.nn.functional.avg_pool2d(q.reshape(1, 1, 3, 4), 2),
    "upsample": lambda q: torch.nn.functional.interpolate(q.reshape(1, 1, 3, 4), scale_factor=2),
    "clone": lambda q: q.clone(),
    "contiguous_t": lambda q: q.t().contiguous(),
    "topk": lambda q: q.reshape(12).topk(3)[0],
}


@pytest.mark.parametrize("op", OPS.values(), ids=OPS.keys())
def test_operators_answer_as_on_cpu(op):
    q, want = _moved(_per_tensor, torch.quint8)
    _same(op(q), op(want))


def test_comparisons_and_equal_answer_as_on_cpu():
    q, want = _moved(_per_tensor)
    other, other_cpu = q.flip(1), want.flip(1)
    for name in ("eq", "ne", "lt", "le", "gt", "ge"):
        got = getattr(torch, name)(q, other)
        assert got.device.type == "flagos" and got.dtype == torch.bool
        assert torch.equal(got.cpu(), getattr(torch, name)(want, other_cpu)), name
    assert torch.equal(q, q.clone()) and not torch.equal(q, other)


def test_in_place_operators_write_the_tensor():
    q, want = _moved(_per_tensor, torch.quint8)
    ptr = q.untyped_storage().data_ptr()
    q.relu_()
    want.relu_()
    _same(q, want)
    q.fill_(1.5)
    want.fill_(1.5)
    _same(q, want)
    q[1].copy_(torch.tensor([0.3, -0.2, 4.0, 9.9], device="flagos"))
    want[1].copy_(torch.tensor([0.3, -0.2, 4.0, 9.9]))
    _same(q, want)
    assert q.untyped_storage().data_ptr() == ptr


def test_copy_between_quantized_tensors_takes_the_quantizer():
    q = _per_tensor("flagos")
    src = torch.quantize_per_tensor(_x("flagos"), 0.5, -2, torch.qint8)
    q.copy_(src)
    _same(q, torch.quantize_per_tensor(_x(), 0.5, -2, torch.qint8))
    cpu_target = _per_tensor("cpu")
    cpu_target.copy_(src)
    assert cpu_target.q_scale() == 0.5 and torch.equal(cpu_target.int_repr(), src.int_repr().cpu())


def test_resize_grows_as_on_cpu():
    q, want = _moved(_per_tensor)
    q.resize_(40)
    want.resize_(40)
    assert q.shape == want.shape and q.stride() == want.stride()
    assert torch.equal(q.int_repr()[:12].cpu(), want.int_repr()[:12])


ERRORS = {
    "into_float": (
        lambda d, q: torch.zeros(3, 4, device=d).copy_(q),
        "Copying from quantized Tensor to non-quantized Tensor is not allowed",
    ),
    "other_dtype": (
        lambda d, q: q.copy_(torch.quantize_per_tensor(_x(d), 0.1, 3, torch.quint8)),
        r"self.scalar_type\(\) == src.scalar_type\(\)|only works with the same dtype",
    ),
    "double_source": (
        lambda d, q: q.copy_(_x(d).double()),
        "Quantized copy only works with kFloat as source Tensor",
    ),
    "other_shape": (
        lambda d, q: q.copy_(torch.ones(4, device=d)),
        "Quantized copy only works with Tensors with the same shape",
    ),
    "strided_target": (
        lambda d, q: q.t().copy_(torch.ones(4, 3, device=d)),
        "Quantized copy only works with contiguous and NHWC Tensors",
    ),
    "resize_format": (
        lambda d, q: q.resize_(2, 2, memory_format=torch.channels_last),
        "Unsupported memory format for quantized tensor resize",
    ),
    "resize_per_channel": (
        lambda d, q: _per_channel(d).resize_(40),
        "Can only resize quantized tensors with per-tensor schemes",
    ),
    # A kernel that refuses its arguments where flagos memory is another backend's: the call runs
    # again on the CPU path, whose error is CPU's.
    "add_other_dtype": (
        lambda d, q: torch.ops.quantized.add(
            q, torch.quantize_per_tensor(_x(d), 0.1, 3, torch.quint8), 0.2, 5
        ),
        "Add operands should have same data type",
    ),
}


@pytest.mark.parametrize("bad, message", ERRORS.values(), ids=ERRORS.keys())
def test_bad_input_raises_as_on_cpu(bad, message):
    for device in ("cpu", "flagos"):
        with pytest.raises(RuntimeError, match=message):
            bad(device, _per_tensor(device))


def test_cpu_operand_raises_as_cuda_does():
    with pytest.raises(RuntimeError, match="same device|flagos"):
        torch.ops.quantized.add(_per_tensor("flagos"), _per_tensor("cpu"), 0.1, 0)


def test_calls_without_a_flagos_kernel_are_counted_where_they_ran():
    from torch_fl import _C

    q = _per_tensor("flagos")
    backend = _C.layout_backend()
    _C.reset_dispatch_counts()
    got = q.dequantize()
    assert got.device == q.device and got.untyped_storage().device == q.device
    counts = _C.dispatch_counts().get("aten::dequantize.self", {})
    fell_back = _C.fallback_counts().get("aten::dequantize.self", 0)
    # Served by the backend whose memory flagos memory is, where it has the kernel (CUDA has
    # dequantize), else by the CPU fallback: once, counted once.
    assert sum(counts.values()) == 1 and set(counts) <= {backend, "cpu"}, (backend, counts)
    assert fell_back == counts.get("cpu", 0), (fell_back, counts)
    if backend == "cpu":
        assert fell_back == 1


@pytest.mark.serialization
@pytest.mark.parametrize("make", [_per_tensor, _per_channel], ids=["per_tensor", "per_channel"])
def test_save_and_load_keep_device_and_values(make):
    q, want = _moved(make)
    buffer = io.BytesIO()
    torch.save({"q": q, "view": q[1:]}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)
    _same(loaded["q"], want)
    _same(loaded["view"], want[1:])
    buffer.seek(0)
    on_cpu = torch.load(buffer, map_location="cpu")["q"]
    assert on_cpu.device.type == "cpu" and torch.equal(on_cpu.int_repr(), want.int_repr())


def test_quantized_linear_with_packed_weights_answers_as_on_cpu():
    def run(device: str) -> torch.Tensor:
        x = torch.linspace(-2, 2, 32).reshape(4, 8).to(device)
        w = torch.linspace(1, -1, 40).reshape(5, 8).to(device)
        qx = torch.quantize_per_tensor(x, 0.05, 64, torch.quint8)
        qw = torch.quantize_per_tensor(w, 0.02, 0, torch.qint8)
        packed = torch.ops.quantized.linear_prepack(qw, torch.zeros(5, device=device))
        return torch.ops.quantized.linear(qx, packed, 0.1, 60)

    _same(run("flagos"), run("cpu"))


def test_results_stay_on_the_tensors_device(flagos):
    # The last device, with device 0 current: nothing may land on the current device instead.
    device = torch.device("flagos", flagos.device_count() - 1)
    q = _per_tensor("cpu").to(device)
    pc = _per_channel("cpu").to(device)
    results = {
        "clone": q.clone(),
        "contiguous": q.t().contiguous(),
        "relu": torch.relu(q),
        "int_repr": q.int_repr(),
        "dequantize": q.dequantize(),
        "empty_like": torch.empty_like(q),
        "per_channel_clone": pc.clone(),
        "per_channel_scales": pc.clone().q_per_channel_scales(),
    }
    grown = q.clone()
    grown.resize_(100)
    results["resize_"] = grown
    for name, r in results.items():
        assert r.device == device and r.untyped_storage().device == device, name
    assert flagos.current_device() == 0


def test_an_operator_returning_a_view_shares_memory_or_is_refused():
    # Where the CPU's kernel runs on flagos memory (box:cpu), a view it returns is a view of the
    # flagos tensor, as on CPU. Served on CPU copies, it would be a view of the copy (writes
    # through it would never reach the flagos tensor): such an operator raises instead.
    from torch_fl import _C

    lib = torch.library.Library("tfl_quantized_test", "FRAGMENT")
    lib.define("first_row(Tensor(a) x) -> Tensor(a)")
    lib.impl("first_row", lambda x: x[0], "QuantizedCPU")
    cpu = _per_tensor("cpu")
    view = torch.ops.tfl_quantized_test.first_row(cpu)  # on CPU: a view
    assert view.untyped_storage().data_ptr() == cpu.untyped_storage().data_ptr()
    q = _per_tensor("cpu").to("flagos")
    if _C.layout_backend() != "box:cpu":
        with pytest.raises(RuntimeError, match=r"first_row returns a view of an argument"):
            torch.ops.tfl_quantized_test.first_row(q)
        return
    got = torch.ops.tfl_quantized_test.first_row(q)
    assert got.device == q.device and got.is_quantized
    assert got.untyped_storage().data_ptr() == q.untyped_storage().data_ptr()
    _same(got, view)
    q.fill_(4.0)  # written through the tensor, seen through the view
    assert torch.equal(got.int_repr().cpu(), torch.full((4,), 43, dtype=torch.int8))
