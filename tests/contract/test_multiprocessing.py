"""flagos tensors sent to other processes through ``torch.multiprocessing``, with the spawn and
forkserver start methods.

Where the runtime shares memory between processes (its own IPC handles, runtime ABI v1.1, as on
sim; or CUDA IPC where the runtime mirrors CUDA), a flagos tensor put on a queue arrives in the
child as a flagos tensor on the same device, with its shape, strides, offset, dtype, class and
``requires_grad``, over the sender's memory: what the child writes the parent reads after a
synchronize. With the runtime's handles the child's tensor also outlives the parent's, a handle
the sender no longer holds fails to open with an error saying so, and a tensor sent back arrives
over the sender's own memory. Elsewhere sending one raises an error naming
the device, the runtime and the way out (``.cpu()``) in the sender, at ``put()`` itself (not later
in the queue's feeder thread, which would drop the data), and the way out works. Every child runs
under a deadline and is terminated after it, so a failure never hangs.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import queue
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

sys.path.insert(0, str(Path(__file__).parent))  # children import the worker module by name
import _mp_worker  # noqa: E402

pytestmark = [pytest.mark.multiprocessing, pytest.mark.usefixtures("flagos")]

METHODS = [m for m in ("spawn", "forkserver") if m in multiprocessing.get_all_start_methods()]
DEADLINE = float(os.environ.get("FLAGOS_TEST_MP_TIMEOUT", "120"))
D0 = torch.device("flagos", 0)


def _shares() -> bool:
    import torch_fl.multiprocessing

    return torch_fl.multiprocessing.can_share()


def _runtime_ipc() -> bool:
    import torch_fl.multiprocessing

    return torch_fl.multiprocessing.mechanism() == "runtime"


def _runtime() -> str:
    import torch_fl

    return str(torch_fl._C.runtime_name())


class _Child:
    """A child running _mp_worker.receive: send(item), then report() for its description."""

    def __init__(self, method: str) -> None:
        self.ctx = mp.get_context(method)
        self.inq, self.outq = self.ctx.Queue(), self.ctx.Queue()
        self.deadline = time.monotonic() + DEADLINE
        self.process = self.ctx.Process(
            target=_mp_worker.receive, args=(self.inq, self.outq, DEADLINE), daemon=True
        )
        self.process.start()

    def report(self) -> dict | None:
        remaining = max(1.0, self.deadline - time.monotonic())
        try:
            kind, payload = self.outq.get(timeout=remaining)
        except queue.Empty:
            pytest.fail(
                f"the child sent no report within {DEADLINE:.0f} s "
                f"(alive: {self.process.is_alive()}, exit code {self.process.exitcode})"
            )
        if kind == "error":
            pytest.fail(f"the child failed:\n{payload}")
        assert kind != "empty", "the child received nothing: the item was dropped"
        return payload

    def stop(self) -> None:
        self.inq.put(_mp_worker.STOP)
        while True:
            kind, _ = self.outq.get(timeout=max(1.0, self.deadline - time.monotonic()))
            if kind == "stopped":
                break
        self.process.join(max(1.0, self.deadline - time.monotonic()))
        assert self.process.exitcode == 0, f"the child exited with {self.process.exitcode}"

    def close(self) -> None:
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)
        for q in (self.inq, self.outq):
            q.close()
            q.cancel_join_thread()


@contextlib.contextmanager
def child(method: str):
    c = _Child(method)
    try:
        yield c
    finally:
        c.close()


def _assert_refused(excinfo, device: torch.device, what: str = "tensors") -> None:
    message = str(excinfo.value)
    assert f"{device} {what} cannot be shared between processes" in message, message
    assert f"runtime {_runtime()!r}" in message, message
    assert ".cpu()" in message, message


@pytest.mark.parametrize("method", METHODS)
def test_queue_put_flagos_tensor(method, flagos):
    if _shares():
        _check_shared(method, flagos)
    else:
        _check_refused(method, flagos)


def _check_shared(method, flagos):
    base = torch.arange(12, dtype=torch.float32, device=D0).reshape(3, 4)
    view = base[:, 1:3]
    param = torch.nn.Parameter(torch.ones(3, device=D0))
    ints = torch.arange(5, device=D0)
    storage = torch.arange(4, dtype=torch.uint8, device=D0).untyped_storage()
    other = None
    if flagos.device_count() > 1:
        other = torch.zeros(2, device="flagos:1")
    with child(method) as c:
        c.inq.put(("write", view, 7.0))
        got = c.report()
        assert got["device"] == "flagos:0" and got["class"] == "Tensor", got
        assert got["shape"] == (3, 2) and got["stride"] == (4, 1) and got["offset"] == 1, got
        assert got["dtype"] == "torch.float32" and got["values"] == [[7.0, 7.0]] * 3, got
        flagos.synchronize()
        expected = torch.arange(12, dtype=torch.float32).reshape(3, 4)
        expected[:, 1:3] = 7.0
        assert torch.equal(base.cpu(), expected), "the child's write is not in the parent's tensor"

        c.inq.put(param)
        got = c.report()
        assert got["class"] == "Parameter" and got["requires_grad"] is True, got
        assert got["device"] == "flagos:0" and got["values"] == [1.0, 1.0, 1.0], got

        c.inq.put(ints)
        got = c.report()
        assert got["dtype"] == "torch.int64" and got["values"] == [0, 1, 2, 3, 4], got

        c.inq.put(storage)
        got = c.report()
        assert got["class"] == "UntypedStorage" and got["device"] == "flagos:0", got
        assert got["nbytes"] == 4 and got["values"] == [0, 1, 2, 3], got

        if other is not None:
            c.inq.put(("write", other, 3.0))
            got = c.report()
            assert got["device"] == "flagos:1", got
            flagos.synchronize(1)
            assert other.cpu().tolist() == [3.0, 3.0]
        c.stop()


def _check_refused(method, flagos):
    x = torch.arange(4, dtype=torch.float32, device=D0)
    with child(method) as c:
        # put() itself raises: nothing is buffered for the feeder thread to drop.
        with pytest.raises(RuntimeError) as excinfo:
            c.inq.put(x)
        _assert_refused(excinfo, D0)
        for holder in ({"batch": [x]}, (x[1:],), _mp_worker.Holder(x)):
            with pytest.raises(RuntimeError) as excinfo:
                c.inq.put(holder)
            _assert_refused(excinfo, D0)
        with pytest.raises(RuntimeError) as excinfo:
            c.inq.put(x.untyped_storage())
        _assert_refused(excinfo, D0, "storages")
        if flagos.device_count() > 1:
            with pytest.raises(RuntimeError) as excinfo:
                c.inq.put(torch.ones(2, device="flagos:1"))
            _assert_refused(excinfo, torch.device("flagos", 1))
        # The way out the message names: a CPU copy, shared memory included.
        c.inq.put(x.cpu())
        got = c.report()
        assert got["device"] == "cpu" and got["values"] == [0.0, 1.0, 2.0, 3.0], got
        shared = x.cpu().share_memory_()
        c.inq.put(("write", shared, 5.0))
        assert c.report()["values"] == [5.0] * 4
        assert shared.tolist() == [5.0] * 4
        c.stop()
    # Process arguments are pickled by start(), in the parent: it raises and starts nothing.
    ctx = mp.get_context(method)
    p = ctx.Process(target=_mp_worker.receive, args=(x, None, 1.0), daemon=True)
    with pytest.raises(RuntimeError) as excinfo:
        p.start()
    _assert_refused(excinfo, D0)
    assert p.pid is None, "a child was started"


@pytest.mark.parametrize("method", METHODS)
def test_received_tensor_outlives_the_senders(method, flagos):
    """The child keeps what it received; the parent frees its tensor (and its cache): the child
    still reads the values, because its mapping holds the memory."""
    if not _runtime_ipc():
        pytest.skip(f"runtime {_runtime()!r} does not share memory through its own IPC handles")
    x = torch.arange(1000, dtype=torch.float32, device=D0) * 3
    with child(method) as c:
        c.inq.put(("keep", x))
        assert c.report()["values"][:3] == [0.0, 3.0, 6.0]
        del x
        flagos.empty_cache()
        torch.zeros(4096, device=D0).add_(1.0)  # new tensors do not land in the kept memory
        c.inq.put(("kept",))
        got = c.report()
        assert got["values"][:3] == [0.0, 3.0, 6.0] and got["values"][-1] == 2997.0, got
        c.stop()


@pytest.mark.parametrize("method", METHODS)
def test_tensor_sent_back_is_the_senders_memory(method, flagos):
    if not _runtime_ipc():
        pytest.skip(f"runtime {_runtime()!r} does not share memory through its own IPC handles")
    x = torch.zeros(6, device=D0)
    with child(method) as c:
        c.inq.put(("echo", x[2:]))
        kind, back = c.outq.get(timeout=DEADLINE)
        assert kind == "tensor", back
        assert back.device == D0 and back.shape == (4,) and back.storage_offset() == 2
        back.fill_(5.0)
        flagos.synchronize()
        assert x.cpu().tolist() == [0.0, 0.0, 5.0, 5.0, 5.0, 5.0]
        del back
        c.stop()


def test_a_handle_the_sender_no_longer_holds_fails_to_open(flagos):
    """Unpickled after the sender freed the tensor: an error saying so, never other bytes."""
    if not _runtime_ipc():
        pytest.skip(f"runtime {_runtime()!r} does not share memory through its own IPC handles")
    from multiprocessing.reduction import ForkingPickler

    x = torch.full((8,), 2.0, device=D0)
    payload = bytes(ForkingPickler.dumps(x))
    same = ForkingPickler.loads(payload)  # while held: the sender's own memory
    same.add_(1.0)
    assert x.cpu().tolist() == [3.0] * 8
    del x, same
    flagos.ipc_collect()  # opened once: the sender lets go of it (as torch.cuda.ipc_collect())
    with pytest.raises(RuntimeError, match="no longer holds the exported allocation"):
        ForkingPickler.loads(payload)


def test_a_sent_temporary_stays_until_its_receiver_opens_it(flagos):
    """``q.put(x * 2)``: the sender's only reference goes once the tensor is pickled; as with CUDA
    IPC, the sender keeps the memory until the receiver has opened it, then lets go."""
    if not _runtime_ipc():
        pytest.skip(f"runtime {_runtime()!r} does not share memory through its own IPC handles")
    from multiprocessing.reduction import ForkingPickler

    import torch_fl.multiprocessing

    x = torch.arange(8.0, device=D0)
    payload = bytes(ForkingPickler.dumps(x * 2))  # the temporary is dropped here
    flagos.empty_cache()
    torch.zeros(4096, device=D0).add_(1.0)  # new tensors do not land in the sent memory
    assert torch_fl.multiprocessing.ipc_collect() >= 1  # not opened yet: still held
    got = ForkingPickler.loads(payload)
    assert got.cpu().tolist() == [float(2 * i) for i in range(8)]
    del got
    assert torch_fl.multiprocessing.ipc_collect() == 0  # opened: let go


@pytest.mark.parametrize("method", METHODS)
def test_queue_put_of_a_temporary_reaches_the_child(method, flagos):
    if not _shares():
        pytest.skip(f"runtime {_runtime()!r} shares no memory between processes")
    x = torch.arange(1000, dtype=torch.float32, device=D0)
    with child(method) as c:
        for k in range(1, 4):
            c.inq.put(x * k)  # nothing in the parent holds the sent tensor
            flagos.empty_cache()
            got = c.report()
            assert got["values"][:3] == [0.0, float(k), float(2 * k)], got
        c.stop()


def test_forking_pickler_flagos_tensor(flagos):
    """What SimpleQueue, Pipe connections and Process arguments use: pickling for another
    process succeeds where flagos tensors are shared and raises the clear error elsewhere."""
    from multiprocessing.reduction import ForkingPickler

    x = torch.arange(4, dtype=torch.float32, device=D0)
    if _shares():
        assert isinstance(bytes(ForkingPickler.dumps(x)), bytes)
        assert isinstance(bytes(ForkingPickler.dumps(x.untyped_storage())), bytes)
        return
    with pytest.raises(RuntimeError) as excinfo:
        ForkingPickler.dumps(x)
    _assert_refused(excinfo, D0)
    with pytest.raises(RuntimeError) as excinfo:
        ForkingPickler.dumps(x.untyped_storage())
    _assert_refused(excinfo, D0, "storages")
    q = mp.get_context(METHODS[0]).SimpleQueue()
    try:
        with pytest.raises(RuntimeError) as excinfo:
            q.put([x])
        _assert_refused(excinfo, D0)
    finally:
        q.close()


def test_cpu_tensors_and_plain_pickle_unchanged(flagos):
    """CPU tensors still travel through torch's shared memory; plain pickle (and torch.save,
    test_serialization.py) of a flagos tensor still copies it."""
    from multiprocessing.reduction import ForkingPickler

    cpu = torch.zeros(3)
    received = ForkingPickler.loads(ForkingPickler.dumps(cpu))
    received.fill_(2.0)
    assert cpu.is_shared() and cpu.tolist() == [2.0, 2.0, 2.0]

    x = torch.arange(4, dtype=torch.float32, device=D0)
    y = pickle.loads(pickle.dumps(x))
    assert y.device == D0 and y.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]


class _FlagosItems(torch.utils.data.Dataset):
    """Items made on flagos in the worker (what a dataset that moves its samples does)."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.full((3,), float(i), device="flagos")


@pytest.mark.parametrize("method", METHODS)
def test_dataloader_worker_returning_flagos_tensors(method, flagos):
    """Where flagos memory can be shared the batches arrive; where it cannot, the main process
    raises the worker's error naming the device and the fix (not "worker exited unexpectedly")."""
    loader = torch.utils.data.DataLoader(
        _FlagosItems(),
        batch_size=2,
        num_workers=1,
        multiprocessing_context=method,
        timeout=DEADLINE,
    )
    if _shares():
        got = [batch.cpu().tolist() for batch in loader]
        assert got == [[[0.0] * 3, [1.0] * 3], [[2.0] * 3, [3.0] * 3]]
        return
    import torch_fl.multiprocessing

    with pytest.raises(torch_fl.multiprocessing.SharingError) as excinfo:
        list(loader)
    message = str(excinfo.value)
    assert "in DataLoader worker process 0" in message, message
    assert "flagos:0 tensors cannot be shared between processes" in message, message
    assert "return CPU tensors from the dataset" in message, message
