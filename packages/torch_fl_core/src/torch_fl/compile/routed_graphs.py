"""Compiled ``flagos`` graphs on a vendor without Inductor code generation.

Where a vendor has no scheduling (its device memory is not host-addressable, so Inductor's C++
kernels cannot read it, and it declares no Triton target), Inductor cannot generate kernels for
its graphs. ``torch.compile`` still runs them: Dynamo's graph goes through AOTAutograd (functional
forward and backward graphs, the joint partitioned as eager saves activations) and each ATen
operator of those graphs is called on ``flagos`` as in eager mode, so through the route table onto
the vendor's kernels, with eager's numerics. Modern scripts call ``torch.compile`` unconditionally;
on such a vendor they run instead of stopping.

One notice per process says which vendor, why it has no code generation, and what would give it.

Under ``mode="reduce-overhead"``, where the vendor declares ``compile_graphs`` and its runtime
records graphs, the forward and backward graphs are each captured into a device graph at their
first call and replayed after (:func:`torch_fl.compile.graph_wrapping.graphed`), so a step costs
one launch per graph instead of one routed call per operator. A graph that writes into one of
its inputs (optimizer state, batch-norm statistics) runs without device graphs: its inputs are
copied into the graph's own buffers at each replay, so the write would miss the caller's tensor.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any

import torch

__all__ = ["NoCodegenWarning", "compile_graph", "compiled_graphs", "notice"]

_lock = threading.Lock()
_noticed = False
_compiled = 0


class NoCodegenWarning(UserWarning):
    """``torch.compile`` runs a ``flagos`` graph without generated kernels on this vendor."""


def notice(vendor: str) -> str:
    """The notice's text for ``vendor``."""
    return (
        f"flagos: vendor {vendor!r} has no Inductor code generation here: its device memory is "
        "not host-addressable (Inductor's C++ kernels cannot read it) and it declares no Triton "
        "target (compile_scheduling). torch.compile runs its graphs through AOTAutograd, each "
        "ATen operator on the vendor's routed kernels with eager's numerics, without generated "
        "fused kernels. A Triton backend for this device (such as FlagTree's), declared by the "
        "vendor as compile_scheduling='triton' with its triton_target, gives it code generation "
        "(docs/compile.md)."
    )


def _notice_once(vendor: str) -> None:
    global _noticed
    with _lock:
        if _noticed:
            return
        _noticed = True
    warnings.warn(notice(vendor), NoCodegenWarning, stacklevel=3)


def compiled_graphs() -> int:
    """How many ``flagos`` graphs this process has compiled this way."""
    return _compiled


def _mutated_inputs(graph: torch.fx.GraphModule) -> set[int]:
    """Indices of the placeholders that ``graph`` writes into (in-place or ``copy_``)."""
    placeholders = [n for n in graph.graph.nodes if n.op == "placeholder"]
    index = {n: i for i, n in enumerate(placeholders)}
    written: set[int] = set()
    for node in graph.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        for arg, info in zip(node.args, node.target._schema.arguments, strict=False):
            if info.alias_info is not None and info.alias_info.is_write and arg in index:
                written.add(index[arg])
    return written


def compile_graph(
    gm: torch.fx.GraphModule, example_inputs: Any, vendor: str, graphs: bool = False
) -> Any:
    """The callable ``torch.compile`` runs for Dynamo's graph ``gm``: AOTAutograd's forward (and,
    under autograd, backward) graphs, run operator by operator on ``flagos``; with ``graphs``
    (``mode="reduce-overhead"``) replayed as device graphs where the vendor records them."""
    global _compiled
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    from torch_fl.compile import choice, graph_wrapping

    _notice_once(vendor)
    replay = graphs and choice.graphs_supported()

    def run_as_traced(graph: torch.fx.GraphModule, _inputs: Any) -> Any:
        fn = make_boxed_func(graph.forward)
        if not replay:
            return fn
        if _mutated_inputs(graph):
            graph_wrapping.note_without_graphs("the graph writes into its inputs")
            return fn
        graphed = graph_wrapping.graphed(fn)
        return make_boxed_func(lambda *args: graphed(list(args)))

    compiled = aot_autograd(
        fw_compiler=run_as_traced,
        bw_compiler=run_as_traced,
        # In-place updates of graph inputs (buffers, optimizer state) stay in-place, as eager.
        keep_inference_input_mutations=True,
    )(gm, example_inputs)
    with _lock:
        _compiled += 1
    return compiled
