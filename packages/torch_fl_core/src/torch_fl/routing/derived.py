"""Routes derived from the dispatcher of the torch in use: the ``derive box:<key>`` statement.

A box backend (``box:cpu``, ``box:cuda``) runs an ATen backend's own kernel on alias views of
the flagos memory. Which overloads it can serve is a fact of the installed torch, not a decision,
so a table does not list them: ``derive box:cpu`` stands for one ``op = box:cpu`` rule for every
``aten`` overload that

1. has a kernel of its own for the backend's dispatch key (``_dispatch_has_kernel_for_dispatch_key``;
   CompositeImplicit/Explicit kernels are not the key's own),
2. core does not serve natively (``torch_fl._C.core_native_ops()``: allocation, copies, views,
   ``resize_``, ``set_``, ``_local_scalar_dense`` ...),
3. is not a view (a result aliasing an argument must share the flagos storage; core makes views),
4. has no ``Device`` argument (factories such as ``empty``, ``tril_indices``, ``from_file``: a
   boxed kernel would create its result on the CPU; their ``out=`` forms have none and are routed),
5. is not in :data:`EXCLUDED` (operators that must never be boxed, with the reason),

plus :data:`STUB_COMPOSITES` and :data:`DIRECT_COMPOSITES`, and under ``box:cpu`` the list operators (``_foreach_*``) whose CPU
kernel is the CompositeExplicitAutograd loop while CUDA has kernels of its own
(:func:`is_list_composite`): routed, such a list is one call whose loop runs on the lists' kept
aliases (``csrc/boxing/list_aliases.h``), as ``box:cuda`` routes it on the cuda vendor, instead of
one routed call per tensor. ``derive box:cuda except composite-implicit`` also leaves out the
overloads that have a CompositeImplicitAutograd kernel (they decompose into routed operators; the
CUDA-ABI vendors' loader checks that rule). Under ``derive box:cpu`` an overload whose CPU kernel
lacks dtypes CUDA's takes also gets ``op[dtypes] = composite`` (core's kernels written with ATen
operators).

The functional and in-place forms of structured operators (``add.Tensor``, ``add_.Tensor``, whose
kernels come from a ``structured_delegate``) are routed directly too: through PyTorch's
CompositeExplicitAutogradNonFunctional kernel they would run the structured meta function twice
(on flagos, then on the aliases of the ``.out`` call); measured on sim, ``a.add_(b)`` on 8 floats
costs 1.46 us routed directly against 2.02 us through the composite.

Deriving walks about 3k overloads (0.1-0.2 s), so the result is cached per torch build, core
build, the torch and c10 libraries loaded (a vendor's bundle among them) and rules
(``$XDG_CACHE_HOME/torch_fl/routes``, else ``~/.cache``); a cache that cannot be
read or written is recomputed, never trusted blindly (its key names everything it depends on).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path

import torch

__all__ = [
    "COMPOSITE",
    "DERIVABLE",
    "DIRECT_COMPOSITES",
    "EXCLUDED",
    "STUB_COMPOSITES",
    "classify_box_routes",
    "composite_kernels",
    "is_list_composite",
    "composite_rule",
    "derived_rules",
]

#: Box backends a table can derive, and the dispatch key whose kernels they run.
DERIVABLE = {"box:cpu": "CPU", "box:cuda": "CUDA"}

#: The clause of ``derive`` leaving out overloads with a CompositeImplicitAutograd kernel.
EXCEPT_COMPOSITE_IMPLICIT = "except composite-implicit"

#: CompositeExplicitAutograd overloads (no CPU kernel of their own) whose composite kernel calls
#: a DispatchStub for the tensor's device directly, which has no flagos entry: they are routed
#: so the composite runs on the CPU alias views instead. Found by tests/contract/test_math_bits.py.
STUB_COMPOSITES: dict[str, str] = {
    "aten::conj_physical_": "calls conj_physical_stub for the tensor's device",
}

#: CompositeExplicitAutograd overloads a box route serves directly, though the composite would reach
#: a routed kernel anyway: the direct route is one unboxed call where the composite's way is longer.
#: Their route kernels are core's (csrc/aten/convolution.cpp), with the layout rule of the answer.
DIRECT_COMPOSITES: dict[str, str] = {
    "aten::convolution": "ATen's composite runs _convolution on flagos, then convolution_overrideable "
    "boxes the call and runs _convolution again on the aliases",
    "aten::convolution_backward": "the composite reaches convolution_backward_overrideable, which "
    "boxes the call into the same kernel",
}

#: Operator base names never routed (every overload), with the reason.
EXCLUDED: dict[str, str] = {
    "_to_copy": "device and dtype conversions are core's copies",
    "copy_": "copies are core's (_copy_from)",
    "_copy_from": "core's copy kernel",
    "_copy_from_and_resize": "core's copy kernel",
    "to": "device and dtype conversions are core's copies",
    "_local_scalar_dense": ".item() is core's device-to-host read",
    "record_stream": "stream bookkeeping of the flagos caching allocator",
    "set_": "storage surgery is core's",
    "resize_": "storage growth is core's (flagos allocator)",
    "_pin_memory": "pinned host memory is core's host allocator",
    "is_pinned": "pinned host memory is core's host allocator",
}

#: Core's backend of kernels written with ATen operators (``csrc/aten/composite_backend.h``), for
#: the dtypes that CPU's kernel of an overload lacks and CUDA's takes (``histc`` of integers).
COMPOSITE = "composite"


def composite_kernels() -> dict[str, tuple[str, ...]]:
    """Short overload name -> the dtypes (of its first tensor) core's ``composite`` backend serves."""
    from torch_fl import _C

    kernels = getattr(_C, "composite_kernels", None)
    return {op.removeprefix("aten::"): tuple(dtypes) for op, dtypes in kernels()} if kernels else {}


def composite_rule(op: str, dtypes: Iterable[str]) -> str:
    """The table line sending ``dtypes`` of ``op`` to the composite backend."""
    return f"{op}[{', '.join(dtypes)}] = {COMPOSITE}  # CPU's kernel lacks these dtypes"


def _schema(op: str):
    name, _, overload = op.partition(".")
    return torch._C._get_schema(name, overload)


def core_native() -> frozenset[str]:
    """The overloads core serves itself (never routed)."""
    from torch_fl import _C

    native = getattr(_C, "core_native_ops", None)
    if native is not None:
        return frozenset(n if "::" in n else f"aten::{n}" for n in native())
    # A build without the router: no routes exist, so every PrivateUse1 kernel is core's.
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    return frozenset(
        n
        for n in torch._C._dispatch_get_all_op_names()
        if n.startswith("aten::") and has(n, "PrivateUse1")
    )


def classify_box_routes(
    has_own_kernel: Callable[[str], bool], *, route_composite_implicit: bool
) -> tuple[list[str], dict[str, list[str]]]:
    """The ``aten`` overloads a ``box:<key>`` route serves, and per exclusion rule those left out.

    ``has_own_kernel(op)``: whether the target key has a kernel of its own for ``op``. The rules
    are the module docstring's; ``route_composite_implicit`` says whether an overload that also has
    a CompositeImplicitAutograd kernel is routed (``box:cpu``) or left to its decomposition.
    Rules are applied in the order listed in the returned dict.
    """
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    native = core_native()
    routed: list[str] = []
    left: dict[str, list[str]] = {
        "excluded by name": [],
        "composite": [],
        "core-native": [],
        "view": [],
        "device argument": [],
    }
    for op in sorted({n for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::")}):
        if op in STUB_COMPOSITES or op in DIRECT_COMPOSITES:
            routed.append(op)
            continue
        if not has_own_kernel(op):
            continue
        base = op.removeprefix("aten::").partition(".")[0]
        if base in EXCLUDED:
            left["excluded by name"].append(op)
            continue
        if not route_composite_implicit and has(op, "CompositeImplicitAutograd"):
            left["composite"].append(op)
            continue
        if op in native:
            left["core-native"].append(op)
            continue
        schema = _schema(op)
        if any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns):
            left["view"].append(op)
        elif any("Device" in str(a.type) for a in schema.arguments):
            left["device argument"].append(op)
        else:
            routed.append(op)
    return routed, left


def is_list_composite(op: str) -> bool:
    """Whether ``op`` is a list operator whose CPU kernel is the CompositeExplicitAutograd loop
    (``aten::_foreach_add_.List``; CUDA has kernels of its own for them, which a CPU-only torch
    does not register, so they are not asked for)."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    return (
        op.startswith("aten::_foreach_")
        and not has(op, "CPU")
        and has(op, "CompositeExplicitAutograd")
    )


def _derive(
    backend: str, except_composite_implicit: bool
) -> list[tuple[str, tuple[str, ...], str]]:
    key = DERIVABLE[backend]
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    if key == "CPU":

        def own(op: str) -> bool:
            return has(op, key) or is_list_composite(op)
    else:

        def own(op: str) -> bool:
            return has(op, key)

    routed, _ = classify_box_routes(own, route_composite_implicit=not except_composite_implicit)
    composites = composite_kernels() if key == "CPU" else {}
    rules: list[tuple[str, tuple[str, ...], str]] = []
    for op in routed:
        rules.append((op, (), backend))
        short = op.removeprefix("aten::")
        if short in composites:
            rules.append((op, composites[short], COMPOSITE))
    return rules


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "torch_fl" / "routes"


def _cache_key(backend: str, except_composite_implicit: bool) -> str:
    """Everything a derivation depends on: the torch build (its kernels and schemas), core's build
    (its native ops and composite kernels) and these rules."""
    from torch_fl import _C

    parts = [
        torch.__version__,
        str(torch.version.git_version),
        backend,
        str(except_composite_implicit),
    ]
    for path in (Path(_C.__file__), Path(__file__), *_kernel_libraries()):
        st = path.stat()
        parts += [str(path), str(st.st_size), str(st.st_mtime_ns)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def _kernel_libraries() -> list[Path]:
    """The torch and c10 libraries mapped into this process: where the kernels come from (a
    vendor's bundle of device libraries loaded beside the installed torch included)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    fields = (line.split(None, 5) for line in maps.splitlines())
    found = {f[5].strip() for f in fields if len(f) == 6}
    paths = (Path(p) for p in found if p.startswith("/"))
    return sorted(p for p in paths if p.name.startswith(("libtorch", "libc10")) and p.is_file())


def derived_rules(
    backend: str, *, except_composite_implicit: bool = False
) -> list[tuple[str, tuple[str, ...], str]]:
    """(full op name, dtypes, backend) for each rule ``derive <backend>`` stands for, in order.

    Raises KeyError for a backend not in :data:`DERIVABLE`."""
    if backend not in DERIVABLE:
        raise KeyError(backend)
    try:
        path = (
            _cache_dir()
            / f"{backend.replace(':', '-')}-{_cache_key(backend, except_composite_implicit)}.json"
        )
    except Exception:  # noqa: BLE001 -- the cache is an optimisation: never a reason to fail
        return _derive(backend, except_composite_implicit)
    try:
        cached = json.loads(path.read_text(encoding="utf-8"))
        return [(op, tuple(dtypes), b) for op, dtypes, b in cached]
    except (OSError, ValueError, TypeError):
        pass
    rules = _derive(backend, except_composite_implicit)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
        tmp.write_text(json.dumps(rules), encoding="utf-8")
        tmp.replace(path)  # atomic: a concurrent reader sees the old file or the whole new one
    except OSError:
        pass  # a read-only home: derive again next time
    return rules
