"""HCCL through core's collective seat (the ``vendor`` tier) on the CANN emulator's libhccl.so.

One rank in this process: every operation core issues, HCCL's gaps as the library maps them (AVG
summed then divided by core, bool as bytes), the emulator's type list, an injected HCCL fault.
Two and four ranks as processes, DDP, FSDP2, DCP and a dead peer run in the contract suite
(tests/contract/test_distributed.py, not vendor-neutral) with FLAGOS_VENDOR=ascend.
"""

from __future__ import annotations

import textwrap

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


CAPTURE_RANK = textwrap.dedent(
    """
    import datetime, json, sys
    import torch
    import torch.distributed as dist

    rank, world, store = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    device = torch.device("flagos", rank)
    torch.flagos.set_device(device)
    dist.init_process_group(
        "flagos", init_method=f"file://{store}", rank=rank, world_size=world,
        timeout=datetime.timedelta(seconds=60),
    )
    x = torch.ones(4, device=device)
    warm = x.clone()
    dist.all_reduce(warm)  # the communicator made outside the capture
    g = torch.flagos.Graph()
    with torch.flagos.graph(g):
        y = x * 2
        dist.all_reduce(y)
        z = y + 1
    out = {"rank": rank, "replays": []}
    for k in (1.0, 5.0, 7.0):
        x.fill_(k * (rank + 1))
        g.replay()
        out["replays"].append(z.cpu().tolist())
    # The graph is still alive: destroying the group must not wait for launches that may come.
    dist.destroy_process_group()
    print(json.dumps(out))
    """
)


def test_all_reduce_captured_in_a_graph_runs_at_each_replay(ascend, tmp_path):
    # HcclAllReduce runs on the communicator's stream, which joins the capture through events
    # (CANN's aclmdlRICaptureBegin: event deduction brings more streams into the capture): each
    # replay reduces the ranks' current values, and the group is destroyed with the graph alive.
    from torch_fl.testing import run_rank_scripts

    assert torch.flagos.graphs.supported()
    store = str(tmp_path / "store")
    reports = run_rank_scripts(
        CAPTURE_RANK, 2, lambda r: [str(r), "2", store], env={"OMP_NUM_THREADS": "1"}, timeout=120
    )
    for out in reports:
        # z = 2 * (k * 1 + k * 2) + 1 for k = 1, 5, 7
        assert out["replays"] == [[7.0] * 4, [31.0] * 4, [43.0] * 4], out
