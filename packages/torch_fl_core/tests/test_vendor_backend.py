"""Core's c10d backend over the collective ABI (the ``vendor`` tier), on sim's library.

In-process: the library loader's checks, a one-rank group, and two ranks as threads of this
process (sim's library takes threads as ranks) for what needs a peer: results, a peer that
never arrives (an error naming the rank within the group's timeout), calls after a failure.
Thread ranks use one device each (flagos:<rank>), as ranks of a device library do: two ranks
on one device would queue on one device and wait for each other. The multi-process runs (2 and 4 ranks, DDP, FSDP2, DCP, a dead peer) are in
tests/contract/test_distributed.py.
"""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

pytestmark = [
    pytest.mark.distributed,
    pytest.mark.skipif(not dist.is_available(), reason="this torch build has no torch.distributed"),
]


@pytest.fixture(autouse=True)
def _keep_process_up(monkeypatch):
    # The watchdog would take this test process down on an asynchronous failure (as
    # ProcessGroupNCCL's does); here failures must reach the test as exceptions.
    monkeypatch.setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0")


@pytest.fixture(scope="module")
def library(flagos) -> str:
    from torch_fl.distributed import tiers

    path = tiers.vendor_library_path()
    assert path, "sim declares its collective library"
    return path


def _vendor_choice():
    from torch_fl import distributed as fld

    return fld.choose({"FLAGOS_DIST_TIER": "vendor"})


def _groups(world: int, timeout_s: float = 10.0):
    """``world`` ProcessGroupFlagos of the vendor tier over one HashStore, made on threads."""
    from torch_fl import distributed as fld

    store = dist.HashStore()
    groups: list = [None] * world
    errors: list = []

    def make(rank: int) -> None:
        try:
            groups[rank] = fld.ProcessGroupFlagos(
                store, rank, world, datetime.timedelta(seconds=timeout_s), _vendor_choice()
            )
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=make, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    return groups


def _on_ranks(world: int, fn) -> list:
    """fn(rank) on one thread per rank; its results (exceptions re-raised)."""
    results: list = [None] * world

    def body(rank: int) -> None:
        try:
            results[rank] = fn(rank)
        except Exception as exc:
            results[rank] = exc

    threads = [threading.Thread(target=body, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for r in results:
        if isinstance(r, Exception):
            raise r
    return results


def test_library_fields(library):
    from torch_fl import _C

    fields = {name: present for name, _minor, present in _C.collective_fields(library)}
    assert all(fields.values()), fields
    assert {"unique_id", "comm_init", "all_reduce", "group_end"} <= set(fields)


def test_library_load_errors(flagos, tmp_path):
    from torch_fl import _C

    with pytest.raises(RuntimeError, match="cannot load the collective library .*nowhere.so"):
        _C.collective_fields(str(tmp_path / "nowhere.so"))
    import torch_fl

    core_module = torch_fl._C.__file__  # a shared library without the entry point
    with pytest.raises(RuntimeError, match="exports no tfl_collective_get"):
        _C.collective_fields(core_module)


def test_tier_reason_names_the_library(library):
    from torch_fl import distributed as fld

    choice = fld.choose({})
    assert choice.name == "vendor" and choice.view_device == "flagos" and choice.zero_copy
    assert library in choice.reason


def test_one_rank_ops_no_staging(library):
    from torch_fl import _C
    from torch_fl import distributed as fld

    (pg,) = _groups(1)
    dev = torch.device("flagos", 0)
    staged = fld.staged_bytes()
    before = _C._vendor_backend_library_calls(pg._inner.device)
    t = torch.arange(6.0, device=dev)
    assert pg.allreduce([t]).wait()
    z = torch.tensor([1 + 2j, 3 - 1j], device=dev)
    pg.allreduce([z]).wait()
    torch.testing.assert_close(z.cpu(), torch.tensor([1 + 2j, 3 - 1j]))
    b = torch.tensor([True, False], device=dev)
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.MAX
    pg.allreduce([b], opts).wait()
    assert b.cpu().tolist() == [True, False]
    out = torch.empty(6, device=dev)
    pg.all_gather_single(out, t * 2).wait()
    torch.testing.assert_close(out.cpu(), torch.arange(6.0) * 2)
    assert _C._vendor_backend_library_calls(pg._inner.device) == before + 4
    assert fld.staged_bytes() == staged  # no byte went through host memory


def test_one_rank_refusals_name_op_and_cause(library):
    (pg,) = _groups(1)
    dev = torch.device("flagos", 0)
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.BXOR
    with pytest.raises(ValueError, match=r"flagos all_reduce on flagos:0 .*tier vendor.*BXOR"):
        pg.allreduce([torch.ones(3, dtype=torch.int64, device=dev)], opts)
    with pytest.raises(ValueError, match="has no UInt16 type"):
        pg.allreduce([torch.ones(3, dtype=torch.uint16, device=dev)])
    strided = torch.ones(4, 4, device=dev).t()
    with pytest.raises(ValueError, match="must be contiguous"):
        pg.all_gather_single(torch.empty(16, device=dev), strided)
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.PRODUCT
    with pytest.raises(ValueError, match="can only be summed or averaged"):
        pg.allreduce([torch.ones(2, dtype=torch.complex64, device=dev)], opts)
    # The group still works after refusals.
    t = torch.ones(3, device=dev)
    pg.allreduce([t]).wait()
    assert t.cpu().tolist() == [1.0, 1.0, 1.0]


def _two_devices() -> None:
    if torch.flagos.device_count() < 2:
        pytest.skip("thread ranks need one flagos device each (FLAGOS_SIM_DEVICES >= 2)")


@pytest.mark.multidevice
def test_two_thread_ranks(library):
    _two_devices()
    groups = _groups(2)

    def body(rank: int):
        dev = torch.device("flagos", rank)
        t = torch.full((1000,), float(rank + 1), device=dev)
        work = groups[rank].allreduce([t])
        work.wait()
        gathered = torch.empty(2, 3, device=dev)
        groups[rank].all_gather_single(gathered, torch.full((3,), float(rank), device=dev)).wait()
        return t.cpu(), gathered.cpu()

    for t, gathered in _on_ranks(2, body):
        assert torch.equal(t, torch.full((1000,), 3.0))
        assert gathered.tolist() == [[0.0] * 3, [1.0] * 3]


@pytest.mark.multidevice
def test_coalescing_completes_after_every_operation(library):
    # dist._coalescing_manager(device=...): start, operations as they come, one work at the end.
    _two_devices()
    groups = _groups(2)

    def body(rank: int):
        dev = torch.device("flagos", rank)
        a = torch.full((1 << 16,), float(rank + 1), device=dev)
        b = torch.full((3,), float(rank + 10), device=dev)
        g = groups[rank]
        g._start_coalescing(dev)
        g.allreduce([a])
        g.allreduce([b])
        work = g._end_coalescing(dev)
        work.wait()
        return a.cpu(), b.cpu(), work.get_future().wait()

    for a, b, value in _on_ranks(2, body):
        assert torch.equal(a, torch.full((1 << 16,), 3.0)) and b.tolist() == [21.0] * 3
        assert len(value) == 2  # the work carries every coalesced operation's tensors


@pytest.mark.multidevice
def test_peer_never_arrives_is_an_error_naming_the_rank(library, monkeypatch):
    # Blocking wait: Work.wait() raises within the group's timeout (and the watchdog stays off).
    _two_devices()
    monkeypatch.setenv("TORCH_NCCL_BLOCKING_WAIT", "1")
    groups = _groups(2, timeout_s=2.0)
    # Both ranks connect (the communicator is made on the first operation).
    _on_ranks(2, lambda r: groups[r].allreduce([torch.ones(2, device=f"flagos:{r}")]).wait())
    dev = torch.device("flagos", 0)
    start = time.monotonic()
    t = torch.ones(2, device=dev)
    with pytest.raises(
        dist.DistBackendError,
        match=r"flagos all_reduce on flagos:0 \(vendor 'sim', tier vendor, library sim, rank 0/2\)",
    ):
        groups[0].allreduce([t]).wait()  # rank 1 never calls it
    assert time.monotonic() - start < 30
    # From then on the communicator fails every operation at once, saying so.
    with pytest.raises(dist.DistBackendError, match="rank 0/2"):
        groups[0].allreduce([t]).wait()
    for g in groups:
        g.abort()


def test_a_v1_0_library_runs_on_this_core(library, tmp_path, monkeypatch):
    """A library built against the frozen v1.0 header (no attach_runtime) still serves groups."""
    from torch_fl import _C

    here = Path(__file__).resolve().parent
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.fail("no C compiler (cc, gcc, $CC) to build an older collective library")
    lib = tmp_path / "libolder_collective.so"
    cmd = [cc, "-shared", "-fPIC", "-O1", f"-I{here / 'abi'}", f"-I{here.parent / 'include'}"]
    subprocess.run(
        [*cmd, "-o", str(lib), str(here / "abi" / "older_collective.c"), "-ldl"],
        check=True,
        capture_output=True,
        text=True,
    )
    monkeypatch.setenv("TFL_TEST_SIM_LIBRARY", library)
    fields = {name: (minor, present) for name, minor, present in _C.collective_fields(str(lib))}
    assert fields["attach_runtime"] == (1, False)
    assert all(present for minor, present in fields.values() if minor == 0), fields
    backend = _C._vendor_backend(dist.HashStore(), 0, 1, 10.0, str(lib), "sim")
    t = torch.arange(4.0, device="flagos:0")
    backend.allreduce([t]).wait()
    assert t.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
