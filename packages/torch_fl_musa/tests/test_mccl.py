"""MCCL through core's collective seat (the ``vendor`` tier) on the MUSA emulator's libmccl.so.

One rank in this process: reductions of every type, 64-bit ones included, are mcclAllReduce
calls (MCCL reduces them: nothing is gathered); a coalesced reduction mixing types is one MCCL
group; an injected MCCL fault. Two ranks as processes, one per emulated GPU, run every kind of
operation through torch.distributed. Four ranks, DDP, FSDP2, DCP and a dead peer run in the
contract suite (tests/contract/test_distributed.py) with FLAGOS_VENDOR=musa.
"""

from __future__ import annotations

import textwrap

import pytest
import torch
import torch.distributed as dist

pytestmark = [
    pytest.mark.musa,
    pytest.mark.skipif(not dist.is_available(), reason="this torch build has no torch.distributed"),
]


def test_tier_names_mccl(musa):
    import torch_fl
    from torch_fl import distributed as fld

    assert torch_fl.vendor().collective_library() == ("mccl", None)
    choice = fld.choose()
    assert choice.name == "vendor" and "libtorch_fl_musa_collective.so" in choice.reason


@pytest.mark.parametrize(
    "dtype, op, values, expected",
    [
        (torch.float32, dist.ReduceOp.AVG, [3.0, 5.0], [3.0, 5.0]),
        (torch.bool, dist.ReduceOp.MIN, [True, False], [True, False]),
        (torch.int64, dist.ReduceOp.SUM, [2**53 + 1, -7], [2**53 + 1, -7]),
        (torch.float64, dist.ReduceOp.MAX, [0.1, 1e300], [0.1, 1e300]),
        (torch.complex128, dist.ReduceOp.SUM, [1 + 2j, -3j], [1 + 2j, -3j]),
    ],
)
def test_reductions_are_mcclallreduce_calls(group, emu, dtype, op, values, expected):
    # MCCL reduces every type, 64-bit ones included: one mcclAllReduce, nothing gathered or
    # staged on the host.
    from torch_fl import distributed as fld

    staged = fld.staged_bytes()
    reduces, gathers = emu.call_count("mcclAllReduce"), emu.call_count("mcclAllGather")
    t = torch.tensor(values, dtype=dtype, device="flagos:0")
    opts = dist.AllreduceOptions()
    opts.reduceOp = op
    group.allreduce([t], opts).wait()
    assert t.cpu().tolist() == expected
    assert emu.call_count("mcclAllReduce") - reduces == 1
    assert emu.call_count("mcclAllGather") == gathers
    assert fld.staged_bytes() == staged


def test_coalesced_reductions_mixing_types_are_one_mccl_group(group, emu):
    groups, reduces = emu.call_count("mcclGroupStart"), emu.call_count("mcclAllReduce")
    f = torch.ones(3, device="flagos:0")
    i = torch.full((2,), 5, dtype=torch.int64, device="flagos:0")
    group.allreduce_coalesced([f, i]).wait()
    assert f.cpu().tolist() == [1.0] * 3 and i.cpu().tolist() == [5, 5]
    assert emu.call_count("mcclGroupStart") - groups == 1
    assert emu.call_count("mcclAllReduce") - reduces == 2


def test_injected_mccl_fault_is_an_error_naming_the_call(group, emu):
    t = torch.ones(4, device="flagos:0")
    with emu.fault("mcclAllReduce", 3):  # mcclInternalError
        with pytest.raises(dist.DistBackendError, match=r"MCCL error 3.*injected fault"):
            group.allreduce([t]).wait()


RANK = textwrap.dedent(
    """
    import datetime, json, sys
    import torch
    import torch.distributed as dist
    from torch_fl import distributed as fld
    from torch_fl_musa import emulator as emu

    rank, world, store = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    device = torch.device("flagos", rank)
    torch.flagos.set_device(device)
    dist.init_process_group(
        "flagos", init_method=f"file://{store}", rank=rank, world_size=world,
        timeout=datetime.timedelta(seconds=60),
    )
    calls = ("AllReduce", "Broadcast", "AllGather", "ReduceScatter", "Send", "Recv")
    before = {n: emu.call_count("mccl" + n) for n in calls}
    out = {"rank": rank, "tier": fld.choose().name}

    f = torch.full((4,), float(rank + 1), device=device)
    dist.all_reduce(f)
    i = torch.full((4,), 2**53 + rank, dtype=torch.int64, device=device)
    dist.all_reduce(i)
    b = torch.full((3,), float(rank), device=device)
    dist.broadcast(b, src=1)
    gathered = [torch.empty(2, device=device) for _ in range(world)]
    dist.all_gather(gathered, torch.full((2,), float(rank), device=device))
    scattered = torch.empty(2, device=device)
    dist.reduce_scatter(
        scattered, [torch.full((2,), float(10 * rank + k), device=device) for k in range(world)]
    )
    if rank == 0:
        dist.send(torch.arange(5.0, device=device), dst=1)
    else:
        received = torch.empty(5, device=device)
        dist.recv(received, src=0)
        out["received"] = received.cpu().tolist()
    out["all_reduce"] = f.cpu().tolist()
    out["all_reduce_int64"] = i.cpu().tolist()
    out["broadcast"] = b.cpu().tolist()
    out["all_gather"] = [g.cpu().tolist() for g in gathered]
    out["reduce_scatter"] = scattered.cpu().tolist()
    out["calls"] = {n: emu.call_count("mccl" + n) - before[n] for n in calls}
    dist.destroy_process_group()
    print(json.dumps(out))
    """
)


def test_two_ranks_on_two_gpus_run_every_operation_on_mccl(musa, tmp_path):
    from torch_fl.testing import run_rank_scripts

    assert torch.flagos.device_count() >= 2
    store = str(tmp_path / "store")
    reports = run_rank_scripts(
        RANK, 2, lambda r: [str(r), "2", store], env={"OMP_NUM_THREADS": "1"}, timeout=180
    )
    for out in reports:
        r = out["rank"]
        assert out["tier"] == "vendor", out
        assert out["all_reduce"] == [3.0] * 4, out
        assert out["all_reduce_int64"] == [2**54 + 1] * 4, out  # exact: reduced as int64
        assert out["broadcast"] == [1.0] * 3, out
        assert out["all_gather"] == [[0.0, 0.0], [1.0, 1.0]], out
        assert out["reduce_scatter"] == [10.0 + 2 * r] * 2, out
        p2p = {"Send": 1, "Recv": 0} if r == 0 else {"Send": 0, "Recv": 1}
        assert out["calls"] == {
            "AllReduce": 2,
            "Broadcast": 1,
            "AllGather": 1,
            "ReduceScatter": 1,
            **p2p,
        }, out
    assert reports[1]["received"] == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_all_reduce_captured_in_a_graph_runs_at_each_replay(musa, tmp_path):
    # As NCCL inside a CUDA graph: the all-reduce is recorded with the rest of the step.
    from torch_fl.testing import check_all_reduce_captured_in_a_graph

    check_all_reduce_captured_in_a_graph(str(tmp_path / "store"))
