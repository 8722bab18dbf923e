"""``mode="reduce-overhead"`` on ``flagos``: Inductor's compiled graphs replayed as device graphs.

Inductor wraps compiled code in device graphs only for the ``cuda`` device type: its lowering
refuses any other device ("skipping cudagraphs due to ... non-cuda device"), and its cudagraph
trees manage CUDA tensors through ``torch.cuda``'s allocator hooks. On a vendor that declares
``compile_graphs`` and whose runtime records graphs (:func:`torch_fl.device.graphs.supported`),
two things change, for graphs whose tensors are all on one flagos device:

- the lowering check accepts that device;
- the graph is wrapped by :func:`graphify` below instead of the cudagraph trees: the wrapping
  Inductor uses on CUDA with ``torch._inductor.config.triton.cudagraph_trees = False``. Inputs
  that are not static (parameters and buffers are) are copied into buffers the graph owns, one
  warm-up run, one capture through :class:`torch.flagos.graph`, then each call copies its inputs
  and replays. The outputs are the graph's own buffers: the next call overwrites them, as with
  CUDA's non-tree graphs (clone an output to keep it past the next call).

Graphs with inputs of another device, or whose compiled code needs the host mid-stream, keep
running without graphs (the capture error is logged once per graph, never raised).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import torch

__all__ = ["graphed", "graphify", "install", "note_without_graphs", "stats"]

_DEVICE = "flagos"
log = logging.getLogger("torch_fl.compile")
_stats = {"captured": 0, "without_graphs": 0}


def stats() -> dict[str, int]:
    """How many compiled flagos graphs were captured, and how many run without graphs because
    their capture failed (diagnostics for tests and benchmarks)."""
    return dict(_stats)


def note_without_graphs(why: str) -> None:
    """Count (and log) a compiled graph that runs without device graphs."""
    _stats["without_graphs"] += 1
    log.warning("flagos: running a compiled graph without device graphs: %s", why)


def _flagos_index(devices: Any) -> int | None:
    """The flagos device index when ``devices`` (torch.device keys) name exactly one flagos device
    and nothing else but meta."""
    found = [d for d in devices if torch.device(d).type != "meta"]
    if len(found) == 1 and torch.device(found[0]).type == _DEVICE:
        return torch.device(found[0]).index or 0
    return None


def _accept_flagos_lowering(cudagraph_utils: ModuleType) -> None:
    original = cudagraph_utils.check_multiple_devices_or_any_cpu_nodes
    if getattr(original, "_torch_fl", False):
        return

    def check_multiple_devices_or_any_cpu_nodes(device_node_mapping: dict) -> str | None:
        if _flagos_index(device_node_mapping) is not None:
            return None
        return original(device_node_mapping)

    check_multiple_devices_or_any_cpu_nodes._torch_fl = True  # type: ignore[attr-defined]
    cudagraph_utils.check_multiple_devices_or_any_cpu_nodes = (
        check_multiple_devices_or_any_cpu_nodes
    )


def _static_copy(x: torch.Tensor) -> torch.Tensor:
    # The buffer keeps x's strides (as Inductor's static_input does): compiled code may assume them.
    buffer = torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device=x.device)
    buffer.copy_(x)
    return buffer


def graphify(
    model: Callable[[list[Any]], Any], inputs: list[Any], static_input_idxs: Sequence[int]
) -> Callable[[list[Any]], Any]:
    """Capture ``model`` (an Inductor-compiled callable taking a list of inputs) into a flagos
    device graph; return a callable that copies new inputs in and replays it."""
    static = set(static_input_idxs)
    buffers = [
        x if not isinstance(x, torch.Tensor) else x.detach() if i in static else _static_copy(x)
        for i, x in enumerate(inputs)
    ]
    copy_indices = [
        i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and i not in static
    ]
    device = next(x.device for x in inputs if isinstance(x, torch.Tensor))
    with torch.flagos.device(device):
        side = torch.flagos.Stream()
        side.wait_stream(torch.flagos.current_stream())
        with torch.flagos.stream(side):
            model(
                list(buffers)
            )  # warm-up: lazy initialisation and autotuning stay out of the graph
        torch.flagos.current_stream().wait_stream(side)
        graph = torch.flagos.Graph()
        with torch.flagos.graph(graph, stream=side, capture_error_mode="thread_local"):
            outputs = model(list(buffers))
    if not isinstance(outputs, (list, tuple)):
        outputs = (outputs,)

    def run(new_inputs: list[Any]) -> Any:
        for i in copy_indices:
            src = new_inputs[i]
            if src.data_ptr() != buffers[i].data_ptr():
                buffers[i].copy_(src)
        new_inputs.clear()
        graph.replay()
        return outputs

    run._torch_fl_graph = graph  # type: ignore[attr-defined]
    return run


def graphed(
    model: Callable[[list[Any]], Any],
    static_input_idxs: Sequence[int] = (),
    fallback: Callable[[list[Any]], Any] | None = None,
) -> Callable[[list[Any]], Any]:
    """``model`` captured into a flagos device graph at its first call on one flagos device (per
    thread, as Inductor keeps one graph per thread: a graph's input buffers serve one caller),
    replayed after; calls on other devices run ``fallback`` (default ``model``), and a graph
    whose capture fails runs without graphs (logged once)."""
    state = threading.local()

    def run(new_inputs: list[Any]) -> Any:
        fn = getattr(state, "fn", None)
        if fn is None:
            devices = {x.device for x in new_inputs if isinstance(x, torch.Tensor)}
            if _flagos_index(devices) is None:
                fn = fallback or model
            else:
                try:
                    fn = graphify(model, new_inputs, static_input_idxs)
                    _stats["captured"] += 1
                except RuntimeError as e:
                    _stats["without_graphs"] += 1
                    log.warning("flagos: running a compiled graph without device graphs: %s", e)
                    fn = model
            state.fn = fn
        return fn(new_inputs)

    return run


def _graphify_flagos(compile_fx: ModuleType) -> None:
    original = compile_fx.cudagraphify
    if getattr(original, "_torch_fl", False):
        return

    def cudagraphify(model: Any, static_input_idxs: Sequence[int] = (), **kwargs: Any) -> Any:
        return graphed(model, static_input_idxs, original(model, static_input_idxs, **kwargs))

    cudagraphify._torch_fl = True  # type: ignore[attr-defined]
    compile_fx.cudagraphify = cudagraphify


def install(compile_fx: ModuleType) -> None:
    """Let ``mode="reduce-overhead"`` capture flagos graphs (called when Inductor registers)."""
    from torch._inductor import cudagraph_utils

    _accept_flagos_lowering(cudagraph_utils)
    _graphify_flagos(compile_fx)
