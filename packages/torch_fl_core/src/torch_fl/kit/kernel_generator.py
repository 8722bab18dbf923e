"""The generator driver of a native vendor's ATen kernels.

A vendor's ``tools/gen_kernels.py`` describes its SDK (a :class:`KernelSdk` subclass: the library
and how it exports its functions, how one kernel calls one SDK function) and hands its ops table
(:class:`torch_fl.kit.kernel_ops.Op`) to :func:`main`. For every op, the SDK functions it needs are
looked up among the symbols the installed SDK library exports (``nm``): an op the SDK lacks is
skipped with a warning and keeps its fallback route; an aten overload this torch does not have,
or one that decomposes in this torch (``CompositeImplicitAutograd``: a kernel would never be
routed), is skipped likewise. For the rest it writes

- ``<sdk>_kernels.cpp``: one boxed kernel per aten overload, calling the vendor's category routine
  with the SDK function, registered as ``<namespace>::<op>.<overload>`` with aten's schema and a
  ``PrivateUse1`` kernel (core's library backend ``<vendor>`` serves aten overloads from there);
- ``kernels.json``: what was generated (overload -> SDK function), the dtypes each serves where the
  table lists them, what was skipped and why (installed with the package; ``python -m <package>``
  and the vendor's route generator read it).

Output is deterministic; a file is rewritten only when its content changes. This module imports
nothing from ``torch_fl`` (see :mod:`torch_fl.kit`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch_fl.kit.kernel_ops import Op


#: torch dtype name (an ops table's ``dtypes``) -> the C++ ``at::ScalarType`` spelling
CPP_DTYPES = {
    "float32": "at::kFloat",
    "float16": "at::kHalf",
    "bfloat16": "at::kBFloat16",
    "float64": "at::kDouble",
    "int64": "at::kLong",
    "int32": "at::kInt",
    "int16": "at::kShort",
    "int8": "at::kChar",
    "uint8": "at::kByte",
    "bool": "at::kBool",
}


def dtype_set_line(op: Op) -> str:
    """The kernel statement declaring ``dtypes``, the op's compute dtypes as a
    ``torch_fl::kit::DtypeSet`` (include/torch_fl/kit/dtype_set.h)."""
    cpp = ", ".join(CPP_DTYPES[d] for d in op.dtypes or ())
    return f"static const torch_fl::kit::DtypeSet dtypes{{{cpp}}};"


class KernelSdk:
    """A vendor's SDK as the generator sees it; a vendor subclasses it and sets every attribute."""

    #: core's library backend name ("gcu")
    vendor: str
    #: the torch library namespace the kernels register in ("torch_fl_gcu")
    namespace: str
    #: the C++ namespace of the vendor's category routines and call type ("tfl_gcu")
    cpp_namespace: str
    #: every SDK function's prefix ("topsaten"); also the generator's option (``--topsaten PATH``)
    #: unless ``option`` says otherwise
    prefix: str
    #: the command-line option naming the SDK library, also its key in kernels.json
    option: str
    #: the SDK library's file name ("libtopsaten.so")
    library: str
    #: the vendor's ops table module and category header ("topsaten_ops.py", ...)
    table: str
    categories_header: str
    #: the generated kernels' file name
    kernels_file: str
    #: ``nm`` flags listing the library's exported functions, and the pattern whose group 1 is a
    #: function name in one (stripped) line of that listing
    nm_flags: tuple[str, ...]
    symbol: re.Pattern[str]
    #: aten overload -> (the SDK functions a handwritten kernel needs, the dtypes it serves or
    #: None): their schemas are defined here only when every function exists
    handwritten: Mapping[str, tuple[tuple[str, ...], tuple[str, ...] | None]] = {}

    def exported(self, function: str) -> tuple[str, ...]:
        """The exported symbols one SDK function needs (a two-phase API has two)."""
        return (function,)

    def qualified(self, function: str) -> str:
        """The function as messages name it (``topsaten::topsatenAdd``)."""
        return function

    def why_missing(self, missing: Sequence[str]) -> str:
        """Why an op is skipped when the library lacks ``missing`` (exported symbol names)."""
        raise NotImplementedError

    def missing_warning(self, function: str, why: str) -> str:
        """The warning (before ``: skipping <overloads>``) for an op whose function is missing."""
        return why

    def includes(self, op: Op) -> Iterable[str]:
        """``#include`` lines the kernels of ``op`` need beyond the category header."""
        return ()

    def kernel_lines(self, op: Op, function: str) -> Sequence[str]:
        """The statements before the category call (e.g. a static dtype set)."""
        return ()

    def call_arguments(self, op: Op, function: str) -> str:
        """The category routine's SDK arguments after the call (``&topsaten::X, "X"``)."""
        raise NotImplementedError


def exported_functions(sdk: KernelSdk, library: Path) -> set[str]:
    """The SDK function names ``library`` exports (``nm``, defined text symbols)."""
    nm = shutil.which("nm")
    if nm is None:
        raise SystemExit(f"gen_kernels: 'nm' (binutils) is needed to read {sdk.library}'s symbols")
    out = subprocess.run(
        [nm, *sdk.nm_flags, str(library)], check=True, capture_output=True, text=True
    ).stdout
    return {m.group(1) for line in out.splitlines() if (m := sdk.symbol.search(line.strip()))}


def _schema(name: str, overload: str) -> Any:
    import torch

    try:
        return torch._C._get_schema(f"aten::{name}", overload)
    except RuntimeError:
        return None


def _composite(full: str) -> bool:
    import torch

    return torch._C._dispatch_has_kernel_for_dispatch_key(full, "CompositeImplicitAutograd")


def _form(schema: Any) -> str:
    """How the overload returns: into a kwarg-only written argument (out=), into self, or fresh."""
    for arg in schema.arguments:
        if arg.kwarg_only and arg.alias_info is not None and arg.alias_info.is_write:
            return "Out"
    if schema.name.endswith("_"):
        return "Inplace"
    return "Functional"


def _cident(name: str, overload: str) -> str:
    return "k_" + re.sub(r"\W", "_", f"{name}__{overload}" if overload else name)


def _full(name: str, overload: str) -> str:
    return f"aten::{name}" + (f".{overload}" if overload else "")


def _spelled(pairs: Iterable[tuple[str, str]]) -> str:
    return ", ".join(n + (f".{o}" if o else "") for n, o in pairs)


def _definition(schema: Any) -> str:
    """``m.def(...)`` of aten's schema; a C++ literal (schemas quote string defaults)."""
    text = str(schema)
    assert text.startswith("aten::"), text
    return f"  m.def({json.dumps(text[len('aten::') :])});"


def generate(sdk: KernelSdk, ops: Sequence[Op], functions: set[str]) -> tuple[str, dict]:
    """The generated C++ and the manifest for the SDK functions ``functions``."""
    kernels: list[str] = []
    defs: list[str] = []
    impls: list[str] = []
    includes: set[str] = set()
    generated: dict[str, str] = {}
    dtypes: dict[str, list[str]] = {}
    skipped: dict[str, str] = {}
    warnings: list[str] = []
    ns = sdk.cpp_namespace
    for op in ops:
        fn = op.function(sdk.prefix)
        pairs = op.aten_overloads()
        missing = [s for s in sdk.exported(fn) if s not in functions]
        if op.broken and not missing:
            for name, overload in pairs:
                skipped[_full(name, overload)] = f"{sdk.qualified(fn)} {op.broken}"
            warnings.append(f"{sdk.qualified(fn)} is exported but skipped: {op.broken}")
            continue
        if missing:
            why = sdk.why_missing(missing)
            for name, overload in pairs:
                skipped[_full(name, overload)] = why
            warnings.append(f"{sdk.missing_warning(fn, why)}: skipping {_spelled(pairs)}")
            continue
        for name, overload in pairs:
            full = _full(name, overload)
            schema = _schema(name, overload)
            if schema is None:
                skipped[full] = "this torch has no such overload"
                warnings.append(f"{full} does not exist in this torch: skipped")
                continue
            if _composite(full):
                # Decomposes into routed operators on every device: a kernel would be unroutable.
                skipped[full] = "CompositeImplicitAutograd in this torch (its parts are routed)"
                continue
            includes.update(sdk.includes(op))
            ident = _cident(name, overload)
            extra = f", {op.args}" if op.args else ""
            kernels.append(
                "\n".join(
                    [
                        f"void {ident}(const c10::OperatorHandle& op, torch::jit::Stack* s) {{",
                        *(f"  {line}" for line in sdk.kernel_lines(op, fn)),
                        f"  {ns}::Call c(op, s, {ns}::Form::{_form(schema)});",
                        # The routine runs with the call's device current (SDK calls,
                        # allocations and the current stream are the device's).
                        "  c10::DeviceGuard guard(c.device());",
                        f"  {ns}::{op.category}(c, {sdk.call_arguments(op, fn)}{extra});",
                        "}",
                    ]
                )
                + "\n"
            )
            defs.append(_definition(schema))
            reg = name + (f".{overload}" if overload else "")
            impls.append(
                f'  m.impl("{reg}", torch::CppFunction::makeFromBoxedFunction<&{ident}>());'
            )
            generated[full] = fn
            if op.dtypes is not None:
                dtypes[full] = list(op.dtypes)
    for op, (needs, served) in sdk.handwritten.items():
        name, _, overload = op.partition(".")
        full = _full(name, overload)
        missing = [s for fn in needs for s in sdk.exported(fn) if s not in functions]
        schema = _schema(name, overload)
        if missing or schema is None:
            why = sdk.why_missing(missing) if missing else "this torch has no such overload"
            skipped[full] = why
            warnings.append(f"{full} (handwritten) skipped: {why}")
            continue
        defs.append(_definition(schema))
        generated[full] = "+".join(needs)
        if served is not None:
            dtypes[full] = list(served)
    cpp = "\n".join(
        [
            f"// GENERATED by tools/gen_kernels.py from tools/{sdk.table} -- do not edit.",
            f"// One boxed kernel per aten overload, registered in the {sdk.namespace} namespace",
            f"// with aten's schema (core's library backend '{sdk.vendor}' serves aten from there).",
            "#include <c10/core/DeviceGuard.h>",
            "#include <torch/library.h>",
            "",
            *([*sorted(includes), ""] if includes else []),
            f'#include "{sdk.categories_header}"',
            "",
            "namespace {",
            "",
            *kernels,
            "}  // namespace",
            "",
            f"TORCH_LIBRARY_FRAGMENT({sdk.namespace}, m) {{",
            *defs,
            "}",
            "",
            f"TORCH_LIBRARY_IMPL({sdk.namespace}, PrivateUse1, m) {{",
            *impls,
            "}",
            "",
        ]
    )
    manifest: dict[str, Any] = {
        "namespace": sdk.namespace,
        "generated": dict(sorted(generated.items())),
        "skipped": dict(sorted(skipped.items())),
        "warnings": warnings,
    }
    if any(op.dtypes is not None for op in ops):  # a table that lists dtypes always has the key
        manifest["dtypes"] = dict(sorted(dtypes.items()))
    return cpp, manifest


def _write(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def main(
    sdk: KernelSdk, ops: Sequence[Op], argv: list[str] | None = None, description: str = ""
) -> int:
    """``gen_kernels.py --<option> LIBRARY --out DIR``: writes the kernels and kernels.json."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        f"--{sdk.option}", required=True, type=Path, dest="library", help=f"path of {sdk.library}"
    )
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    args = parser.parse_args(argv)
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    functions = exported_functions(sdk, args.library)
    if not functions:
        raise SystemExit(f"gen_kernels: {args.library} exports no {sdk.prefix}* function")
    cpp, manifest = generate(sdk, ops, functions)
    manifest[sdk.option] = str(args.library.resolve())
    args.out.mkdir(parents=True, exist_ok=True)
    _write(args.out / sdk.kernels_file, cpp)
    _write(args.out / "kernels.json", json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    for w in manifest["warnings"]:
        print(f"gen_kernels: warning: {w}", file=sys.stderr)
    print(
        f"gen_kernels: {len(manifest['generated'])} aten overloads on "
        f"{len(set(manifest['generated'].values()))} {sdk.prefix} functions, "
        f"{len(manifest['skipped'])} skipped",
        file=sys.stderr,
    )
    return 0
