"""HCCL through core's collective seat (the ``vendor`` tier) on the CANN emulator's libhccl.so.

One rank in this process: every operation core issues, HCCL's gaps as the library maps them (AVG
summed then divided by core, bool as bytes), the emulator's type list, an injected HCCL fault.
Two and four ranks as processes, DDP, FSDP2, DCP and a dead peer run in the contract suite
(tests/contract/test_distributed.py, not vendor-neutral) with FLAGOS_VENDOR=ascend.
"""

from __future__ import annotations

import datetime

import pytest
import torch
import torch.distributed as dist

pytestmark = [
    pytest.mark.ascend,
    pytest.mark.skipif(not dist.is_available(), reason="this torch build has no torch.distributed"),
]


@pytest.fixture
def group(ascend, monkeypatch):
    from torch_fl import distributed as fld

    # A failure must reach the test as an exception, not the watchdog's teardown.
    monkeypatch.setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0")
    choice = fld.choose()
    assert choice.name == "vendor", choice.describe()
    pg = fld.ProcessGroupFlagos(
        dist.HashStore(), 0, 1, datetime.timedelta(seconds=30), choice=choice
    )
    yield pg
    pg.abort()


def test_tier_names_hccl(ascend):
    import torch_fl
    from torch_fl import distributed as fld

    assert torch_fl.vendor().collective_library() == ("hccl", None)
    choice = fld.choose()
    assert choice.name == "vendor" and "libtorch_fl_ascend_collective.so" in choice.reason


def test_one_rank_operations(group, emu):
    from torch_fl import distributed as fld

    dev = torch.device("flagos", 0)
    staged = fld.staged_bytes()
    before = emu.call_count("HcclAllReduce")
    t = torch.arange(6.0, device=dev)
    group.allreduce([t]).wait()
    assert t.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    # HCCL has no AVG: the library says so and core sums, then divides on the stream.
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.AVG
    a = torch.full((5,), 3.0, device=dev)
    group.allreduce([a], opts).wait()
    assert a.cpu().tolist() == [3.0] * 5
    b = torch.tensor([True, False], device=dev)
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.MIN
    group.allreduce([b], opts).wait()
    assert b.cpu().tolist() == [True, False]
    assert emu.call_count("HcclAllReduce") - before >= 3
    out = torch.empty(6, device=dev)
    group.all_gather_single(out, t * 2).wait()
    assert out.cpu().tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    rs = torch.empty(6, device=dev)
    group.reduce_scatter_single(rs, t + 1).wait()
    assert rs.cpu().tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    a2a = torch.empty(6, device=dev)
    group.all_to_all_single(a2a, t - 1, [], []).wait()
    assert a2a.cpu().tolist() == [-1.0, 0.0, 1.0, 2.0, 3.0, 4.0]
    bc = torch.full((3,), 7.0, device=dev)
    group.broadcast([bc]).wait()
    assert bc.cpu().tolist() == [7.0] * 3
    group.barrier().wait()
    assert fld.staged_bytes() == staged


def test_hccl_type_list_is_enforced(group):
    # HCCL reduces no fp64: the emulator refuses it and the error names the call and the type.
    t = torch.ones(4, dtype=torch.float64, device="flagos:0")
    with pytest.raises(dist.DistBackendError, match=r"HcclAllReduce.*fp64"):
        group.allreduce([t]).wait()


def test_injected_hccl_fault_is_an_error_naming_the_call(group, emu):
    t = torch.ones(4, device="flagos:0")
    with emu.fault("HcclAllReduce", 4):  # HCCL_E_INTERNAL
        with pytest.raises(dist.DistBackendError, match=r"HcclAllReduce.*injected fault"):
            group.allreduce([t]).wait()
