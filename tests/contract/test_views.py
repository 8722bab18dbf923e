"""View operators alias flagos storage and never copy; resize_, set_ and zero-size tensors."""

from __future__ import annotations

import pytest
import torch

pytestmark = [pytest.mark.views, pytest.mark.usefixtures("flagos")]

D0 = torch.device("flagos", 0)
D1 = torch.device("flagos", 1)

# name -> (base shape, base dtype, view fn, writable through copy_)
VIEWS = {
    "view": ((4, 6), torch.float32, lambda t: t.view(3, 8), True),
    "view_flat": ((4, 6), torch.float32, lambda t: t.view(-1), True),
    "view_dtype": ((4, 6), torch.float32, lambda t: t.view(torch.int32), True),
    "view_dtype_narrower": ((4, 6), torch.float32, lambda t: t.view(torch.int16), True),
    "reshape_contiguous": ((4, 6), torch.float32, lambda t: t.reshape(2, 12), True),
    "flatten": ((2, 3, 4), torch.float32, lambda t: t.flatten(), True),
    "transpose": ((4, 6), torch.float32, lambda t: t.transpose(0, 1), True),
    "t": ((4, 6), torch.float32, lambda t: t.t(), True),
    "mT": ((2, 3, 4), torch.float32, lambda t: t.mT, True),
    "permute": ((2, 3, 4), torch.float32, lambda t: t.permute(2, 0, 1), True),
    "movedim": ((2, 3, 4), torch.float32, lambda t: t.movedim(0, -1), True),
    "narrow": ((6, 5), torch.float32, lambda t: t.narrow(0, 2, 3), True),
    "narrow_dim1": ((6, 5), torch.float32, lambda t: t.narrow(1, 1, 3), True),
    "select": ((6, 5), torch.float32, lambda t: t.select(1, 3), True),
    "index_int": ((6, 5), torch.float32, lambda t: t[4], True),
    "slice_step": ((6, 5), torch.float32, lambda t: t[1::2, ::3], True),
    "unsqueeze": ((6, 5), torch.float32, lambda t: t.unsqueeze(1), True),
    "squeeze": ((6, 1, 5), torch.float32, lambda t: t.squeeze(1), True),
    "expand": ((1, 5), torch.float32, lambda t: t.expand(4, 5), False),
    "expand_as_broadcast": ((6, 1), torch.float32, lambda t: t.expand(6, 7), False),
    "as_strided": ((6, 5), torch.float32, lambda t: t.as_strided((3, 3), (1, 5), 2), True),
    "as_strided_overlap": ((6, 5), torch.float32, lambda t: t.as_strided((4, 4), (1, 1), 3), False),
    "diagonal": ((5, 5), torch.float32, lambda t: t.diagonal(), True),
    "diagonal_offset": ((5, 6), torch.float32, lambda t: t.diagonal(offset=1), True),
    "unfold": ((12,), torch.float32, lambda t: t.unfold(0, 3, 3), True),
    "unfold_overlap": ((12,), torch.float32, lambda t: t.unfold(0, 4, 2), False),
    "unbind": ((3, 4), torch.float32, lambda t: t.unbind(0)[1], True),
    "split": ((6, 4), torch.float32, lambda t: t.split(2)[2], True),
    "chunk": ((6, 4), torch.float32, lambda t: t.chunk(3, dim=1)[1], True),
    "view_as_real": ((3, 4), torch.complex64, lambda t: torch.view_as_real(t), True),
    "view_as_complex": ((3, 4, 2), torch.float32, lambda t: torch.view_as_complex(t), True),
    "real": ((3, 4), torch.complex64, lambda t: t.real, True),
    "imag": ((3, 4), torch.complex64, lambda t: t.imag, True),
    "alias_detach": ((3, 4), torch.float32, lambda t: t.detach(), True),
}


def make_base(shape, dtype, device="flagos"):
    n = 1
    for s in shape:
        n *= s
    cpu = torch.arange(n * (2 if dtype.is_complex else 1), dtype=torch.float32)
    cpu = torch.view_as_complex(cpu.reshape(-1, 2)).to(dtype) if dtype.is_complex else cpu.to(dtype)
    cpu = cpu.reshape(shape)
    return cpu, cpu.to(device)


@pytest.mark.parametrize("name", list(VIEWS))
def test_view_aliases_storage(name, mem_snapshot, flagos):
    shape, dtype, fn, writable = VIEWS[name]
    cpu, base = make_base(shape, dtype)
    before = mem_snapshot()
    v = fn(base)
    assert mem_snapshot() == before, f"{name} allocated device memory: a view must never copy"
    assert v.device == base.device
    assert v.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    expected_ptr = base.untyped_storage().data_ptr() + v.storage_offset() * v.element_size()
    assert v.data_ptr() == expected_ptr
    ref = fn(cpu)
    assert v.shape == ref.shape and v.stride() == ref.stride()
    assert v.storage_offset() == ref.storage_offset()
    torch.testing.assert_close(v.cpu(), ref, rtol=0, atol=0)

    # writes to the base show through the view ...
    base.copy_(-cpu)
    torch.testing.assert_close(v.cpu(), fn(-cpu), rtol=0, atol=0)
    # ... and writes through the view land in the base
    if writable:
        fill = torch.full(v.shape, 7, dtype=v.dtype)
        v.copy_(fill)
        expected_base = -cpu.clone()
        fn(expected_base).copy_(fill)
        torch.testing.assert_close(base.cpu(), expected_base, rtol=0, atol=0)


@pytest.mark.multidevice
@pytest.mark.parametrize("name", ["view", "transpose", "select", "as_strided", "view_as_real"])
def test_views_on_device1_stay_on_device1(name, two_devices, flagos, mem_snapshot):
    shape, dtype, fn, _ = VIEWS[name]
    cpu, base = make_base(shape, dtype, "flagos:1")
    before = mem_snapshot()
    v = fn(base)
    assert mem_snapshot() == before
    assert v.device == D1 and v.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    torch.testing.assert_close(v.cpu(), fn(cpu), rtol=0, atol=0)
    assert flagos.current_device() == 0


def test_view_chain_and_base(flagos):
    cpu, base = make_base((4, 6), torch.float32)
    v = base.t()[1:, ::2].unsqueeze(0)
    assert v._base is base
    v.copy_(torch.zeros(v.shape))
    ref = cpu.clone()
    ref.t()[1:, ::2].unsqueeze(0).copy_(torch.zeros(v.shape))
    torch.testing.assert_close(base.cpu(), ref, rtol=0, atol=0)


def test_reshape_of_non_contiguous_copies_correctly(flagos):
    cpu, base = make_base((4, 6), torch.float32)
    r = base.t().reshape(-1)
    assert r.untyped_storage().data_ptr() != base.untyped_storage().data_ptr()
    torch.testing.assert_close(r.cpu(), cpu.t().reshape(-1), rtol=0, atol=0)


def test_view_on_incompatible_strides_raises(flagos):
    _, base = make_base((4, 6), torch.float32)
    with pytest.raises(RuntimeError, match="view"):
        base.t().view(-1)


# ---------------------------------------------------------------------------------------------
# resize_
# ---------------------------------------------------------------------------------------------


def test_resize_grows_storage_and_keeps_contents(flagos):
    t = torch.tensor([1.0, 2.0, 3.0], device="flagos")
    t.resize_(10)
    assert t.shape == (10,) and t.device == D0
    assert t.untyped_storage().nbytes() >= 40
    assert t[:3].cpu().tolist() == [1.0, 2.0, 3.0]
    t[3:].copy_(torch.arange(7.0))
    assert t.cpu().tolist() == [1.0, 2.0, 3.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    t.resize_(2, 5)
    assert t.cpu()[1].tolist() == [2.0, 3.0, 4.0, 5.0, 6.0]


def test_resize_shrink_keeps_storage(flagos):
    t = torch.arange(16, device="flagos")
    ptr = t.data_ptr()
    t.resize_(4)
    assert t.data_ptr() == ptr and t.cpu().tolist() == [0, 1, 2, 3]
    t.resize_(16)
    assert t.data_ptr() == ptr, "growing back within capacity must not reallocate"
    assert t.cpu()[:4].tolist() == [0, 1, 2, 3]


def test_resize_from_empty_and_to_zero(flagos):
    t = torch.empty(0, device="flagos")
    t.resize_(5, 3)
    assert t.shape == (5, 3) and t.untyped_storage().nbytes() >= 60
    t.copy_(torch.ones(5, 3))
    assert t.cpu().sum().item() == 15
    t.resize_(0)
    assert t.numel() == 0 and t.device == D0


@pytest.mark.multidevice
def test_resize_on_device1_allocates_on_device1(flagos, two_devices, mem_snapshot):
    before = mem_snapshot()
    t = torch.tensor([5, 6], dtype=torch.int64, device="flagos:1")
    t.resize_(1 << 18)
    after = mem_snapshot()
    assert after[0] == before[0]
    assert after[1] >= before[1] + (1 << 18) * 8
    assert t.device == D1 and t.untyped_storage().device == D1
    assert t[:2].cpu().tolist() == [5, 6]
    assert flagos.current_device() == 0


def test_resize_of_a_view_offset(flagos):
    base = torch.arange(8.0, device="flagos")
    v = base[2:]
    v.resize_(3)
    assert v.cpu().tolist() == [2.0, 3.0, 4.0]
    assert v.data_ptr() == base.data_ptr() + 2 * 4


def test_untyped_storage_resize(flagos):
    s = torch.arange(4, dtype=torch.uint8, device="flagos").untyped_storage()
    s.resize_(16)
    assert s.nbytes() == 16 and s.device == D0
    t = torch.empty(0, dtype=torch.uint8, device="flagos").set_(s)
    assert t[:4].cpu().tolist() == [0, 1, 2, 3]


# ---------------------------------------------------------------------------------------------
# set_
# ---------------------------------------------------------------------------------------------


def test_set_source_tensor(flagos):
    src = torch.arange(12.0, device="flagos").reshape(3, 4)[:, 1:]
    t = torch.empty(0, device="flagos")
    t.set_(src)
    assert t.data_ptr() == src.data_ptr()
    assert t.shape == src.shape and t.stride() == src.stride()
    assert t.storage_offset() == src.storage_offset()
    t.copy_(torch.zeros(3, 3))
    assert src.cpu().sum().item() == 0


def test_set_source_storage(flagos):
    src = torch.arange(10, dtype=torch.int32, device="flagos")
    t = torch.empty(0, dtype=torch.int32, device="flagos")
    t.set_(src.untyped_storage())
    assert t.shape == (10,) and t.data_ptr() == src.data_ptr()
    assert t.cpu().tolist() == list(range(10))


def test_set_source_storage_offset_size_stride(flagos):
    src = torch.arange(20.0, device="flagos")
    t = torch.empty(0, device="flagos")
    t.set_(src.untyped_storage(), 2, (3, 4), (1, 3))
    assert t.storage_offset() == 2 and t.stride() == (1, 3)
    assert t.data_ptr() == src.data_ptr() + 2 * 4
    expected = torch.arange(20.0).as_strided((3, 4), (1, 3), 2)
    torch.testing.assert_close(t.cpu(), expected, rtol=0, atol=0)
    t.copy_(torch.full((3, 4), -1.0))
    after = src.cpu()
    assert (after[2:14] == -1).all()
    assert after[:2].tolist() == [0.0, 1.0] and after[14:].tolist() == list(
        map(float, range(14, 20))
    )


def test_set_empty(flagos):
    t = torch.arange(4.0, device="flagos")
    t.set_()
    assert t.numel() == 0 and t.device == D0


@pytest.mark.multidevice
def test_set_on_device1(flagos, two_devices):
    src = torch.arange(6.0, device="flagos:1")
    t = torch.empty(0, device="flagos:1")
    t.set_(src.untyped_storage(), 1, (5,), (1,))
    assert t.device == D1 and t.cpu().tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]


# ---------------------------------------------------------------------------------------------
# zero-size tensors
# ---------------------------------------------------------------------------------------------


def test_empty_zero(flagos, mem_snapshot):
    before = mem_snapshot()
    t = torch.empty(0, device="flagos")
    assert t.shape == (0,) and t.numel() == 0 and t.device == D0
    assert mem_snapshot() == before
    assert t.cpu().shape == (0,)
    assert torch.empty(0).to("flagos").shape == (0,)


@pytest.mark.parametrize(
    "shape", [(0,), (0, 3), (3, 0), (2, 0, 4)], ids=lambda s: "x".join(map(str, s))
)
def test_zero_size_ops(shape, flagos):
    t = torch.empty(shape, device="flagos")
    assert t.shape == shape
    if len(shape) == 2:
        assert t.t().shape == (shape[1], shape[0])
    assert t.reshape(-1).shape == (0,)
    assert t.unsqueeze(0).shape == (1, *shape)
    assert (t + 1).shape == shape and (t + 1).device == D0
    assert t.sum().item() == 0
    assert torch.cat([t, t]).shape[0] == 2 * shape[0]
    dst = torch.empty(shape, device="flagos")
    dst.copy_(torch.empty(shape))
    assert dst.cpu().shape == shape
    assert torch.zeros(shape, device="flagos").clone().shape == shape
