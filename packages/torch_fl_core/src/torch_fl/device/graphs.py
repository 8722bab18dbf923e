"""Device graphs on ``flagos``: capture a region of flagos work once, replay it with one launch.

Shaped like ``torch.cuda``'s graph API: :class:`Graph` (``torch.cuda.CUDAGraph``), the
:class:`graph` context manager, :func:`graph_pool_handle` and :func:`is_current_stream_capturing`.

Capture needs a runtime whose streams and memory are those of a torch backend that records
graphs: the delegate runtime (``delegate:cuda`` on the cuda vendor) makes flagos streams that
backend's streams and flagos memory its caching allocator's, so a flagos graph is that backend's
graph of the same kernels, with its private memory pools and its RNG-state capture. Where the
runtime has no such backend (sim, the SDK runtimes), :func:`supported` is False and creating a
:class:`Graph` raises an error naming the runtime; it is a declared capability, never emulated.

During capture the operators of the region must run device kernels: an operator that needs the
host in the middle of the stream (the CPU fallback, a host-written result) raises an error naming
it instead of invalidating the capture.
"""

from __future__ import annotations

import gc
import importlib
from types import ModuleType
from typing import Any

import torch

from torch_fl import _C

__all__ = ["Graph", "graph", "graph_pool_handle", "is_current_stream_capturing", "supported"]

# torch backends whose device module records graphs with this API (CUDA, and ROCm under its name).
_GRAPH_BACKENDS = ("cuda",)


def _mirrored() -> ModuleType | None:
    """The device module of the torch backend the runtime delegates to, when it records graphs."""
    runtime = str(_C.runtime_name())
    if not runtime.startswith("delegate:"):
        return None
    name = runtime.split(":", 1)[1]
    if name not in _GRAPH_BACKENDS:
        return None
    module = importlib.import_module(f"torch.{name}")
    return module if hasattr(module, "CUDAGraph") else None


def supported() -> bool:
    """Whether this process's runtime can capture flagos work into device graphs."""
    return _mirrored() is not None


def _require() -> ModuleType:
    torch.flagos._lazy_init()
    backend = _mirrored()
    if backend is None:
        import torch_fl

        raise RuntimeError(
            f"torch.flagos graphs: vendor {torch_fl.vendor().name!r} (runtime "
            f"{_C.runtime_name()!r}) cannot capture device graphs: only a runtime that delegates "
            f"to a torch backend recording graphs ({', '.join(_GRAPH_BACKENDS)}) can. Run the "
            "region eagerly, or compile it without mode='reduce-overhead'."
        )
    return backend


class Graph:
    """A device graph of flagos work (``torch.cuda.CUDAGraph`` for flagos).

    ``capture_begin``/``capture_end`` record the work queued on the current flagos stream in
    between (use the :class:`graph` context manager, which also picks a side stream); ``replay``
    launches it again on the current stream, over the same memory.
    """

    def __init__(self, keep_graph: bool = False) -> None:
        backend = _require()
        self._impl = backend.CUDAGraph(keep_graph) if keep_graph else backend.CUDAGraph()
        self._device: int | None = None

    def capture_begin(self, pool: Any = None, capture_error_mode: str = "global") -> None:
        """Begin capturing on the current flagos stream (which must not be the default stream)."""
        device = torch.flagos.current_device()
        stream = torch.flagos.current_stream(device)
        if stream.stream_id == torch.flagos.default_stream(device).stream_id:
            raise RuntimeError(
                f"torch.flagos graphs: capture on flagos:{device} needs a non-default stream "
                "(use `with torch.flagos.graph(g):`, which captures on a side stream)"
            )
        self._impl.capture_begin(pool=pool, capture_error_mode=capture_error_mode)
        self._device = device
        _C._set_capturing_device(device)

    def capture_end(self) -> None:
        """End the capture begun by :meth:`capture_begin` (on the same device and stream)."""
        try:
            self._impl.capture_end()
        finally:
            self._device = None
            _C._set_capturing_device(-1)

    def instantiate(self) -> None:
        """Instantiate a graph captured with ``keep_graph=True`` (``replay`` does it otherwise)."""
        self._impl.instantiate()

    def replay(self) -> None:
        """Launch the captured work on the current stream."""
        self._impl.replay()

    def reset(self) -> None:
        """Drop the captured graph (and its hold on its memory pool); the object can capture
        again."""
        self._impl.reset()

    def pool(self) -> Any:
        """This graph's memory pool id, to share with a later capture (``graph(pool=...)``)."""
        return self._impl.pool()

    def enable_debug_mode(self) -> None:
        self._impl.enable_debug_mode()

    def debug_dump(self, path: str) -> None:
        self._impl.debug_dump(path)


def graph_pool_handle() -> Any:
    """A memory pool id that several graphs can capture into (``torch.cuda.graph_pool_handle``)."""
    return _require().graph_pool_handle()


def is_current_stream_capturing() -> bool:
    """Whether the current flagos stream is capturing a graph (False where graphs are absent)."""
    backend = _mirrored() if torch.flagos.is_initialized() else None
    return bool(backend is not None and backend.is_current_stream_capturing())


class graph:
    """Capture the block into ``graph`` (``torch.cuda.graph`` for flagos).

    ``pool``: a memory pool id (:func:`graph_pool_handle`, ``other.pool()``) to capture into;
    ``stream``: the flagos stream to capture on (default: one side stream per process, as CUDA's);
    ``capture_error_mode``: ``"global"``, ``"thread_local"`` or ``"relaxed"``, as for CUDA.
    Pending work is synchronized and unused cached memory released before the capture begins.
    """

    # One side stream per device, as torch.cuda.graph keeps one: capture cannot use the default
    # stream, and reusing one stream keeps captures from creating a stream each.
    _side_streams: dict[int, torch.Stream] = {}

    def __init__(
        self,
        graph: Graph,
        pool: Any = None,
        stream: torch.Stream | None = None,
        capture_error_mode: str = "global",
    ) -> None:
        self.graph = graph
        self.pool = pool
        self.capture_error_mode = capture_error_mode
        device = torch.flagos.current_device()
        if stream is None:
            stream = type(self)._side_streams.setdefault(device, torch.flagos.Stream(device))
        if stream.device_index != device:
            raise RuntimeError(
                f"torch.flagos.graph: the capture stream is on flagos:{stream.device_index}, the "
                f"current device is flagos:{torch.flagos.current_device()}"
            )
        self.stream = stream
        self._context: Any = None

    def __enter__(self) -> None:
        torch.flagos.synchronize()
        gc.collect()
        torch.flagos.empty_cache()
        self._context = torch.flagos.stream(self.stream)
        self._context.__enter__()
        self.graph.capture_begin(self.pool, capture_error_mode=self.capture_error_mode)

    def __exit__(self, *exc: object) -> None:
        try:
            self.graph.capture_end()
        finally:
            self._context.__exit__(*exc)
