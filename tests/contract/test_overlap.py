"""Arguments that share memory: flagos raises where CPU raises (partial or internal overlap of a
written tensor) and is bit-identical to CPU where CPU computes, whichever backend serves the call.

Each case runs the same program on a CPU tensor and on a flagos tensor; the flagos run must raise
the error CPU raises (same message), or leave the same values as CPU in every tensor it touched.
"""

from __future__ import annotations

import pytest
import torch

pytestmark = [pytest.mark.overlap, pytest.mark.usefixtures("flagos")]


def _square(device):
    return torch.arange(16.0, device=device).reshape(4, 4)


def _line(device):
    return torch.arange(6.0, device=device)


def _ints(device):
    return torch.arange(1, 7, device=device)


def _long(device):
    return torch.arange(40.0, device=device)


# (name, make the tensor, the program on it). Each program returns the tensors to compare.
CASES = [
    # partial overlap between a written tensor and an input: CPU raises
    ("add_-transpose", _square, lambda x: x.add_(x.t())),
    ("mul_-transpose", _square, lambda x: x.mul_(x.t())),
    ("copy_-transpose", _square, lambda x: x.copy_(x.t())),
    ("mul-out-transpose", _square, lambda x: torch.mul(x, 2, out=x.t())),
    ("add-out-shifted", _line, lambda d: torch.add(d[0:3], d[0:3], out=d[1:4])),
    ("abs-out-shifted", _line, lambda d: torch.abs(d[0:3], out=d[1:4])),
    ("neg-out-shifted", _line, lambda d: torch.neg(d[0:3], out=d[1:4])),
    ("pow-out-shifted", _line, lambda d: torch.pow(d[0:3], 2, out=d[1:4])),
    ("copy_-shifted", _line, lambda d: d[1:4].copy_(d[0:3])),
    ("sub_-shifted", _line, lambda d: d[1:4].sub_(d[0:3])),
    ("int-add_-shifted", _ints, lambda d: d[1:4].add_(d[0:3])),
    # internal overlap of the written tensor: CPU raises
    ("expand-add_", _line, lambda d: d[:1].expand(3).add_(1)),
    ("expand-copy_", _line, lambda d: d[:1].expand(3).copy_(torch.ones(3, device=d.device))),
    # full overlap and disjoint views of one storage: CPU computes
    ("add_-self", _square, lambda x: x.add_(x)),
    ("mul-self", _square, lambda x: (x, x * x)),
    ("add_-same-view", _square, lambda x: x.add_(x.view(16).view(4, 4))),
    ("add-out-self", _square, lambda x: torch.add(x, x, out=x)),
    ("add-out-disjoint", _line, lambda d: torch.add(d[0:3], 1, out=d[3:6])),
    ("mul_-disjoint", _line, lambda d: d[3:6].mul_(d[0:3])),
    ("copy_-disjoint", _line, lambda d: d[3:6].copy_(d[0:3])),
    ("copy_-same-data", _square, lambda x: x.copy_(x.view(16).view(4, 4))),
    ("abs-out-self", _line, lambda d: torch.abs(d, out=d)),
    ("neg_-row", _square, lambda x: x[1].neg_()),
    # many tensors in one call (looked up by hash, not scanned)
    ("cat-20-views", _square, lambda x: (x, torch.cat([x.view(16)[i : i + 1] for i in range(16)]))),
    (
        "cat-out-disjoint",
        _long,
        lambda d: torch.cat([d[i : i + 1] for i in range(20)], out=d[20:40]),
    ),
    (
        "cat-out-overlapping",
        _long,
        lambda d: torch.cat([d[i : i + 1] for i in range(20)], out=d[10:30]),
    ),
    (
        "foreach-add_-shifted",
        _long,
        lambda d: torch._foreach_add_(
            [d[i : i + 2] for i in range(0, 36, 2)], [d[i + 1 : i + 3] for i in range(0, 36, 2)]
        ),
    ),
    # in-place foreach ops: CPU checks each index as its per-tensor op does (fused kernels elsewhere
    # check nothing); the failing index is the first (see test_foreach_overlap_at_a_later_index)
    (
        "foreach-addcmul_-shifted",
        _long,
        lambda d: torch._foreach_addcmul_([d[8:12], d[0:4]], [d[9:13], d[20:24]], [d[30:34]] * 2),
    ),
    ("foreach-neg_-expanded", _line, lambda d: torch._foreach_neg_([d[:1].expand(3), d[3:6]])),
    (
        "foreach-copy_-shifted",
        _long,
        lambda d: torch._foreach_copy_([d[10:14], d[0:4]], [d[11:15], d[20:24]]),
    ),
    (
        "foreach-add_-disjoint",
        _long,
        lambda d: torch._foreach_add_([d[0:4], d[10:14]], [d[20:24], d[10:14]], alpha=2),
    ),
    ("foreach-zero_-expanded", _line, lambda d: torch._foreach_zero_([d[:1].expand(3), d[4:6]])),
    # internal overlap that CPU accepts
    ("expand-fill_", lambda dev: torch.zeros(3, device=dev), lambda z: z.expand(4, 3).fill_(7)),
    ("expand-zero_", lambda dev: torch.ones(3, device=dev), lambda z: z.expand(4, 3).zero_()),
]


def _run(make, program, device):
    base = make(device)
    try:
        out = program(base)
    except RuntimeError as exc:
        return base, None, exc
    return base, out, None


def _as_list(out):
    if out is None:
        return []
    if isinstance(out, torch.Tensor):
        return [out]
    return list(out)


@pytest.mark.parametrize("name,make,program", CASES, ids=[c[0] for c in CASES])
def test_overlap_like_cpu(name, make, program, bits):
    cpu_base, cpu_out, cpu_err = _run(make, program, "cpu")
    fl_base, fl_out, fl_err = _run(make, program, "flagos")
    if cpu_err is not None:
        assert fl_err is not None, (
            f"{name}: CPU raises {str(cpu_err).splitlines()[0]!r}; flagos computed "
            f"{fl_base.cpu().tolist()} without an error"
        )
        assert str(cpu_err).splitlines()[0] in str(fl_err), (
            f"{name}: CPU raises {str(cpu_err).splitlines()[0]!r}, flagos {fl_err!r}"
        )
        # Like CPU, a call that raised wrote nothing.
        bits.equal(fl_base.cpu(), cpu_base)
        return
    assert fl_err is None, f"{name}: CPU computes this; flagos raised {fl_err!r}"
    bits.equal(fl_base.cpu(), cpu_base)
    cpu_list, fl_list = _as_list(cpu_out), _as_list(fl_out)
    assert len(cpu_list) == len(fl_list)
    for c, f in zip(cpu_list, fl_list, strict=True):
        assert f.device.type == "flagos"
        bits.equal(f.cpu(), c)


def test_foreach_overlap_at_a_later_index():
    """An in-place foreach call whose second index overlaps raises CPU's error. CPU has written the
    first index by then; a routed flagos call is checked before any kernel runs and writes
    nothing, one served by the CPU fallback is CPU. Either way the failing index is untouched."""
    cpu = _long("cpu")
    with pytest.raises(RuntimeError) as cpu_err:
        torch._foreach_add_([cpu[0:4], cpu[10:14]], [cpu[20:24], cpu[11:15]])
    assert cpu[0].item() == 20.0  # CPU's first index is written
    d = _long("flagos")
    with pytest.raises(RuntimeError) as fl_err:
        torch._foreach_add_([d[0:4], d[10:14]], [d[20:24], d[11:15]])
    assert str(cpu_err.value).splitlines()[0] in str(fl_err.value)
    got, untouched = d.cpu(), _long("cpu")
    assert torch.equal(got, untouched) or torch.equal(got, cpu), got.tolist()


def test_out_is_input_identity():
    """In-place and out= return the caller's own tensor object, over its own storage."""
    x = _square("flagos")
    ptr = x.data_ptr()
    assert x.add_(x) is x
    r = torch.add(x, x, out=x)
    assert r is x and x.data_ptr() == ptr
    d = _line("flagos")
    view = d[3:6]
    assert torch.add(d[0:3], 1, out=view) is view
    assert view.data_ptr() == d.data_ptr() + 3 * d.element_size()


def test_results_alias_like_cpu():
    """Results that alias an input on CPU alias it on flagos (same storage), others do not."""
    for device in ("cpu", "flagos"):
        x = _square(device)
        y = x.add_(1)
        assert y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
        z = x + x
        assert z.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
