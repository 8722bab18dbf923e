"""What a failing call leaves in its written arguments on the CPU fallback (csrc/aten/cpu_fallback.cpp).

CPU kernels change what they write before some errors: ``cat``, ``index_select`` and ``std``
resize ``out`` and then raise (an ``out`` that overlaps an input, an index out of range, a result
type ``out`` cannot hold), ``index_put_`` writes the elements before a bad index. CPU and box:cpu
(the same memory) leave those changes in place, so the fallback copies them back to the flagos
arguments before re-raising, through both of its paths: the per-argument copies and the
storage-exact path (arguments that share memory). A call CPU rejects before writing
anything (``cat`` into an ``out`` of the wrong dtype) leaves its ``out`` untouched, as on CPU. And
``out=`` the input itself is one tensor to the CPU kernel there too (``gather`` raises for it).

Each case runs on CPU tensors and on flagos tensors routed to the ``cpu`` backend, and compares the
error (type and message) and the written argument's shape, strides, offset, dtype and the values CPU
defines: the elements a resize keeps, or all of them for an in-place call (the rest of a grown
tensor is uninitialized memory on both).
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch_fl.routing
from torch_fl import _C


def _cat_out_overlapping_input(dev):
    a = torch.arange(6.0).reshape(2, 3).to(dev)
    b = (torch.arange(6.0).reshape(2, 3) + 100).to(dev)
    return (lambda: torch.cat([a, b], out=a)), a, 6


def _std_out_of_wrong_dtype(dev):
    x = torch.arange(12.0).reshape(4, 3).to(dev)
    out = torch.tensor([7], dtype=torch.int64).to(dev)
    return (lambda: torch.std(x, 0, out=out)), out, 1


def _index_select_out_of_range(dev):
    x = torch.arange(12.0).reshape(4, 3).to(dev)
    index = torch.tensor([0, 9]).to(dev)
    out = torch.tensor([7.0]).to(dev)
    return (lambda: torch.index_select(x, 0, index, out=out)), out, 1


def _index_put_out_of_range(dev):
    x = torch.zeros(5).to(dev)
    index = torch.tensor([0, 1, 9]).to(dev)
    value = torch.tensor(5.0).to(dev)
    return (lambda: x.index_put_((index,), value)), x, 5


def _gather_out_is_the_input(dev):
    # Resizing `out` to the empty index's shape empties the input too (they are one tensor), and
    # CPU still raises: it compares the tensors themselves before their memory.
    x = torch.arange(6.0).reshape(2, 3).to(dev)
    index = torch.zeros(2, 0, dtype=torch.int64).to(dev)
    return (lambda: torch.gather(x, 1, index, out=x)), x, 0


def _cat_out_of_wrong_dtype(dev):
    x = torch.arange(6.0).reshape(2, 3).to(dev)
    out = torch.tensor([[7, 8]], dtype=torch.int64).to(dev)
    return (lambda: torch.cat([x, x], out=out)), out, 2


# case: (the overload the cpu backend serves, the call on a device)
CASES = {
    "cat out= overlapping an input": ("cat.out", _cat_out_overlapping_input),
    "std out= of a dtype it cannot hold": ("std.correction_out", _std_out_of_wrong_dtype),
    "index_select out= index out of range": ("index_select.out", _index_select_out_of_range),
    "index_put_ index out of range": ("index_put_", _index_put_out_of_range),
    "gather out= the input": ("gather.out", _gather_out_is_the_input),
    "cat out= of the wrong dtype": ("cat.out", _cat_out_of_wrong_dtype),
}


def _failed_call(make, dev):
    call, written, defined = make(dev)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the deprecation warning of resizing a non-empty out=
        with pytest.raises(Exception) as error:
            call()
    state = (
        tuple(written.shape),
        written.stride(),
        written.storage_offset(),
        written.dtype,
        written.cpu().flatten()[:defined].tolist(),
    )
    return type(error.value), str(error.value), state


@pytest.mark.parametrize("case", list(CASES))
def test_failed_call_leaves_written_arguments_as_cpu_does(flagos, case):
    overload, make = CASES[case]
    expected = _failed_call(make, "cpu")
    _C.reset_dispatch_counts()
    with torch_fl.routing.override({overload: "cpu"}):
        got = _failed_call(make, "flagos:0")
    assert _C.dispatch_counts().get(f"aten::{overload}") == {"cpu": 1}
    assert got[:2] == expected[:2]
    assert got[2] == expected[2], f"flagos left {got[2]}, CPU leaves {expected[2]}"
