"""ECCL through core's collective seat (the ``vendor`` tier) on the TopsRider emulator's
libeccl.so.

One rank in this process: every operation core issues; what ECCL lacks as the kit maps it (no
64-bit reductions: core all-gathers and reduces on the device; groups of one kind); an injected
ECCL fault. Two and four ranks as processes, DDP, FSDP2, DCP and a dead peer run in the contract
suite (tests/contract/test_distributed.py, not vendor-neutral) with FLAGOS_VENDOR=gcu.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

pytestmark = [
    pytest.mark.gcu,
    pytest.mark.skipif(not dist.is_available(), reason="this torch build has no torch.distributed"),
]


def test_tier_names_eccl(gcu):
    import torch_fl
    from torch_fl import distributed as fld

    assert torch_fl.vendor().collective_library() == ("eccl", None)
    choice = fld.choose()
    assert choice.name == "vendor" and "libtorch_fl_gcu_collective.so" in choice.reason


def test_reductions_are_ecclallreduce_calls(group, emu):
    # AVG and bool (as uint8 with MAX/MIN) are ECCL's own; every other operation runs in the
    # contract suite (test_vendor_tier_one_rank_operations).
    before = emu.call_count("ecclAllReduce")
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.AVG
    a = torch.full((5,), 3.0, device="flagos:0")
    group.allreduce([a], opts).wait()
    assert a.cpu().tolist() == [3.0] * 5
    b = torch.tensor([True, False], device="flagos:0")
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.MIN
    group.allreduce([b], opts).wait()
    assert b.cpu().tolist() == [True, False]
    assert emu.call_count("ecclAllReduce") - before == 2


@pytest.mark.parametrize("dtype", [torch.int64, torch.float64, torch.complex128])
def test_64bit_reductions_are_gathered_and_reduced_on_the_device(group, emu, dtype):
    # ECCL reduces no 64-bit type: the kit says so before anything is queued, and core
    # all-gathers the bytes (which ECCL moves) and reduces on the device. Nothing is staged.
    from torch_fl import distributed as fld

    staged = fld.staged_bytes()
    gathers = emu.call_count("ecclAllGather")
    reduces = emu.call_count("ecclAllReduce")
    big = 2**53 + 1 if dtype == torch.int64 else 0.1
    t = torch.full((4,), big, dtype=dtype, device="flagos:0")
    group.allreduce([t]).wait()
    assert torch.equal(t.cpu(), torch.full((4,), big, dtype=dtype))
    rs = torch.empty(4, dtype=dtype, device="flagos:0")
    group.reduce_scatter_single(rs, t * 2).wait()
    assert torch.equal(rs.cpu(), torch.full((4,), big, dtype=dtype) * 2)
    assert emu.call_count("ecclAllGather") - gathers == 2
    assert emu.call_count("ecclAllReduce") == reduces
    assert fld.staged_bytes() == staged


def test_coalesced_reductions_mixing_types_issue_one_kind_per_group(group, emu):
    # A coalesced all-reduce of float32 and int64 is an all-reduce and an all-gather: two ECCL
    # groups of one kind each (the emulator refuses a group of two kinds).
    f = torch.ones(3, device="flagos:0")
    i = torch.full((2,), 5, dtype=torch.int64, device="flagos:0")
    group.allreduce_coalesced([f, i]).wait()
    assert f.cpu().tolist() == [1.0] * 3 and i.cpu().tolist() == [5, 5]


def test_injected_eccl_fault_is_an_error_naming_the_call(group, emu):
    t = torch.ones(4, device="flagos:0")
    with emu.fault("ecclAllReduce", 3):  # ecclInternalError
        with pytest.raises(dist.DistBackendError, match=r"ECCL error 3.*injected fault"):
            group.allreduce([t]).wait()
