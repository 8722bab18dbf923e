"""Streams and events of ``flagos``: ``torch.Stream``/``torch.Event`` that default to ``flagos``.

Everything goes through the generic ``torch.Stream``/``torch.Event``/``torch.accelerator`` APIs,
which reach the C++ DeviceGuardImpl that ``torch_fl._C`` registers for PrivateUse1; nothing here
talks to the runtime directly.
"""

from __future__ import annotations

from typing import Any

import torch

from torch_fl import _C
from torch_fl.device.index import DeviceLike, explicit_index, resolve

__all__ = [
    "Event",
    "Stream",
    "StreamContext",
    "current_stream",
    "default_stream",
    "set_stream",
    "stream",
]

# Stream id of a device's default stream (the runtime's NULL stream), as in CUDA and in core's
# stream pool (csrc/glue/stream_pool.h).
_DEFAULT_STREAM_ID = 0


class Stream(torch.Stream):
    """A ``flagos`` stream: an in-order queue of work on one device.

    ``Stream()`` is a new stream on the current device, ``Stream("flagos:1")`` one on device 1.
    It is a ``torch.Stream``, so ``query``, ``synchronize``, ``wait_event``, ``wait_stream`` and
    ``record_event`` work as usual; ``with stream:`` makes it current for the block.
    """

    def __new__(cls, device: DeviceLike = None, priority: int = 0, **kwargs: Any) -> Stream:
        if "stream_id" in kwargs:  # rebuilding a Python object for an existing stream
            return super().__new__(cls, priority=priority, **kwargs)
        index = resolve(device)
        return super().__new__(cls, device=torch.device("flagos", index), priority=priority)

    @classmethod
    def _wrap(cls, stream: torch.Stream) -> Stream:
        if isinstance(stream, cls):
            return stream
        return cls(
            stream_id=stream.stream_id,
            device_index=stream.device_index,
            device_type=stream.device_type,
        )

    def record_event(self, event: torch.Event | None = None) -> torch.Event:
        """Record ``event`` (a new :class:`Event` when None) on this stream and return it."""
        if event is None:
            event = Event()
        event.record(self)
        return event

    def __enter__(self) -> Stream:
        context = StreamContext(self)
        self.__dict__.setdefault("_contexts", []).append(context)
        context.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.__dict__["_contexts"].pop().__exit__(*exc)

    def __repr__(self) -> str:
        return f"<torch.flagos.Stream device=flagos:{self.device_index} stream_id={self.stream_id}>"


class _EventMeta(type):
    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, torch.Event) and obj.device.type == "flagos"


class Event(metaclass=_EventMeta):
    """A ``flagos`` event: a marker in a stream, for waiting, syncing and timing.

    ``Event(enable_timing=True)`` is like ``torch.cuda.Event``; the device is taken from the stream
    it is first recorded on. It returns a plain ``torch.Event`` on ``flagos`` (and ``isinstance``
    accepts any such event) rather than an instance of a subclass, because PyTorch's
    ``torch.Event.elapsed_time`` accepts only an exact ``torch.Event`` as its argument, and Triton's
    benchmarking (FlagGems autotuning) times kernels with that call.
    """

    def __new__(  # type: ignore[misc]
        cls,
        enable_timing: bool = False,
        blocking: bool = False,
        interprocess: bool = False,
        *,
        device: DeviceLike = None,
    ) -> torch.Event:
        index = explicit_index(device)
        where = torch.device("flagos") if index is None else torch.device("flagos", resolve(index))
        return torch.Event(
            device=where,
            enable_timing=enable_timing,
            blocking=blocking,
            interprocess=interprocess,
        )


def _check_flagos_stream(stream: torch.Stream) -> None:
    if stream.device.type != "flagos":
        raise ValueError(f"Expected a flagos stream, but got: {stream!r}")


def current_stream(device: DeviceLike = None) -> Stream:
    """The calling thread's current stream on ``device`` (default: the current device)."""
    return Stream._wrap(torch.accelerator.current_stream(resolve(device)))


def default_stream(device: DeviceLike = None) -> Stream:
    """The default stream of ``device`` (default: the current device)."""
    current = torch.accelerator.current_stream(resolve(device))
    return Stream(
        stream_id=_DEFAULT_STREAM_ID,
        device_index=current.device_index,
        device_type=current.device_type,
    )


def set_stream(stream: torch.Stream | None) -> None:
    """Make ``stream`` current for its device and make its device current, like CUDA's.

    Prefer the :func:`stream` context manager. ``None`` is a no-op.
    """
    if stream is None:
        return
    _check_flagos_stream(stream)
    index = resolve(stream.device_index)
    if _C.current_device() != index:
        _C.set_device(index)
    torch.accelerator.set_stream(stream)


class StreamContext:
    """Context manager making a stream current, restoring the previous streams and device after.

    A stream on another device also makes that device current inside the block (like CUDA).
    ``None`` makes the context a no-op.
    """

    def __init__(self, stream: torch.Stream | None) -> None:
        if stream is not None:
            _check_flagos_stream(stream)
        self.stream = stream
        self._src_prev: torch.Stream | None = None
        self._dst_prev: torch.Stream | None = None

    def __enter__(self) -> torch.Stream | None:
        target = self.stream
        if target is None:
            return None
        self._src_prev = torch.accelerator.current_stream(resolve(None))
        if target.device_index != self._src_prev.device_index:
            self._dst_prev = torch.accelerator.current_stream(resolve(target.device_index))
        set_stream(target)
        return target

    def __exit__(self, *exc: object) -> None:
        if self.stream is None:
            return
        if self._dst_prev is not None:
            set_stream(self._dst_prev)
            self._dst_prev = None
        set_stream(self._src_prev)


def stream(stream: torch.Stream | None) -> StreamContext:
    """Context manager running the block with ``stream`` as the current ``flagos`` stream."""
    return StreamContext(stream)
