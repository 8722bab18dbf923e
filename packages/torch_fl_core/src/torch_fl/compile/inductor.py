"""Inductor's code generation for ``flagos``: scheduling, the Python wrapper, device op overrides.

Registered from :func:`torch_fl.compile.register` the moment ``torch._inductor.compile_fx`` (the
entry point every Inductor compile goes through) is imported.

- C++ scheduling (host-addressable vendors such as ``sim``): Inductor's own ``CppScheduling``; the
  wrapper calls each C++ kernel like on CPU, after :func:`torch_fl.compile.runtime.wait_stream`.
- Triton scheduling (vendors whose Triton targets their device, e.g. cuda): Inductor's
  ``TritonScheduling``; ``flagos`` is treated as a GPU type and its device properties are those of
  the vendor's Triton target, so kernels compile for that target and launch on the stream
  :func:`torch_fl.compile.runtime.get_raw_stream` returns (the ``flagos`` current stream).

Either way, Inductor's tuning tables keyed by device type (GEMM template heuristics, conv and
flex-attention configs) answer for ``flagos`` what they answer for the device type the kernels
really run as (:func:`torch_fl.compile.choice.tuning_device_type`).
"""

from __future__ import annotations

import functools
import importlib
import logging
import sys
from types import ModuleType
from typing import Any

import torch

__all__ = ["register"]

_DEVICE = "flagos"
_EMPTY_STRIDED_IMPORT = "from torch_fl._C import empty_strided as empty_strided_flagos"

log = logging.getLogger(__name__)
_UNSET = object()


@functools.cache
def _wrapper_classes() -> tuple[type, type]:
    from torch._inductor.codegen.wrapper import (
        PythonWrapperCodegen,
        SubgraphPythonWrapperCodegen,
    )
    from torch._inductor.virtualized import V

    class _FlagosKernelCalls:
        """C++ kernels on ``flagos`` are called like CPU ones, after waiting for the stream."""

        def _generate_kernel_call_helper(self, kernel_name: str, call_args: Any, **kwargs: Any):
            device = kwargs.get("device") or V.graph.get_current_device_or_throw()
            if not kwargs.get("triton", True) and device.type == _DEVICE:
                index = -1 if device.index is None else int(device.index)
                self.writeline(f"_flagos_wait_stream({index})")
                self.writeline(self.wrap_kernel_call(kernel_name, call_args))
                return None
            return super()._generate_kernel_call_helper(kernel_name, call_args, **kwargs)

        def make_allocation(
            self,
            name: str,
            device: torch.device,
            dtype: torch.dtype,
            shape: Any,
            stride: Any,
            allocation_shape: Any = None,
            is_pinned: bool = False,
        ) -> str:
            # torch.empty_strided(..., device="flagos") goes through the Python arg parser and the
            # dispatcher: about 2 us more per buffer than the direct allocators Inductor calls on
            # cpu/cuda/xpu (empty_strided_cuda). flagos' own is torch_fl._C.empty_strided.
            from torch._inductor import config

            if device.type != _DEVICE or config.test_configs.track_memory_lifecycle:
                pinned = {"is_pinned": True} if is_pinned else {}  # torch 2.10 has no is_pinned
                return super().make_allocation(
                    name, device, dtype, shape, stride, allocation_shape, **pinned
                )
            shape_tuple = self.codegen_python_shape_tuple(shape)
            alloc_tuple = self.codegen_python_shape_tuple(
                shape if allocation_shape is None else allocation_shape
            )
            stride_tuple = self.codegen_python_shape_tuple(stride)
            index = -1 if device.index is None else int(device.index)
            out = f"{name} = empty_strided_flagos({alloc_tuple}, {stride_tuple}, {dtype}, {index})"
            if shape_tuple != alloc_tuple:
                out += f".as_strided({shape_tuple}, {stride_tuple})"
            return out

    class FlagosSubgraphWrapperCodegen(_FlagosKernelCalls, SubgraphPythonWrapperCodegen):
        pass

    class FlagosPythonWrapperCodegen(_FlagosKernelCalls, PythonWrapperCodegen):
        def write_header(self) -> None:
            super().write_header()
            self.imports.writeline(
                "from torch_fl.compile.runtime import wait_stream as _flagos_wait_stream"
            )
            self.imports.writeline(_EMPTY_STRIDED_IMPORT)

        def write_kernel_autotune_defs_header(self) -> None:
            super().write_kernel_autotune_defs_header()
            self.kernel_autotune_defs.writeline(_EMPTY_STRIDED_IMPORT)

        @staticmethod
        def create(
            is_subgraph: bool,
            subgraph_name: str | None,
            parent_wrapper: Any,
            partition_signatures: Any = None,
        ) -> Any:
            if is_subgraph:
                return FlagosSubgraphWrapperCodegen(
                    subgraph_name, parent_wrapper, partition_signatures
                )
            return FlagosPythonWrapperCodegen()

    return FlagosPythonWrapperCodegen, FlagosSubgraphWrapperCodegen


def _scheduling_class() -> type:
    from torch_fl.compile import choice as scheduling

    kind = scheduling.scheduling()
    if kind == "cpp":
        from torch._inductor.codegen.cpp import CppScheduling

        return CppScheduling
    if kind == "triton":
        from torch._inductor.codegen.triton import TritonScheduling

        return TritonScheduling
    raise AssertionError(f"no Inductor scheduling for {kind!r}")


def _device_op_overrides(common: ModuleType) -> Any:
    class FlagosDeviceOpOverrides(common.DeviceOpOverrides):
        """Python the wrapper emits for device-level operations on ``flagos``."""

        def import_get_raw_stream_as(self, name: str) -> str:
            return _raw_stream_import(name)

        def set_device(self, device_idx: int) -> str:
            return f"torch.flagos._set_device_index({device_idx})"

        def synchronize(self) -> str:
            return "torch.flagos.synchronize()"

        def device_guard(self, device_idx: int) -> str:
            return f"torch.flagos._DeviceGuard({device_idx})"

        def current_stream(self) -> str:
            return "torch.flagos.current_stream()"

    return FlagosDeviceOpOverrides()


def _register_device_op_overrides(common: ModuleType) -> None:
    """Registers ``flagos`` in Inductor's device-op-overrides table after Inductor's own entries.

    Why: before torch 2.12 Inductor fills that table on its first lookup, and only while it is
    empty. Registered first, ``flagos`` could leave cpu, cuda and xpu out of it (unless one of
    their modules had been imported meanwhile): compiling a cpu graph with max-autotune GEMMs
    in the same process failed with ``KeyError: 'cpu'`` on torch 2.10. A lookup fills it first.
    """
    try:
        common.get_device_op_overrides("cpu")
    except KeyError:  # filled without cpu by someone else: nothing more to add
        pass
    common.register_device_op_overrides(_DEVICE, _device_op_overrides(common))


def _raw_stream_import(name: str) -> str:
    """The import line of the function the wrapper calls for a stream handle before every Triton
    launch.

    A Triton vendor's ``flagos`` current stream is its target's current stream
    (:func:`torch_fl.compile.runtime.get_raw_stream`); where that target's device module is
    ``torch.cuda`` the wrapper imports torch's C++ getter, as Inductor's cuda wrapper does, instead
    of a Python function that looks the vendor and the stream object up on every launch (0.4 ms
    of the 3 ms compiled training step of ``benchmarks/compile.py`` under cProfile, 18 launches).
    """
    from torch_fl.compile import choice as scheduling

    fast = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if (
        fast is not None
        and scheduling.scheduling() == "triton"
        and scheduling.triton_target() is not None
        and scheduling.triton_device_module() is torch.cuda
    ):
        return f"from torch._C import _cuda_getCurrentRawStream as {name}"
    return f"from torch_fl.compile.runtime import get_raw_stream as {name}"


def _treat_as_gpu(utils: ModuleType) -> None:
    # Inductor gates its Triton paths on `is_gpu(device.type)`, a membership test of this list.
    if _DEVICE not in utils.GPU_TYPES:
        # get_gpu_type() (cached) asserts that at most one GPU type is available, and flagos over
        # CUDA is available beside cuda: let it answer, once, as it would without flagos.
        utils.get_gpu_type()
        utils.GPU_TYPES.append(_DEVICE)


def _sdpa_constraints_as_target(lowering: ModuleType, target: str) -> None:
    """Inductor aligns the inputs of fused attention kernels (the attention bias of
    memory-efficient attention to 8 elements, dense last dimensions) only when their fake values
    are ``cuda``/``xpu`` tensors; on a vendor whose kernels are that target's (flagos memory is
    CUDA memory, attention runs CUDA's kernels) a flagos graph needs the same, or the kernel
    rejects an unaligned bias. The constraint is run with each flagos fake value seen as the same
    tensor on the target device; the IR it builds stays on flagos."""
    original = getattr(lowering, "sdpa_constraint", None)
    table = getattr(lowering, "_maybe_layout_constraints", None)
    if original is None or table is None:
        return

    def as_target(val: Any) -> Any:
        index = val.device.index or 0
        with val.fake_mode:
            return torch.empty_strided(
                val.size(), val.stride(), dtype=val.dtype, device=torch.device(target, index)
            )

    @functools.wraps(original)
    def sdpa_constraint(fx_node: Any, *args: Any, **kwargs: Any) -> Any:
        swapped = []
        for arg in fx_node.all_input_nodes:
            val = arg.meta.get("val")
            if (
                isinstance(val, torch.Tensor)
                and val.device.type == _DEVICE
                and hasattr(val, "fake_mode")
            ):
                swapped.append((arg, val))
                arg.meta["val"] = as_target(val)
        try:
            return original(fx_node, *args, **kwargs)
        finally:
            for arg, val in swapped:
                arg.meta["val"] = val

    for op, constraint in list(table.items()):
        if constraint is original:
            table[op] = sdpa_constraint


def _target_device_properties(hints: ModuleType) -> None:
    """DeviceProperties of a flagos device are those of the vendor's Triton target device.

    Why: Triton builds ``GPUTarget(device_props.type, cc, warp_size)`` and has no ``flagos``
    backend; the kernels really run on the target device (same ordinal), so compile for it.
    """
    from torch_fl.compile import choice as scheduling

    props = hints.DeviceProperties
    if getattr(props.create, "_torch_fl", False):
        return
    original = props.create  # bound classmethod (cached by Inductor)

    def create(device: torch.device) -> Any:
        if getattr(device, "type", None) == _DEVICE:
            target = scheduling.triton_target()
            if target is not None:
                device = torch.device("cuda" if target == "hip" else target, device.index)
        return original(device)

    create._torch_fl = True  # type: ignore[attr-defined]
    props.create = staticmethod(create)


def _host_nodes_are_cpu(scheduler_module: ModuleType) -> None:
    """Scheduler nodes on ``flagos`` answer ``is_cpu()`` True under C++ scheduling.

    Why: Inductor's scheduler gates CPU-only fusion logic on ``node.is_cpu()`` (a device-type
    test) and otherwise runs GPU-only paths (e.g. reindexing a pointwise node for a reduction,
    which reads SIMD loop groups that C++ kernels do not have). C++-scheduled ``flagos`` nodes
    are CPU code on host memory, so they take the CPU paths.
    """
    node_cls = scheduler_module.BaseSchedulerNode
    if getattr(node_cls.is_cpu, "_torch_fl", False):
        return
    original = node_cls.is_cpu

    def is_cpu(self: Any) -> bool:
        device = self.get_device()
        return original(self) or (device is not None and device.type == _DEVICE)

    is_cpu._torch_fl = True  # type: ignore[attr-defined]
    node_cls.is_cpu = is_cpu


def _choices_settled_when_lowered(select_algorithm: ModuleType) -> None:
    """GEMM choices of C++-scheduled ``flagos`` are settled when lowered, as cpu's are.

    Why: under max-autotune Inductor defers the choice among two or more candidates (a
    multi-template node, settled later by benchmarking epilogue fusions) for every device except
    cpu's C++ backend. ``CppScheduling`` can neither benchmark such fusions nor generate a fused
    multi-template node, so a Linear under max-autotune (two choices on torch 2.10: bias_addmm and
    addmm) stopped in the scheduler (NotImplementedError, or an assertion in
    ``CppScheduling.codegen_template``).
    """
    cls = select_algorithm.AlgorithmSelectorCache
    original = cls.__call__
    if getattr(original, "_torch_fl", False):
        return

    def __call__(self: Any, name: Any, choices: Any, input_nodes: Any, layout: Any, *args, **kw):
        # return_multi_template is the third optional parameter, passed by keyword in Inductor.
        if len(args) < 3 and getattr(getattr(layout, "device", None), "type", None) == _DEVICE:
            kw["return_multi_template"] = False
        return original(self, name, choices, input_nodes, layout, *args, **kw)

    __call__._torch_fl = True  # type: ignore[attr-defined]
    cls.__call__ = __call__


def _time_on_host(fn: Any, index: int) -> float:
    """Milliseconds ``fn`` takes with the host clock, each call followed by a wait for the stream."""
    from torch._inductor.runtime.benchmarking import benchmarker

    from torch_fl.compile.runtime import wait_stream

    def run() -> None:
        fn()
        wait_stream(index)

    return benchmarker.benchmark_cpu(run)


def _flagos_index(tensors: Any) -> int | None:
    """The flagos device index of ``tensors`` (-1: current device), None when none is on flagos."""
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.device.type == _DEVICE:
            return -1 if t.device.index is None else int(t.device.index)
    return None


def _benchmark_on_host(autotune_process: ModuleType, benchmarking: ModuleType) -> None:
    """Autotuning times ``flagos`` kernels with the host clock under C++ scheduling.

    Why: Inductor times every extern choice (aten mm/addmm/bmm under max-autotune) whose device is
    not cpu as a GPU kernel: in a device context and with GPU events of the first GPU-type
    tensor's device, or of cuda when no tensor is of a GPU type. C++-scheduled ``flagos`` is not a
    GPU type, so the timing went to cuda; without a CUDA driver every choice failed ("Found no
    NVIDIA driver") and lowering stopped with NoValidChoicesError as soon as there were two
    choices (torch 2.10 offers bias_addmm beside addmm for every Linear). Host clock plus a wait
    for the stream's queued work is how the C++ kernels themselves run.
    """
    from torch._inductor.utils import is_gpu

    mixin = getattr(autotune_process, "GPUDeviceBenchmarkMixin", None)
    do_bench = getattr(mixin, "do_bench", None)
    if do_bench is not None and not getattr(do_bench, "_torch_fl", False):
        original_do_bench = do_bench

        def host_do_bench(self: Any, fn: Any, *input_tensors: Any, out: Any = None) -> float:
            tensors = [*input_tensors, out]
            index = _flagos_index(tensors)
            if index is None or any(
                isinstance(t, torch.Tensor) and is_gpu(t.device.type) for t in tensors
            ):
                return original_do_bench(self, fn, *input_tensors, out=out)
            return _time_on_host(fn, index)

        host_do_bench._torch_fl = True  # type: ignore[attr-defined]
        mixin.do_bench = host_do_bench
    else:
        log.debug("flagos: torch %s has no GPUDeviceBenchmarkMixin.do_bench", torch.__version__)

    # Extern choices without an out= variant are timed through Benchmarker.benchmark, which sends
    # every device but cpu to its GPU timing too.
    cls = getattr(benchmarking, "Benchmarker", None)
    benchmark = getattr(cls, "benchmark", None)
    if benchmark is None or getattr(benchmark, "_torch_fl", False):
        return
    original_benchmark = benchmark

    def host_benchmark(
        self: Any,
        fn: Any,
        fn_args: Any = None,
        fn_kwargs: Any = None,
        device: Any = None,
        **kwargs: Any,
    ) -> float:
        if device is not None:
            target = torch.device(device)
        elif fn_args is not None or fn_kwargs is not None:
            try:
                target = self.infer_device(*(fn_args or ()), **(fn_kwargs or {}))
            except ValueError:
                target = None  # Inductor's own error, from its own call below
        else:
            target = None
        if target is None or target.type != _DEVICE:
            return original_benchmark(self, fn, fn_args, fn_kwargs, device=device, **kwargs)
        args, kw = tuple(fn_args or ()), dict(fn_kwargs or {})
        index = -1 if target.index is None else int(target.index)
        return _time_on_host(lambda: fn(*args, **kw), index)

    host_benchmark._torch_fl = True  # type: ignore[attr-defined]
    cls.benchmark = host_benchmark


def _backend_for_flagos(utils: ModuleType, kind: str) -> None:
    """``get_current_backend()`` answers ``kind`` ("cpp"/"triton") for ``flagos``.

    Why: Inductor's ops proxy picks dtype/shape propagation by this name and answers
    ``config.cuda_backend`` ("triton") for any device it does not know, so C++ kernels on
    ``flagos`` were generated with Triton's rules (failing on masked loads, iota and vectorized
    index expressions). Modules that imported the function by name are rebound too.
    """
    original = utils.get_current_backend
    if getattr(original, "_torch_fl", False):
        return

    def get_current_backend(device_type: str | None = None) -> str:
        if not device_type:
            from torch._inductor.virtualized import V

            device_type = V.graph.get_current_device_or_throw().type
        if device_type == _DEVICE:
            return kind
        return original(device_type)

    get_current_backend._torch_fl = True  # type: ignore[attr-defined]
    for name, module in list(sys.modules.items()):
        if (
            name.startswith("torch._inductor")
            and getattr(module, "get_current_backend", None) is original
        ):
            module.get_current_backend = get_current_backend


def _share_template_heuristics(source: str) -> int | None:
    """Register, for ``flagos``, every template heuristic Inductor has for device type ``source``.

    Why: Inductor looks GEMM template heuristics up by (template, device type, op). With none for
    ``flagos``, mm/addmm/bmm Triton templates under max-autotune got an empty fallback (logged as
    "No template heuristic found") and templates with a device-agnostic default (decompose_k) got
    that default instead of the target's entry. Entries are copied once, here: the registry is
    filled when its modules are imported, which ``compile_fx`` has done by now. An entry already
    registered for ``flagos`` is kept. Returns how many were copied, None without a registry.
    """
    try:
        registry = importlib.import_module("torch._inductor.template_heuristics.registry")
    except ImportError:
        registry = None
    table = getattr(registry, "_TEMPLATE_HEURISTIC_REGISTRY", None)
    register = getattr(registry, "register_template_heuristic", None)
    if not isinstance(table, dict) or not callable(register):
        log.debug(
            "flagos: torch %s has no Inductor template-heuristics registry of the known shape; "
            "no template heuristics shared from %r",
            torch.__version__,
            source,
        )
        return None
    copied = 0
    for key, heuristic in list(table.items()):
        if not (isinstance(key, tuple) and len(key) == 3 and key[1] == source):
            continue
        template, _, op = key
        if (template, _DEVICE, op) in table:
            continue
        register(template, _DEVICE, op_name=op)(heuristic)
        copied += 1
    # Successful lookups are cached per (template, device type, op); drop any made for flagos
    # before its entries existed.
    cache = getattr(registry, "_HEURISTIC_CACHE", None)
    if isinstance(cache, dict):
        for cached in [k for k in cache if isinstance(k, tuple) and k[1:2] == (_DEVICE,)]:
            cache.pop(cached, None)
    log.debug("flagos: shared %d Inductor template heuristics of device type %r", copied, source)
    return copied


def _share_config_heuristics() -> None:
    """``InductorChoices.get_config_heuristics("flagos")`` answers as for the tuning device type.

    Why: Inductor picks Triton conv and flex-attention configs with a device-type switch there,
    where ``flagos`` fell to the generic ``BaseConfigHeuristic``. Read at call time, like the
    scheduling choice. Subclasses that override the method are left to their own answer.
    """
    from torch_fl.compile import choice as scheduling

    try:
        choices_module = importlib.import_module("torch._inductor.choices")
    except ImportError:
        choices_module = None
    cls = getattr(choices_module, "InductorChoices", None)
    original = getattr(cls, "get_config_heuristics", None)
    if original is None:
        log.debug(
            "flagos: torch %s has no InductorChoices.get_config_heuristics; config heuristics "
            "not shared",
            torch.__version__,
        )
        return
    if getattr(original, "_torch_fl", False):
        return

    def get_config_heuristics(self: Any, device_type: Any = _UNSET) -> Any:
        if device_type is _UNSET:  # keep Inductor's own default
            return original(self)
        if device_type == _DEVICE:
            device_type = scheduling.tuning_device_type() or device_type
        return original(self, device_type)

    get_config_heuristics._torch_fl = True  # type: ignore[attr-defined]
    cls.get_config_heuristics = get_config_heuristics


def _cpp_wrapper_message(vendor: str, kind: str | None) -> str:
    codegen = f"its kernels are generated as {kind} code" if kind else "it has no code generation"
    return (
        f"flagos: AOTInductor (torch._inductor.aoti_compile_and_package, aot_compile) and "
        f"Inductor's C++ wrapper (config.cpp_wrapper) are not available on flagos (vendor "
        f"{vendor!r}; {codegen}): the C++ wrapper's runtime knows only CPU, CUDA, XPU and MPS "
        f"tensors. Run the program with torch.compile (the Python wrapper), or the exported "
        f"program eagerly (ep.module())."
    )


def _cpp_wrapper_refusal(vendor: str, kind: str) -> type:
    """Inductor's C++ wrapper for ``flagos``: a clear refusal instead of Inductor's bare
    ``AssertionError: Device flagos not supported``."""

    class NoCppWrapper:
        supports_caching = False  # nothing is generated to cache

        @classmethod
        def create(cls, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError(_cpp_wrapper_message(vendor, kind))

    return NoCppWrapper


def _run_without_codegen(compile_fx_module: ModuleType, vendor: str) -> None:
    """A vendor without code generation runs its ``flagos`` graphs on its routed kernels
    (:mod:`torch_fl.compile.routed_graphs`); graphs without ``flagos`` tensors go to Inductor.

    Why at ``compile_fx`` (Inductor's entry) and not with a scheduling class: Inductor would lower
    such a graph with its CPU C++ codegen, and C++ kernels dereferencing device pointers crash
    the process.
    """
    original = compile_fx_module.compile_fx
    if getattr(original, "_torch_fl", False):
        return

    def compile_fx(model: Any, example_inputs: Any, *args: Any, **kwargs: Any) -> Any:
        if any(
            isinstance(t, torch.Tensor) and t.device.type == _DEVICE for t in example_inputs or ()
        ):
            from torch._inductor import config
            from torch._inductor.virtualized import V

            from torch_fl.compile import routed_graphs

            # mode="reduce-overhead" arrives as this config patch (or set globally).
            patches = kwargs.get("config_patches") or {}
            if V.aot_compilation or patches.get("cpp_wrapper", config.cpp_wrapper):
                raise NotImplementedError(_cpp_wrapper_message(vendor, None))
            graphs = bool(patches.get("triton.cudagraphs", config.triton.cudagraphs))
            return routed_graphs.compile_graph(model, example_inputs, vendor, graphs=graphs)
        return original(model, example_inputs, *args, **kwargs)

    compile_fx._torch_fl = True  # type: ignore[attr-defined]
    compile_fx_module.compile_fx = compile_fx


def _build_identity_pass(codegen: str) -> Any:
    """A device pass that changes nothing; its ``uuid`` names this torch-fl build and codegen.

    Inductor puts the uuid of a device's custom pass into its FX graph cache key. Without it, code
    compiled for ``flagos`` by another torch-fl build (other predicted strides, wrapper calls) or
    for another vendor (C++ kernels on host memory vs Triton on device memory: the device is
    ``flagos`` for both) would be loaded from the cache as if it fitted.
    """
    from torch._inductor.custom_graph_pass import CustomGraphModulePass

    class BuildIdentity(CustomGraphModulePass):
        def __call__(self, gm: torch.fx.GraphModule) -> None:
            return None

        def uuid(self) -> str:
            return f"{codegen}:{_build_digest()}"

    return BuildIdentity()


@functools.cache
def _build_digest() -> str:
    import hashlib
    from pathlib import Path

    from torch_fl import _C

    digest = hashlib.sha256()
    for path in [Path(_C.__file__), *sorted(Path(__file__).parent.glob("*.py"))]:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def register(_compile_fx: ModuleType) -> None:
    """Register ``flagos`` with Inductor, once ``torch._inductor.compile_fx`` is imported.

    Why then: it is Inductor's entry point, so every codegen module can be imported safely, and
    no graph has been lowered yet (registration is read when lowering starts).
    """
    from torch._inductor import scheduler, utils
    from torch._inductor.codegen import common
    from torch._inductor.runtime import hints

    from torch_fl.compile import choice as scheduling

    kind = scheduling.scheduling()
    if kind is None:
        # Nothing to generate code for: flagos graphs run on the routed kernels. No Dynamo reset
        # here: this runs from an import hook, often inside the first compilation.
        _run_without_codegen(_compile_fx, scheduling.vendor_name())
        return
    common.register_backend_for_device(
        _DEVICE,
        _scheduling_class(),
        _wrapper_classes()[0],
        _cpp_wrapper_refusal(scheduling.vendor_name(), kind),
        device_custom_pass=_build_identity_pass(f"{scheduling.vendor_name()}:{kind}"),
    )
    _register_device_op_overrides(common)
    _backend_for_flagos(utils, kind)
    if kind == "cpp":
        from torch._inductor import autotune_process, select_algorithm
        from torch._inductor.runtime import benchmarking

        _host_nodes_are_cpu(scheduler)
        _choices_settled_when_lowered(select_algorithm)
        _benchmark_on_host(autotune_process, benchmarking)
        from torch._inductor import lowering

        from torch_fl.compile import flex_lowering

        flex_lowering.install(lowering)
    elif kind == "triton":
        _treat_as_gpu(utils)
        _target_device_properties(hints)
        if scheduling.triton_target() in ("cuda", "xpu"):
            from torch._inductor import lowering

            _sdpa_constraints_as_target(lowering, scheduling.triton_target())
    source = scheduling.tuning_device_type()
    if source is not None:
        _share_template_heuristics(source)
        _share_config_heuristics()
    if scheduling.graphs_supported():
        from torch_fl.compile import graph_wrapping

        graph_wrapping.install(_compile_fx)
