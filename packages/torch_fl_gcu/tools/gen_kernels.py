"""Generate the topsaten ATen kernels of torch-fl-gcu from the ops table (tools/topsaten_ops.py).

    python tools/gen_kernels.py --topsaten /opt/tops/lib/libtopsaten.so --out build/generated

For every op in the table, the topsaten function it needs is looked up among the symbols the
installed ``libtopsaten.so`` exports (``nm -DC``, demangled ``topsaten::topsatenXxx(...)``). An op
whose function the SDK lacks is skipped with a warning (it keeps its fallback route); an aten
overload this torch does not have is skipped likewise. For the rest it writes

- ``topsaten_kernels.cpp``: one boxed kernel per aten overload, calling the category routine with
  the topsaten function, registered as ``torch_fl_gcu::<op>.<overload>`` with aten's schema and a
  ``PrivateUse1`` kernel (core's library backend ``gcu`` serves aten overloads from there);
- ``kernels.json``: what was generated and what was skipped and why (installed with the package;
  ``python -m torch_fl_gcu`` and the route generator read it).

Output is deterministic; a file is rewritten only when its content changes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from topsaten_ops import OPS, aten_overloads, tops_name  # noqa: E402

NAMESPACE = "torch_fl_gcu"

#: Kernels written by hand (csrc/kernels/*.cpp) from topsaten-backed operators: aten overload ->
#: the topsaten functions they need. Their schema is defined here only when all exist.
HANDWRITTEN: dict[str, tuple[str, ...]] = {
    "_amp_foreach_non_finite_check_and_unscale_": (
        "topsatenSub",
        "topsatenEq",
        "topsatenAll",
        "topsatenLogicalNot",
        "topsatenMaximum",
        "topsatenMul",
    ),
    "_amp_update_scale_": (
        "topsatenNe",
        "topsatenAdd",
        "topsatenEq",
        "topsatenMul",
        "topsatenSub",
        "topsatenWhere",
        "topsatenZero",
    ),
}
_SYMBOL = re.compile(r"\btopsaten::(topsaten\w+)\(")


def exported_functions(library: Path) -> set[str]:
    """topsaten function names the library exports (``nm -DC`` defined text symbols)."""
    nm = shutil.which("nm")
    if nm is None:
        raise SystemExit("gen_kernels: 'nm' (binutils) is needed to read libtopsaten.so's symbols")
    out = subprocess.run(
        [nm, "-DC", "--defined-only", str(library)], check=True, capture_output=True, text=True
    ).stdout
    return {m.group(1) for line in out.splitlines() if (m := _SYMBOL.search(line))}


def _schema(name: str, overload: str):
    import torch

    try:
        return torch._C._get_schema(f"aten::{name}", overload)
    except RuntimeError:
        return None


def _form(schema) -> str:
    for arg in schema.arguments:
        if arg.kwarg_only and arg.alias_info is not None and arg.alias_info.is_write:
            return "Out"
    if schema.name.endswith("_"):
        return "Inplace"
    return "Functional"


def _cident(name: str, overload: str) -> str:
    return "k_" + re.sub(r"\W", "_", f"{name}__{overload}" if overload else name)


def generate(functions: set[str]) -> tuple[str, dict]:
    kernels: list[str] = []
    defs: list[str] = []
    impls: list[str] = []
    generated: dict[str, str] = {}
    skipped: dict[str, str] = {}
    warnings: list[str] = []
    for op in OPS:
        fn = tops_name(op)
        pairs = aten_overloads(op)
        if op.broken and fn in functions:
            for name, overload in pairs:
                skipped[f"aten::{name}" + (f".{overload}" if overload else "")] = (
                    f"topsaten::{fn} {op.broken}"
                )
            warnings.append(f"topsaten::{fn} is exported but skipped: {op.broken}")
            continue
        if fn not in functions:
            for name, overload in pairs:
                skipped[f"aten::{name}" + (f".{overload}" if overload else "")] = (
                    f"libtopsaten.so does not export topsaten::{fn}"
                )
            warnings.append(
                f"topsaten::{fn} is not exported by libtopsaten.so: skipping "
                + ", ".join(n + (f".{o}" if o else "") for n, o in pairs)
            )
            continue
        for name, overload in pairs:
            full = f"aten::{name}" + (f".{overload}" if overload else "")
            schema = _schema(name, overload)
            if schema is None:
                skipped[full] = "this torch has no such overload"
                warnings.append(f"{full} does not exist in this torch: skipped")
                continue
            ident = _cident(name, overload)
            extra = f", {op.args}" if op.args else ""
            kernels.append(
                f"void {ident}(const c10::OperatorHandle& op, torch::jit::Stack* s) {{\n"
                f"  tfl_gcu::Call c(op, s, tfl_gcu::Form::{_form(schema)});\n"
                f'  tfl_gcu::{op.category}(c, &topsaten::{fn}, "{fn}"{extra});\n'
                f"}}\n"
            )
            text = str(schema)
            assert text.startswith("aten::"), text
            defs.append(f'  m.def("{text[len("aten::") :]}");')
            reg = name + (f".{overload}" if overload else "")
            impls.append(
                f'  m.impl("{reg}", torch::CppFunction::makeFromBoxedFunction<&{ident}>());'
            )
            generated[full] = fn
    for op, needs in HANDWRITTEN.items():
        name, _, overload = op.partition(".")
        full = f"aten::{op}"
        missing = [fn for fn in needs if fn not in functions]
        schema = _schema(name, overload)
        if missing or schema is None:
            why = (
                f"libtopsaten.so does not export {', '.join('topsaten::' + m for m in missing)}"
                if missing
                else "this torch has no such overload"
            )
            skipped[full] = why
            warnings.append(f"{full} (handwritten) skipped: {why}")
            continue
        defs.append(f'  m.def("{str(schema)[len("aten::") :]}");')
        generated[full] = "+".join(needs)
    cpp = "\n".join(
        [
            "// GENERATED by tools/gen_kernels.py from tools/topsaten_ops.py -- do not edit.",
            "// One boxed kernel per aten overload, registered in the torch_fl_gcu namespace",
            "// with aten's schema (core's library backend 'gcu' serves aten from there).",
            "#include <torch/library.h>",
            "",
            '#include "topsaten_categories.h"',
            "",
            "namespace {",
            "",
            *kernels,
            "}  // namespace",
            "",
            f"TORCH_LIBRARY_FRAGMENT({NAMESPACE}, m) {{",
            *defs,
            "}",
            "",
            f"TORCH_LIBRARY_IMPL({NAMESPACE}, PrivateUse1, m) {{",
            *impls,
            "}",
            "",
        ]
    )
    manifest = {
        "namespace": NAMESPACE,
        "generated": dict(sorted(generated.items())),
        "skipped": dict(sorted(skipped.items())),
        "warnings": warnings,
    }
    return cpp, manifest


def _write(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topsaten", required=True, type=Path, help="path of libtopsaten.so")
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    args = parser.parse_args(argv)
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    functions = exported_functions(args.topsaten)
    if not functions:
        raise SystemExit(f"gen_kernels: {args.topsaten} exports no topsaten::topsaten* function")
    cpp, manifest = generate(functions)
    manifest["topsaten"] = str(args.topsaten.resolve())
    args.out.mkdir(parents=True, exist_ok=True)
    _write(args.out / "topsaten_kernels.cpp", cpp)
    _write(args.out / "kernels.json", json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    for w in manifest["warnings"]:
        print(f"gen_kernels: warning: {w}", file=sys.stderr)
    print(
        f"gen_kernels: {len(manifest['generated'])} aten overloads on "
        f"{len(set(manifest['generated'].values()))} topsaten functions, "
        f"{len(manifest['skipped'])} skipped",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
