"""The cuda vendor's collective library (NCCL through core's collective seat, the ``vendor`` tier).

The table checks run anywhere the wheel is installed; the ``gpu`` ones run a one-rank group (one
GPU: the H200) through the seat with ``FLAGOS_DIST_TIER=vendor``, against the same operations'
known results, and count that no byte went through host memory.
"""

from __future__ import annotations

import datetime

import pytest
import torch
import torch.distributed as dist

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not dist.is_available(), reason="this torch build has no torch.distributed"),
]


def _library() -> str:
    from torch_fl_cuda.vendor import NCCL_LIBRARY

    assert NCCL_LIBRARY is not None and NCCL_LIBRARY.is_file(), (
        f"torch-fl-cuda was built without its collective library ({NCCL_LIBRARY})"
    )
    return str(NCCL_LIBRARY)


def test_table_is_complete_v1_1():
    from torch_fl import _C

    fields = {name: (minor, present) for name, minor, present in _C.collective_fields(_library())}
    missing = [n for n, (_m, present) in fields.items() if not present and n != "comm_split"]
    assert not missing, missing
    assert fields["comm_split"] == (0, False)  # core makes sub-groups from fresh ids
    assert fields["attach_runtime"] == (1, True)


_BEFORE_ATTACH = """
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.tfl_collective_get.restype = ctypes.c_void_p
assert lib.tfl_collective_get(2) is None  # an unknown ABI version
table = lib.tfl_collective_get(1)
# After the 16-byte header (two u32 and the name): status_name, last_error, unique_id.
fields = ctypes.cast(table + 16, ctypes.POINTER(ctypes.c_void_p))
last_error = ctypes.CFUNCTYPE(ctypes.c_char_p)(fields[1])
unique_id = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(fields[2])
buf = ctypes.create_string_buffer(8192)
print(unique_id(ctypes.addressof(buf)), last_error().decode())
"""


def test_calls_before_attach_say_so():
    # A fresh process without torch: NCCL is not loaded and no runtime is attached.
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _BEFORE_ATTACH, _library()],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    status, message = out.split(" ", 1)
    assert int(status) != 0, out
    assert "tfl_unique_id" in message, message
    assert "libnccl.so.2" in message or "no runtime attached" in message, message


def _one_rank_group():
    from torch_fl import distributed as fld

    choice = fld.choose({"FLAGOS_DIST_TIER": "vendor"})
    return fld.ProcessGroupFlagos(
        dist.HashStore(), 0, 1, datetime.timedelta(seconds=60), choice=choice
    )


@pytest.mark.gpu
def test_one_rank_group_through_the_seat():
    from torch_fl import _C
    from torch_fl import distributed as fld

    pg = _one_rank_group()
    assert pg.tier.name == "vendor"
    assert fld.tiers.vendor_library_path().endswith("libtorch_fl_cuda_nccl.so")
    dev = torch.device("flagos", 0)
    staged = fld.staged_bytes()
    t = torch.arange(1 << 16, dtype=torch.float32, device=dev)
    ref = t.clone()
    pg.allreduce([t]).wait()
    assert torch.equal(t, ref)
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.AVG
    h = torch.ones(1000, dtype=torch.bfloat16, device=dev) * 3
    pg.allreduce([h], opts).wait()
    assert torch.equal(h.cpu(), torch.full((1000,), 3.0, dtype=torch.bfloat16))
    b = torch.tensor([True, False, True], device=dev)
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.MIN
    pg.allreduce([b], opts).wait()
    assert b.cpu().tolist() == [True, False, True]
    out = torch.empty(1 << 16, device=dev)
    pg.all_gather_single(out, t * 2).wait()
    assert torch.equal(out, ref * 2)
    rs = torch.empty(1 << 16, device=dev)
    pg.reduce_scatter_single(rs, t + 1).wait()
    assert torch.equal(rs, ref + 1)
    a2a = torch.empty(1 << 16, device=dev)
    pg.all_to_all_single(a2a, t - 1, [], []).wait()
    assert torch.equal(a2a, ref - 1)
    bc = torch.full((7,), 5.0, device=dev)
    pg.broadcast([bc]).wait()
    assert bc.cpu().tolist() == [5.0] * 7
    pg.barrier().wait()  # no device named: a host barrier, as on ProcessGroupNCCL without one
    # One library call for each of the seven device operations above.
    assert _C._vendor_backend_library_calls(pg._inner.device) == 7
    assert fld.staged_bytes() == staged


@pytest.mark.gpu
def test_async_work_orders_the_current_stream():
    # The collective runs on the communicator's stream after the producer on a side stream; a
    # consumer on the current stream after wait() sees its result (no host synchronize).
    pg = _one_rank_group()
    dev = torch.device("flagos", 0)
    side = torch.flagos.Stream()
    with torch.flagos.stream(side):
        x = torch.full((1 << 22,), 2.0, device=dev)
        x.mul_(3)
        work = pg.allreduce([x])
        work.wait()
        y = x + 1
    side.synchronize()
    assert torch.equal(y, torch.full((1 << 22,), 7.0, device=dev))
