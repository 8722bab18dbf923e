"""Device graphs on ``flagos``: capture a region of flagos work once, replay it with one launch.

Shaped like ``torch.cuda``'s graph API: :class:`Graph` (``torch.cuda.CUDAGraph``), the
:class:`graph` context manager, :func:`graph_pool_handle` and :func:`is_current_stream_capturing`.

Two ways to capture, chosen by the runtime:

- the runtime's graph seat (runtime ABI v1.3, declared by ``TFL_CAP_GRAPHS``; sim has it): the
  runtime records what the capturing stream is given and replays it. Memory allocated during a
  capture comes from a private pool the graph holds; host kernels on host-addressable memory are
  recorded as host work (their results' sizes from the operators' Meta kernels) that runs at each
  replay, and operators with a generator draw anew at each replay.
- a delegate runtime (``delegate:cuda`` on the cuda vendor) makes flagos streams and memory a torch
  backend's own, so a flagos graph is that backend's graph (CUDA graphs), with its pools and its
  RNG-state capture.

Elsewhere :func:`supported` is False and creating a :class:`Graph` raises an error naming the
runtime; it is a declared capability, never emulated.

During capture the operators of the region must be recordable: an operator that needs the host in
the middle of the stream (the CPU fallback, ``item()``, a blocking copy to or from the host)
raises an error naming it instead of invalidating the capture.
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


def _seat() -> bool:
    """Whether the runtime records graphs through the runtime ABI's graph seat."""
    return bool(_C.runtime_active() and _C.graphs_recorded())


def supported() -> bool:
    """Whether this process's runtime can capture flagos work into device graphs."""
    return _mirrored() is not None or _seat()


# Capture modes as torch.cuda spells them, in the runtime ABI's order (tfl_capture_mode).
_MODES = {"global": 0, "thread_local": 1, "relaxed": 2}


def _require() -> ModuleType | None:
    """The mirrored backend's device module, None for the graph seat; raises when neither."""
    torch.flagos._lazy_init()
    backend = _mirrored()
    if backend is None and not _seat():
        import torch_fl

        raise RuntimeError(
            f"torch.flagos graphs: vendor {torch_fl.vendor().name!r} (runtime "
            f"{_C.runtime_name()!r}) cannot capture device graphs: its runtime declares no graph "
            "seat (runtime ABI v1.3 graph_* functions with TFL_CAP_GRAPHS) and does not delegate "
            f"to a torch backend recording graphs ({', '.join(_GRAPH_BACKENDS)}). Run the region "
            "eagerly, or compile it without mode='reduce-overhead'."
        )
    return backend


class _SeatGraph:
    """The graph seat's graph behind :class:`Graph` (the methods of ``torch.cuda.CUDAGraph``)."""

    def __init__(self, keep_graph: bool) -> None:
        self._id = int(_C._graph_new())
        self._keep_graph = keep_graph

    def __del__(self) -> None:
        try:
            _C._graph_delete(self._id)
        except Exception:  # noqa: BLE001 - interpreter teardown: nothing left to tell
            pass

    def capture_begin(self, pool: Any = None, capture_error_mode: str = "global") -> None:
        if capture_error_mode not in _MODES:
            raise ValueError(
                f"torch.flagos graphs: capture_error_mode must be one of {sorted(_MODES)}, "
                f"not {capture_error_mode!r}"
            )
        _C._graph_capture_begin(self._id, _pool_id(pool), _MODES[capture_error_mode])

    def capture_end(self) -> None:
        _C._graph_capture_end(self._id)

    def instantiate(self) -> None:
        _C._graph_instantiate(self._id)

    def replay(self) -> None:
        _C._graph_replay(self._id)

    def reset(self) -> None:
        _C._graph_reset(self._id)

    def pool(self) -> tuple[int, int]:
        return (0, int(_C._graph_pool(self._id)))

    def enable_debug_mode(self) -> None:
        pass  # the seat keeps no separate debug form of a graph

    def debug_dump(self, path: str) -> None:
        raise RuntimeError(
            f"torch.flagos graphs: runtime {_C.runtime_name()!r} records graphs through the "
            "graph seat, which has no dump format"
        )


def _pool_id(pool: Any) -> int:
    """The seat's pool id of a ``graph_pool_handle()`` / ``Graph.pool()`` value (0: a new one)."""
    if pool is None:
        return 0
    if isinstance(pool, tuple) and len(pool) == 2 and all(isinstance(p, int) for p in pool):
        return pool[1] or pool[0]
    raise TypeError(
        f"torch.flagos graphs: pool must be graph_pool_handle() or another graph's pool(), "
        f"not {pool!r}"
    )


class Graph:
    """A device graph of flagos work (``torch.cuda.CUDAGraph`` for flagos).

    ``capture_begin``/``capture_end`` record the work queued on the current flagos stream in
    between (use the :class:`graph` context manager, which also picks a side stream); ``replay``
    launches it again on the current stream, over the same memory.
    """

    def __init__(self, keep_graph: bool = False) -> None:
        backend = _require()
        self._seat = backend is None
        if backend is None:
            self._impl: Any = _SeatGraph(keep_graph)
        else:
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
        if not self._seat:  # the seat's graph keeps the thread's capture state itself
            _C._set_capturing_device(device)

    def capture_end(self) -> None:
        """End the capture begun by :meth:`capture_begin` (on the same device and stream)."""
        try:
            self._impl.capture_end()
        finally:
            self._device = None
            if not self._seat:
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
    backend = _require()
    if backend is None:
        return (0, int(_C._graph_new_pool()))
    return backend.graph_pool_handle()


def is_current_stream_capturing() -> bool:
    """Whether the current flagos stream is capturing a graph (False where graphs are absent)."""
    if not torch.flagos.is_initialized():
        return False
    backend = _mirrored()
    if backend is not None:
        return bool(backend.is_current_stream_capturing())
    return bool(_seat() and _C._capture_sink_active())


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
