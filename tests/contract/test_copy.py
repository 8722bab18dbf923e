"""Copies in every direction, bit-exact for every dtype, strided, casting, broadcasting, with
conj/neg bits, non_blocking with pinned memory, and scalar reads (.item())."""

from __future__ import annotations

import math
import zlib

import pytest
import torch

pytestmark = [pytest.mark.copy, pytest.mark.usefixtures("flagos")]

D0 = torch.device("flagos", 0)
D1 = torch.device("flagos", 1)
SHAPE = (4, 6, 5)

# Layouts of a (4, 6, 5) source, applied the same way to a CPU tensor and to a flagos tensor.
LAYOUTS = {
    "contiguous": lambda t: t,
    "transposed": lambda t: t.transpose(0, 2),
    "permuted": lambda t: t.permute(1, 2, 0),
    "step_slice": lambda t: t[1:, ::2, 1::3],
    "expanded": lambda t: t[:, :1, :].expand(4, 6, 5),
    "broadcast_2d": lambda t: t[0, 0, :].unsqueeze(0).expand(3, 5),
    "storage_offset": lambda t: t.reshape(-1)[7:47].view(5, 8),
    "offset_transposed": lambda t: t[1:, 2:, 1:].transpose(0, 1),
    "scalar_offset": lambda t: t[1, 2, 3],
}

DIRECTIONS = ["h2d", "d2h", "d2d"]


def strided_like(shape, dtype, device) -> torch.Tensor:
    """An uninitialised non-contiguous destination with this shape on `device`."""
    if len(shape) >= 2:
        return torch.empty(tuple(reversed(shape)), dtype=dtype, device=device).permute(
            *reversed(range(len(shape)))
        )
    numel = math.prod(shape)
    return torch.empty(2 * numel + 1, dtype=dtype, device=device)[1::2].view(shape)


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_copy_bit_exact(copy_dtype, layout, direction, bits):
    x = bits.random(SHAPE, copy_dtype, seed=zlib.crc32(f"{layout}/{direction}".encode()))
    view = LAYOUTS[layout]
    expected = view(x)
    if direction == "h2d":
        src = view(x)
        fresh = src.to("flagos")
        assert fresh.device == D0
        bits.equal(fresh, expected)
        dst = strided_like(src.shape, copy_dtype, "flagos")
        dst.copy_(src)
        bits.equal(dst, expected)
        blocking = torch.empty(src.shape, dtype=copy_dtype, device="flagos").copy_(src)
        bits.equal(blocking, expected)
    else:
        fx = x.to("flagos")
        src = view(fx)
        assert src.device == D0
        if direction == "d2h":
            fresh = src.cpu()
            assert fresh.device.type == "cpu"
            bits.equal(fresh, expected)
            dst = strided_like(src.shape, copy_dtype, "cpu")
            dst.copy_(src)
            bits.equal(dst, expected)
            bits.equal(src.to("cpu", copy=True), expected)
        else:
            dst = torch.empty(src.shape, dtype=copy_dtype, device="flagos")
            dst.copy_(src)
            bits.equal(dst, expected)
            sdst = strided_like(src.shape, copy_dtype, "flagos")
            sdst.copy_(src)
            bits.equal(sdst, expected)
            bits.equal(src.clone(), expected)
            bits.equal(src.contiguous(), expected)
            # the source is untouched by being copied from
            bits.equal(fx, x)


@pytest.mark.multidevice
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_copy_between_devices_bit_exact(copy_dtype, layout, two_devices, bits, flagos):
    x = bits.random(SHAPE, copy_dtype, seed=7)
    view = LAYOUTS[layout]
    expected = view(x)
    f0 = view(x.to("flagos:0"))
    on1 = f0.to("flagos:1")
    assert on1.device == D1
    assert flagos.current_device() == 0
    bits.equal(on1, expected)
    back = on1.to("flagos:0")
    assert back.device == D0
    bits.equal(back, expected)
    # strided destination on the other device, both ways, with either device current
    d1 = strided_like(f0.shape, copy_dtype, "flagos:1")
    d1.copy_(f0)
    bits.equal(d1, expected)
    with flagos.device(1):
        d0 = strided_like(f0.shape, copy_dtype, "flagos:0")
        d0.copy_(view(x.to("flagos:1")))
    bits.equal(d0, expected)


# ---------------------------------------------------------------------------------------------
# dtype-casting copies
# ---------------------------------------------------------------------------------------------


def exact_values(shape, dtype, seed=0) -> torch.Tensor:
    """Values every dtype here represents exactly: integers 0..8 (powers of two for e8m0)."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype == getattr(torch, "float8_e8m0fnu", None):
        return (2.0 ** torch.randint(0, 4, shape, generator=g)).to(dtype)
    return torch.randint(0, 9, shape, generator=g).to(dtype)


def test_dtype_casting_copies(cast_pair, bits, flagos):
    src_dtype, dst_dtype = cast_pair
    x = exact_values((6, 5), src_dtype).t()  # strided source
    expected = x.to(dst_dtype)
    fx = x.to("flagos")
    results = {
        "h2d .to(flagos, dtype)": x.to("flagos", dtype=dst_dtype),
        "h2d copy_": torch.empty(x.shape, dtype=dst_dtype, device="flagos").copy_(x),
        "d2h .to(cpu, dtype)": fx.to("cpu", dtype=dst_dtype),
        "d2h copy_": torch.empty(x.shape, dtype=dst_dtype).copy_(fx),
        "d2d .to(dtype)": fx.to(dst_dtype),
        "d2d copy_": torch.empty(x.shape, dtype=dst_dtype, device="flagos").copy_(fx),
    }
    if flagos.device_count() >= 2:
        results["peer .to(flagos:1, dtype)"] = fx.to("flagos:1", dtype=dst_dtype)
        results["peer copy_"] = torch.empty(x.shape, dtype=dst_dtype, device="flagos:1").copy_(fx)
    for name, got in results.items():
        assert got.dtype == dst_dtype, name
        try:
            bits.equal(got, expected)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None


# ---------------------------------------------------------------------------------------------
# copy_ with broadcasting
# ---------------------------------------------------------------------------------------------

BROADCAST_DTYPES = [torch.float32, torch.int64, torch.bfloat16, torch.complex64, torch.bool]


@pytest.mark.parametrize("dtype", BROADCAST_DTYPES, ids=str)
def test_copy_broadcasts_into_flagos(dtype, bits, flagos):
    row = exact_values((4, 1), dtype, seed=1)
    col = exact_values((1, 5), dtype, seed=2)
    scalar = exact_values((), dtype, seed=3)

    dst = torch.empty(3, 4, 5, dtype=dtype, device="flagos")
    dst.copy_(row)  # from CPU
    bits.equal(dst, row.expand(3, 4, 5))
    dst.copy_(col.to("flagos"))  # from flagos
    bits.equal(dst, col.expand(3, 4, 5))
    dst.copy_(scalar)  # 0-dim CPU tensor
    bits.equal(dst, scalar.expand(3, 4, 5))

    tdst = torch.empty(5, 4, 3, dtype=dtype, device="flagos").transpose(0, 2)  # strided dst
    tdst.copy_(row.to("flagos"))
    bits.equal(tdst, row.expand(3, 4, 5))

    cpu_dst = torch.empty(3, 4, 5, dtype=dtype)
    cpu_dst.copy_(col.to("flagos"))  # D2H broadcast
    bits.equal(cpu_dst, col.expand(3, 4, 5))

    cast_dst = torch.empty(
        3, 4, 5, dtype=torch.float64 if not dtype.is_complex else torch.complex128
    )
    cast_dst = cast_dst.to("flagos")
    cast_dst.copy_(row)  # broadcast + cast
    bits.equal(cast_dst, row.to(cast_dst.dtype).expand(3, 4, 5))


@pytest.mark.multidevice
def test_copy_broadcasts_across_devices(two_devices, bits, flagos):
    src = exact_values((1, 5), torch.float32).to("flagos:1")
    dst = torch.empty(4, 5, device="flagos:0")
    dst.copy_(src)
    bits.equal(dst, src.cpu().expand(4, 5))
    assert dst.device == D0 and flagos.current_device() == 0


# ---------------------------------------------------------------------------------------------
# conj and neg bits
# ---------------------------------------------------------------------------------------------

LAZY_VIEWS = {
    "conj-c64": (torch.complex64, torch.conj),
    "conj-c128": (torch.complex128, torch.conj),
    "neg-f32": (torch.float32, torch._neg_view),
    "neg-f64": (torch.float64, torch._neg_view),
    "neg-c64": (torch.complex64, torch._neg_view),
    "conj_neg-c64": (torch.complex64, lambda t: torch._neg_view(t.conj())),
}


def _resolved(t: torch.Tensor) -> torch.Tensor:
    return t.resolve_conj().resolve_neg()


@pytest.mark.parametrize("case", list(LAZY_VIEWS))
def test_conj_and_neg_bits_copy(case, bits, flagos):
    dtype, lazy = LAZY_VIEWS[case]
    x = torch.randn(6, 5, dtype=dtype)
    expected = _resolved(lazy(x))
    assert not torch.equal(expected, x), (
        "the lazy view must change values for the test to mean anything"
    )
    fx = x.to("flagos")
    assert lazy(fx).is_conj() == lazy(x).is_conj() and lazy(fx).is_neg() == lazy(x).is_neg()

    results = {
        "h2d of lazy view": lazy(x).to("flagos"),
        "d2h of lazy view": lazy(fx).cpu(),
        "d2d of lazy view": torch.empty_like(fx).copy_(lazy(fx)),
        "d2d clone": lazy(fx).clone(),
        "h2d into flagos": torch.empty(6, 5, dtype=dtype, device="flagos").copy_(lazy(x)),
        "d2h into cpu": torch.empty(6, 5, dtype=dtype).copy_(lazy(fx)),
        "strided lazy view": lazy(fx.t()).t().cpu(),
        "resolve on flagos": _resolved(lazy(fx)),
    }
    for name, got in results.items():
        try:
            bits.equal(_resolved(got.cpu()), expected)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None

    # Writing through a lazy view: dst.conj().copy_(x) stores conj(x) in dst.
    dst = torch.empty(6, 5, dtype=dtype, device="flagos")
    lazy(dst).copy_(x)
    bits.equal(dst.cpu(), expected)
    dst2 = torch.empty(6, 5, dtype=dtype, device="flagos")
    lazy(dst2).copy_(fx)
    bits.equal(dst2.cpu(), expected)


@pytest.mark.multidevice
def test_conj_copy_between_devices(two_devices, bits):
    x = torch.randn(8, dtype=torch.complex64)
    got = x.to("flagos:0").conj().to("flagos:1")
    assert got.device == D1
    bits.equal(_resolved(got.cpu()), x.conj().resolve_conj())


def test_conj_copy_with_cast(bits):
    x = torch.randn(8, dtype=torch.complex64)
    got = x.to("flagos").conj().to(torch.complex128)
    bits.equal(_resolved(got.cpu()), x.conj().resolve_conj().to(torch.complex128))


# ---------------------------------------------------------------------------------------------
# non_blocking copies with pinned memory
# ---------------------------------------------------------------------------------------------

NB_DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.complex128, torch.bool]


@pytest.mark.pinned
@pytest.mark.parametrize("dtype", NB_DTYPES, ids=str)
def test_non_blocking_h2d_from_pinned(dtype, flagos, bits, require_cap):
    require_cap("PINNED_HOST_MEMORY")
    x = bits.random((257, 33), dtype, seed=11)
    src = x.pin_memory()
    assert src.is_pinned()
    out = src.to("flagos", non_blocking=True)
    dst = torch.empty(257, 33, dtype=dtype, device="flagos")
    dst.copy_(src, non_blocking=True)
    strided = torch.empty(33, 257, dtype=dtype, device="flagos").t()
    strided.copy_(src, non_blocking=True)
    flagos.synchronize()
    bits.equal(out, x)
    bits.equal(dst, x)
    bits.equal(strided, x)


@pytest.mark.pinned
@pytest.mark.parametrize("dtype", NB_DTYPES, ids=str)
def test_non_blocking_d2h_into_pinned(dtype, flagos, bits, require_cap, flagos_owns_pinned_memory):
    require_cap("PINNED_HOST_MEMORY")
    x = bits.random((129, 65), dtype, seed=12)
    fx = x.to("flagos")
    dst = torch.empty(129, 65, dtype=dtype, pin_memory=True)
    assert dst.is_pinned()
    dst.copy_(fx, non_blocking=True)
    out = fx.to("cpu", non_blocking=True)
    strided = torch.empty(65, 129, dtype=dtype, pin_memory=True).t()
    strided.copy_(fx, non_blocking=True)
    flagos.synchronize()
    bits.equal(dst, x)
    bits.equal(out, x)
    bits.equal(strided, x)


@pytest.mark.pinned
def test_non_blocking_pageable_memory_is_still_correct(flagos, bits):
    x = bits.random((1000,), torch.float64, seed=13)
    out = x.to("flagos", non_blocking=True)
    back = torch.empty(1000, dtype=torch.float64)
    back.copy_(out, non_blocking=True)
    flagos.synchronize()
    bits.equal(back, x)


@pytest.mark.pinned
def test_pinned_source_freed_before_copy_completes_is_not_reused(flagos, bits, require_cap):
    """The pinned allocator must not hand out a block an in-flight copy still reads."""
    require_cap("PINNED_HOST_MEMORY")
    n = 1 << 20
    x = bits.random((n,), torch.float32, seed=14)
    outs = []
    for _ in range(4):
        src = x.pin_memory()
        outs.append(src.to("flagos", non_blocking=True))
        del src
        junk = torch.empty(n, dtype=torch.float32, pin_memory=True)
        junk.fill_(-1.0)
        del junk
    flagos.synchronize()
    for out in outs:
        bits.equal(out, x)


@pytest.mark.pinned
def test_non_blocking_on_side_stream(flagos, bits, require_cap):
    require_cap("PINNED_HOST_MEMORY")
    x = bits.random((300, 7), torch.float16, seed=15)
    src = x.pin_memory()
    s = flagos.Stream()
    with flagos.stream(s):
        out = src.to("flagos", non_blocking=True)
        back = torch.empty(300, 7, dtype=torch.float16, pin_memory=True)
        back.copy_(out, non_blocking=True)
    s.synchronize()
    bits.equal(back, x)


# ---------------------------------------------------------------------------------------------
# scalar reads: .item() (_local_scalar_dense)
# ---------------------------------------------------------------------------------------------


def _same_scalar(a, b) -> bool:
    if isinstance(a, float | complex) and isinstance(b, float | complex):
        if isinstance(a, complex) or isinstance(b, complex):
            a, b = complex(a), complex(b)
            return _same_scalar(a.real, b.real) and _same_scalar(a.imag, b.imag)
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return type(a) is type(b) and a == b


def test_item_every_dtype(copy_dtype, bits, flagos):
    x = bits.random((5, 7), copy_dtype, seed=21)
    fx = x.to("flagos")
    for idx in [(0, 0), (1, 3), (4, 6), (2, 5)]:
        got, expected = fx[idx].item(), x[idx].item()
        assert _same_scalar(got, expected), f"{copy_dtype} {idx}: {got!r} != {expected!r}"
    # 0-dim tensor with its own storage, one from a strided view, and one on another device
    scalar = x[3, 1].clone()
    assert _same_scalar(scalar.to("flagos").item(), scalar.item())
    assert _same_scalar(fx.t()[6, 4].item(), x[4, 6].item())
    if flagos.device_count() >= 2:
        assert _same_scalar(x.to("flagos:1")[2, 2].item(), x[2, 2].item())
    if not (copy_dtype.is_floating_point and copy_dtype.itemsize == 1):  # float8 has no bool()
        one = torch.ones((), dtype=copy_dtype, device="flagos")
        assert bool(one) is True
        assert int(one) == 1


def test_python_conversions_read_scalars(flagos):
    t = torch.tensor([2.5, -1.0], device="flagos")
    assert float(t[0]) == 2.5
    assert int(t[1]) == -1
    assert t.tolist() == [2.5, -1.0]
    assert bool(t[0] > 2)
    c = torch.tensor(1 + 2j, dtype=torch.complex64, device="flagos")
    assert complex(c) == 1 + 2j
