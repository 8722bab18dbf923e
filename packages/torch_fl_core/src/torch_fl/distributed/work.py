"""The ``Work`` a ``flagos`` process group returns: inner work plus completion on flagos.

For a device-async inner library (NCCL, FlagCX) completion is a ``torch.futures.Future`` created
for the flagos devices of the result, so it follows the CUDA future contract on flagos streams:
completing it records an event on the completing thread's current flagos stream, and ``wait()`` /
``Work.wait()`` make the waiter's current flagos stream wait for that event. The NCCL future
completes when the collective is enqueued, with its callback running on a stream already ordered
after NCCL, so nothing on the host blocks and the collective stays asynchronous until a stream
consumes its result, exactly as on CUDA. gloo completes on its worker thread once every byte is
in place (staged copies back included, see transport.Call.finish), so a plain future suffices.

DDP's reducer takes the result from ``get_future()`` (a list of flagos tensors); the Python API
calls ``wait()``.
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

from torch_fl.distributed.transport import Call, _tensors

__all__ = ["FlagosWork"]

_NO_TIMEOUT = datetime.timedelta(0)


def _rewrap(exc: Exception, where: str) -> Exception:
    # Keep the exception type users and torch's own tests catch (ValueError for bad arguments,
    # DistBackendError for lost peers) and put op, device, vendor and tier in front.
    try:
        return type(exc)(f"{where}: {exc}")
    except Exception:
        return RuntimeError(f"{where}: {exc}")


def _future_for(value: Any, device_async: bool) -> torch.futures.Future:
    # Only a device-async library (NCCL, FlagCX) completes before the device work is done; its
    # future must carry flagos events. gloo completes on the host after every byte is in place,
    # and a plain future avoids an event round trip through the flagos stream per collective.
    devices = sorted({t.device.index or 0 for t in _tensors(value) if t.device.type == "flagos"})
    if devices and device_async:
        return torch.futures.Future(devices=[torch.device("flagos", i) for i in devices])
    return torch.futures.Future()


class FlagosWork(dist.Work):
    """One collective (possibly several inner operations) of a flagos process group."""

    def __init__(
        self,
        where: str,
        inner: Sequence[dist.Work],
        call: Call,
        value: Any,
        post: Callable[[], None] | None = None,
        device_async: bool = False,
    ) -> None:
        super().__init__()
        self._where = where
        self._inner = list(inner)
        self._call = call
        self._value = value
        self._post = post
        self._future = _future_for(value, device_async)
        self._lock = threading.Lock()
        self._finished = False
        futures = []
        for work in self._inner:
            try:
                futures.append(work.get_future())
            except RuntimeError:  # e.g. gloo send/recv work has no future: complete in wait()
                futures = None
                break
        if futures is not None:
            # add_done_callback ignores what the callback raises: _complete never raises. One
            # inner future (the usual case) is used directly so the callback runs inside its
            # device-stream context (for NCCL: a stream already ordered after the collective).
            if len(futures) == 1:
                futures[0].add_done_callback(lambda f: self._complete([f]))
            else:
                both = torch.futures.collect_all(futures)
                both.add_done_callback(lambda f: self._complete(f.value()))

    def _complete(self, done: list[torch.futures.Future]) -> None:
        with self._lock:
            if self._finished:
                return
            self._finished = True
        try:
            for fut in done:
                fut.value()  # re-raises the inner library's error
            self._call.finish()
            if self._post is not None:
                self._post()
            self._future.set_result(self._value)
        except Exception as exc:
            self._future.set_exception(RuntimeError(f"{self._where}: {exc}"))

    def wait(self, timeout: datetime.timedelta = _NO_TIMEOUT) -> bool:
        try:
            for work in self._inner:
                # gloo blocks until done (raising on timeout or a lost peer); NCCL makes the
                # current stream wait for the collective.
                work.wait(timeout) if timeout else work.wait()
        except Exception as exc:
            raise _rewrap(exc, self._where) from exc
        if not self._finished:
            self._complete([])
        self._future.wait()  # raises the wrapped error; orders the current flagos stream
        return True

    def get_future(self) -> torch.futures.Future:
        return self._future

    def is_completed(self) -> bool:
        return self._future.done()

    def is_success(self) -> bool:
        if not self._future.done():
            return False
        try:
            self._future.value()
            return True
        except Exception:
            return False

    def result(self) -> Any:
        return self._future.value()

    def __repr__(self) -> str:
        return f"<FlagosWork {self._where} done={self._future.done()}>"
