"""HCCL through core's collective seat (the ``vendor`` tier) on the CANN emulator's libhccl.so.

One rank in this process: every operation core issues, HCCL's gaps as the library maps them (AVG
summed then divided by core, bool as bytes), the emulator's type list, an injected HCCL fault.
Two and four ranks as processes, DDP, FSDP2, DCP and a dead peer run in the contract suite
(tests/contract/test_distributed.py, not vendor-neutral) with FLAGOS_VENDOR=ascend.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

pytestmark = [
    pytest.mark.ascend,
    pytest.mark.skipif(not dist.is_available(), reason="this torch build has no torch.distributed"),
]


def test_tier_names_hccl(ascend):
    import torch_fl
    from torch_fl import distributed as fld

    assert torch_fl.vendor().collective_library() == ("hccl", None)
    choice = fld.choose()
    assert choice.name == "vendor" and "libtorch_fl_ascend_collective.so" in choice.reason


def test_avg_and_bool_as_hccl_lacks_them(group, emu):
    # HCCL has no AVG: the library says so and core sums, then divides on the stream; bool
    # travels as uint8 with MAX/MIN. Every other operation runs in the contract suite
    # (test_vendor_tier_one_rank_operations).
    before = emu.call_count("HcclAllReduce")
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
    assert emu.call_count("HcclAllReduce") - before == 2


def test_types_hccl_cannot_reduce_are_gathered_and_reduced_on_the_device(group, emu):
    # HCCL reduces no fp64 (the emulator refuses it at the call): the library says so before
    # anything is queued, also inside a group, and core all-gathers and reduces on the device.
    from torch_fl import distributed as fld

    staged = fld.staged_bytes()
    gathers = emu.call_count("HcclAllGather")
    t = torch.full((4,), 0.1, dtype=torch.float64, device="flagos:0")
    group.allreduce([t]).wait()
    assert torch.equal(t.cpu(), torch.full((4,), 0.1, dtype=torch.float64))
    f = torch.ones(3, device="flagos:0")
    group.allreduce_coalesced([f, t]).wait()
    assert f.cpu().tolist() == [1.0] * 3 and t.cpu().tolist() == [0.1] * 4
    assert emu.call_count("HcclAllGather") - gathers == 2
    assert fld.staged_bytes() == staged


def test_injected_hccl_fault_is_an_error_naming_the_call(group, emu):
    t = torch.ones(4, device="flagos:0")
    with emu.fault("HcclAllReduce", 4):  # HCCL_E_INTERNAL
        with pytest.raises(dist.DistBackendError, match=r"HcclAllReduce.*injected fault"):
            group.allreduce([t]).wait()


def test_all_reduce_captured_in_a_graph_runs_at_each_replay(ascend, tmp_path):
    # HcclAllReduce runs on the communicator's stream, which joins the capture through events
    # (CANN's aclmdlRICaptureBegin: event deduction brings more streams into the capture).
    from torch_fl.testing import check_all_reduce_captured_in_a_graph

    check_all_reduce_captured_in_a_graph(str(tmp_path / "store"))
