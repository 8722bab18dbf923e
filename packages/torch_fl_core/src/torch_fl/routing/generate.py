"""Generator of the built-in ``sim`` vendor's route table, ``torch_fl/routes/sim.conf``.

::

    python -m torch_fl.routing.generate --vendor sim              # rewrite the table
    python -m torch_fl.routing.generate --vendor sim --check      # exit 1 if it is not up to date
    python -m torch_fl.routing.generate --vendor sim --output -   # print it

The table routes to ``box:cpu`` every ``aten`` overload that

1. has a kernel of its own for the CPU dispatch key (``_dispatch_has_kernel_for_dispatch_key``;
   CompositeImplicit/Explicit kernels are not the CPU key's own),
2. core does not serve natively (``torch_fl._C.core_native_ops()``: allocation, copies, views,
   ``resize_``, ``set_``, ``_local_scalar_dense`` ...),
3. is not a view (a result aliasing an argument must share the flagos storage; core makes views),
4. has no ``Device`` argument (factories such as ``empty``, ``tril_indices``, ``from_file``: a
   boxed kernel would create its result on the CPU; their ``out=`` forms have none and are routed),
5. is not a sparse-layout operator (flagos tensors are strided; a boxed sparse result would have
   no storage to alias),
6. is not in :data:`EXCLUDED` (operators that must never be boxed, with the reason).

The functional and in-place forms of structured operators (``add.Tensor``, ``add_.Tensor``, whose
CPU kernels come from a ``structured_delegate``) are routed directly too: through PyTorch's
CompositeExplicitAutogradNonFunctional kernel they would run the structured meta function twice
(on flagos, then on the CPU aliases of the ``.out`` call); measured on sim, ``a.add_(b)`` on
8 floats costs 1.46 us routed directly against 2.02 us through the composite.

The output is sorted and byte-identical on every run with the same torch minor and core. The
banner names the torch minor (``# generated-for: torch X.Y``); ``--check`` regenerates and
compares, and on another torch minor it reports that the table cannot be checked there and exits
0 (the table is generated for one minor; the loader skips what another minor lacks, see
:mod:`torch_fl.routing.validation`). If the checked-in table does not load any more (``import
torch`` fails on it), regenerate with ``FLAGOS_BACKEND_CONFIG=/dev/null`` set.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import os
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import torch

from torch_fl.routing.route_table import short_op_name
from torch_fl.routing.validation import torch_minor

__all__ = [
    "COMPOSITE",
    "EXCLUDED",
    "write_or_check",
    "STUB_COMPOSITES",
    "Generated",
    "classify_box_routes",
    "composite_kernels",
    "composite_rule",
    "default_output",
    "flaggems_route_classes",
    "generate",
    "main",
]

BACKEND = "box:cpu"

#: CompositeExplicitAutograd overloads (no CPU kernel of their own) whose composite kernel calls
#: a DispatchStub for the tensor's device directly, which has no flagos entry: they are routed
#: so the composite runs on the CPU alias views instead. Found by tests/contract/test_math_bits.py.
STUB_COMPOSITES: dict[str, str] = {
    "aten::conj_physical_": "calls conj_physical_stub for the tensor's device",
}

#: Operator base names never routed (every overload), with the reason; in the banner.
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
#: the dtypes that CPU's kernel of an overload lacks and CUDA's takes (``histc`` of integers). A
#: table whose route for such an overload ends on the CPU sends those dtypes there.
COMPOSITE = "composite"


def composite_kernels() -> dict[str, tuple[str, ...]]:
    """Short overload name -> the dtypes (of its first tensor) core's ``composite`` backend serves."""
    from torch_fl import _C

    kernels = getattr(_C, "composite_kernels", None)
    return {short_op_name(op): tuple(dtypes) for op, dtypes in kernels()} if kernels else {}


def composite_rule(op: str, dtypes: Iterable[str]) -> str:
    """The table line sending ``dtypes`` of ``op`` to the composite backend."""
    return f"{op}[{', '.join(dtypes)}] = {COMPOSITE}  # CPU's kernel lacks these dtypes"


def _schema(op: str):
    name, _, overload = op.partition(".")
    return torch._C._get_schema(name, overload)


def _core_native() -> frozenset[str]:
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


class Generated:
    """The routed overloads and, per exclusion rule, the overloads it excluded."""

    def __init__(self) -> None:
        self.total = 0
        self.with_cpu = 0
        self.routed: list[str] = []
        self.excluded: dict[str, list[str]] = {
            "core-native": [],
            "view": [],
            "device argument": [],
            "sparse layout": [],
            "excluded by name": [],
        }

    def text(self, vendor: str) -> str:
        minor = torch_minor()
        ex = self.excluded
        lines = [
            f"# {vendor}.conf: route table of the built-in {vendor} vendor.",
            f"# GENERATED by `python -m torch_fl.routing.generate --vendor {vendor}`; do not edit.",
            f"# `python -m torch_fl.routing.generate --vendor {vendor} --check` verifies it "
            f"(the test suite runs it).",
            "#",
            f"# generated-for: torch {minor}",
            "#",
            f"# Of the {self.total} aten overloads in the dispatcher, {self.with_cpu} have a kernel "
            f"of their own for the CPU key;",
            f"# {len(self.routed)} of those are routed to {BACKEND} (the CPU kernel runs on alias "
            f"views of the flagos memory). Left out:",
            f"#   {len(ex['core-native']):4d} served natively by core (allocation, copies, views, "
            f"resize_, set_, .item())",
            f"#   {len(ex['view']):4d} views (their result must share the flagos storage)",
            f"#   {len(ex['device argument']):4d} with a Device argument (factories would create "
            f"their result on the CPU)",
            f"#   {len(ex['sparse layout']):4d} sparse-layout operators (flagos tensors are strided)",
            f"#   {len(ex['excluded by name']):4d} excluded by name (all overloads of these; the "
            f"count is those with a CPU kernel):",
        ]
        for name, why in sorted(EXCLUDED.items()):
            lines.append(f"#          {name}: {why}")
        lines.append(
            "# Also routed: composite overloads that call a DispatchStub for the device directly:"
        )
        for name, why in sorted(STUB_COMPOSITES.items()):
            lines.append(f"#          {name.removeprefix('aten::')}: {why}")
        composites = composite_kernels()
        lines += [
            "# Everything else (no CPU kernel of its own: composite operators decompose into routed",
            "# ones; CUDA-only operators) keeps its default: composite kernels, else ATen's CPU "
            "fallback.",
            f"# Dtypes CPU's kernel lacks and CUDA's takes go to core's {COMPOSITE} backend (kernels "
            "written with",
            f"# ATen operators): {', '.join(sorted(composites)) or 'none'}.",
            "",
        ]
        for op in map(short_op_name, self.routed):
            lines.append(f"{op} = {BACKEND}")
            if op in composites:
                lines.append(composite_rule(op, composites[op]))
        return "\n".join(lines) + "\n"


def classify_box_routes(
    has_own_kernel: Callable[[str], bool], *, route_composite_implicit: bool
) -> tuple[list[str], dict[str, list[str]]]:
    """The ``aten`` overloads a ``box:<key>`` table routes, and per exclusion rule those left out.

    ``has_own_kernel(op)``: whether the target key has a kernel of its own for ``op`` (sim: the
    dispatcher's CPU key; cuda: its CUDA key; dcu: what ``native_functions.yaml`` declares for CUDA).
    The rules are the same for every vendor (module docstring); ``route_composite_implicit`` says
    whether an overload that also has a CompositeImplicitAutograd kernel is routed (sim) or left to
    its decomposition (the CUDA-ABI vendors, whose tables the loader checks against that rule).
    Rules are applied in the order listed in the returned dict.
    """
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    native = _core_native()
    routed: list[str] = []
    left: dict[str, list[str]] = {
        "excluded by name": [],
        "composite": [],
        "core-native": [],
        "view": [],
        "device argument": [],
        "sparse layout": [],
    }
    for op in sorted({n for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::")}):
        if op in STUB_COMPOSITES:
            routed.append(op)
            continue
        if not has_own_kernel(op):
            continue
        base = op.removeprefix("aten::").partition(".")[0]
        schema = _schema(op)
        if base in EXCLUDED:
            left["excluded by name"].append(op)
        elif not route_composite_implicit and has(op, "CompositeImplicitAutograd"):
            left["composite"].append(op)
        elif op in native:
            left["core-native"].append(op)
        elif any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns):
            left["view"].append(op)
        elif any("Device" in str(a.type) for a in schema.arguments):
            left["device argument"].append(op)
        elif "sparse" in base:
            left["sparse layout"].append(op)
        else:
            routed.append(op)
    return routed, left


@functools.lru_cache(maxsize=1)
def flaggems_route_classes() -> tuple[frozenset[str], frozenset[str]]:
    """(overloads a ``cpu`` route can serve, factories with a Device argument), short names, by the
    rules of :func:`classify_box_routes`: what a vendor generator may write FlagGems preference lists
    for. A factory routed to ``cpu`` would hand back a CPU tensor, so it may take flaggems or a
    device backend but not cpu; core-native overloads, views, sparse layouts and decomposing
    CompositeImplicitAutograd ones (FlagGems names some) take no route at all."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    routed, left = classify_box_routes(lambda op: True, route_composite_implicit=True)
    cpu_ok = {
        short_op_name(op)
        for op in routed
        if not (has(op, "CompositeImplicitAutograd") and not has(op, "CPU"))
    }
    return frozenset(cpu_ok), frozenset(short_op_name(op) for op in left["device argument"])


def generate_sim() -> Generated:
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    gen = Generated()
    gen.total = sum(1 for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::"))
    gen.with_cpu = sum(
        1
        for n in torch._C._dispatch_get_all_op_names()
        if n.startswith("aten::") and n not in STUB_COMPOSITES and has(n, "CPU")
    )
    routed, left = classify_box_routes(lambda op: has(op, "CPU"), route_composite_implicit=True)
    gen.routed = routed
    for rule in gen.excluded:
        gen.excluded[rule] = left[rule]
    return gen


VENDORS = {"sim": generate_sim}


def generate(vendor: str = "sim") -> str:
    """The table text for ``vendor``."""
    return VENDORS[vendor]().text(vendor)


def default_output(vendor: str = "sim") -> Path:
    """The table next to this package (the checked-in file in a source checkout)."""
    return Path(__file__).resolve().parent.parent / "routes" / f"{vendor}.conf"


def _generated_minor(text: str) -> str | None:
    m = re.search(r"^#\s*generated-for:\s*torch\s+(\d+\.\d+)\s*$", text, re.M)
    return m.group(1) if m else None


def _diff_summary(old: str, new: str, path: Path) -> str:
    def rules(text: str) -> set[str]:
        return {ln for ln in text.splitlines() if ln and not ln.startswith("#")}

    gone, added = sorted(rules(old) - rules(new)), sorted(rules(new) - rules(old))
    lines = [f"{path} is out of date: {len(added)} routes to add, {len(gone)} to remove"]
    lines += [f"  + {r}" for r in added[:20]] + (
        [f"  ... {len(added) - 20} more"] if len(added) > 20 else []
    )
    lines += [f"  - {r}" for r in gone[:20]] + (
        [f"  ... {len(gone) - 20} more"] if len(gone) > 20 else []
    )
    if not added and not gone:
        diff = difflib.unified_diff(
            old.splitlines(), new.splitlines(), "checked in", "generated", lineterm="", n=0
        )
        lines += ["  (comments differ)", *("  " + d for d in list(diff)[:20])]
    return "\n".join(lines)


def write_or_check(text: str, output: str | Path, *, check: bool, regenerate: str) -> int:
    """The command-line tail every route-table generator shares (core's and the vendors').

    ``output`` ``-`` prints the table. With ``check``, compares it with the file: exit status 1
    with a summary of the routes to add and remove (and ``regenerate``, the command that fixes
    it) when they differ; a table generated for another torch minor is not checked (its
    ``# generated-for:`` line says which). Otherwise writes the file atomically.
    """
    if str(output) == "-":
        sys.stdout.write(text)
        return 0
    path = Path(output)
    if check:
        try:
            current = path.read_text(encoding="utf-8")
        except OSError as exc:
            print(f"{path}: cannot read: {exc.strerror or exc}", file=sys.stderr)
            return 1
        minor = _generated_minor(current)
        if minor is not None and minor != torch_minor():
            print(
                f"{path}: generated for torch {minor}, this is torch {torch_minor()}: not checked "
                f"(regenerate it on torch {minor}, or generate a table for {torch_minor()})"
            )
            return 0
        if current == text:
            print(f"{path}: up to date")
            return 0
        print(_diff_summary(current, text, path), file=sys.stderr)
        print(f"regenerate: {regenerate} --output {path}", file=sys.stderr)
        return 1
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    rules = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    print(f"wrote {path}: {len(rules)} rules")
    return 0


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m torch_fl.routing.generate",
        description="Generate (or --check) a vendor's route table.",
    )
    parser.add_argument("--vendor", default="sim", choices=sorted(VENDORS))
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the table is not up to date"
    )
    parser.add_argument(
        "--output",
        default=None,
        help="the table file (default: the package's routes/<vendor>.conf; - for stdout)",
    )
    args = parser.parse_args(None if argv is None else list(argv))
    return write_or_check(
        generate(args.vendor),
        args.output or default_output(args.vendor),
        check=args.check,
        regenerate=f"python -m torch_fl.routing.generate --vendor {args.vendor}",
    )


if __name__ == "__main__":
    sys.exit(main())
