"""Generate the ACLNN ATen kernels of torch-fl-ascend from the ops table (tools/aclnn_ops.py).

    python tools/gen_kernels.py --opapi $ASCEND_TOOLKIT_HOME/lib64/libopapi.so --out build/generated

An ACLNN op is the pair ``aclnnXGetWorkspaceSize`` + ``aclnnX``; for every op in the table both are
looked up among the symbols the installed ``libopapi.so`` defines (``nm -D --defined-only``). An op
the toolkit lacks (either half missing) is skipped with a warning and keeps its fallback route; an
aten overload this torch does not have is skipped likewise. For the rest it writes

- ``aclnn_kernels.cpp``: one boxed kernel per aten overload, calling the category routine with the
  typed ACLNN functions (the ``aclnnop/`` headers' prototypes) and the dtypes the table lists,
  registered as ``torch_fl_ascend::<op>.<overload>`` with aten's schema and a ``PrivateUse1``
  kernel (core's library backend ``ascend`` serves aten overloads from there);
- ``kernels.json``: what was generated (overload -> ACLNN function), the dtypes each serves, what
  was skipped and why (installed with the package; ``python -m torch_fl_ascend`` and the route
  generator read it).

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
from aclnn_ops import HANDWRITTEN, OPS, aten_overloads  # noqa: E402

NAMESPACE = "torch_fl_ascend"
_SYMBOL = re.compile(r"^\S*\s*[TW]\s+(aclnn\w+)$")

#: torch dtype name -> the C++ at::ScalarType spelling
_CPP_DTYPE = {
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


def exported_functions(library: Path) -> set[str]:
    """aclnn* functions the library defines (``nm -D --defined-only``: text symbols)."""
    nm = shutil.which("nm")
    if nm is None:
        raise SystemExit("gen_kernels: 'nm' (binutils) is needed to read libopapi.so's symbols")
    out = subprocess.run(
        [nm, "-D", "--defined-only", str(library)], check=True, capture_output=True, text=True
    ).stdout
    return {m.group(1) for line in out.splitlines() if (m := _SYMBOL.match(line.strip()))}


def _schema(name: str, overload: str):
    import torch

    try:
        return torch._C._get_schema(f"aten::{name}", overload)
    except RuntimeError:
        return None


def _composite(full: str) -> bool:
    import torch

    return torch._C._dispatch_has_kernel_for_dispatch_key(full, "CompositeImplicitAutograd")


def _form(schema) -> str:
    for arg in schema.arguments:
        if arg.kwarg_only and arg.alias_info is not None and arg.alias_info.is_write:
            return "Out"
    if schema.name.endswith("_"):
        return "Inplace"
    return "Functional"


def _cident(name: str, overload: str) -> str:
    return "k_" + re.sub(r"\W", "_", f"{name}__{overload}" if overload else name)


def _dtype_set(dtypes: tuple[str, ...]) -> str:
    return "tfl_ascend::DtypeSet dtypes{" + ", ".join(_CPP_DTYPE[d] for d in dtypes) + "}"


def _c_string(text: str) -> str:
    """A C++ string literal of ``text`` (schemas quote string defaults: ``approximate="none"``)."""
    return json.dumps(text)


def _full(name: str, overload: str) -> str:
    return f"aten::{name}" + (f".{overload}" if overload else "")


def generate(functions: set[str]) -> tuple[str, dict]:
    kernels: list[str] = []
    defs: list[str] = []
    impls: list[str] = []
    headers: set[str] = set()
    generated: dict[str, str] = {}
    dtypes: dict[str, list[str]] = {}
    skipped: dict[str, str] = {}
    warnings: list[str] = []
    for op in OPS:
        pairs = aten_overloads(op)
        missing = [s for s in (f"{op.symbol}GetWorkspaceSize", op.symbol) if s not in functions]
        if missing:
            why = f"libopapi.so does not define {' and '.join(missing)}"
            for name, overload in pairs:
                skipped[_full(name, overload)] = why
            warnings.append(
                f"{why}: skipping " + ", ".join(n + (f".{o}" if o else "") for n, o in pairs)
            )
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
            headers.add(op.header)
            ident = _cident(name, overload)
            extra = f", {op.args}" if op.args else ""
            kernels.append(
                f"void {ident}(const c10::OperatorHandle& op, torch::jit::Stack* s) {{\n"
                f"  static const {_dtype_set(op.dtypes)};\n"
                f"  tfl_ascend::Call c(op, s, tfl_ascend::Form::{_form(schema)});\n"
                f"  tfl_ascend::{op.category}(c, &{op.symbol}GetWorkspaceSize, &{op.symbol}, "
                f'"{op.symbol}", dtypes{extra});\n'
                f"}}\n"
            )
            text = str(schema)
            assert text.startswith("aten::"), text
            defs.append(f"  m.def({_c_string(text[len('aten::') :])});")
            reg = name + (f".{overload}" if overload else "")
            impls.append(
                f'  m.impl("{reg}", torch::CppFunction::makeFromBoxedFunction<&{ident}>());'
            )
            generated[full] = op.symbol
            dtypes[full] = list(op.dtypes)
    for op, (needs, served) in HANDWRITTEN.items():
        name, _, overload = op.partition(".")
        full = _full(name, overload)
        missing = [s for fn in needs for s in (f"{fn}GetWorkspaceSize", fn) if s not in functions]
        schema = _schema(name, overload)
        if missing or schema is None:
            why = (
                f"libopapi.so does not define {' and '.join(missing)}"
                if missing
                else "this torch has no such overload"
            )
            skipped[full] = why
            warnings.append(f"{full} (handwritten) skipped: {why}")
            continue
        defs.append(f"  m.def({_c_string(str(schema)[len('aten::') :])});")
        generated[full] = "+".join(needs)
        dtypes[full] = list(served)
    cpp = "\n".join(
        [
            "// GENERATED by tools/gen_kernels.py from tools/aclnn_ops.py -- do not edit.",
            "// One boxed kernel per aten overload, registered in the torch_fl_ascend namespace",
            "// with aten's schema (core's library backend 'ascend' serves aten from there).",
            "#include <torch/library.h>",
            "",
            *(f"#include <aclnnop/{h}>" for h in sorted(headers)),
            "",
            '#include "aclnn_categories.h"',
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
        "dtypes": dict(sorted(dtypes.items())),
        "skipped": dict(sorted(skipped.items())),
        "warnings": warnings,
    }
    return cpp, manifest


def _write(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--opapi", required=True, type=Path, help="path of libopapi.so")
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    args = parser.parse_args(argv)
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    functions = exported_functions(args.opapi)
    if not functions:
        raise SystemExit(f"gen_kernels: {args.opapi} defines no aclnn* function")
    cpp, manifest = generate(functions)
    manifest["opapi"] = str(args.opapi.resolve())
    args.out.mkdir(parents=True, exist_ok=True)
    _write(args.out / "aclnn_kernels.cpp", cpp)
    _write(args.out / "kernels.json", json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    for w in manifest["warnings"]:
        print(f"gen_kernels: warning: {w}", file=sys.stderr)
    print(
        f"gen_kernels: {len(manifest['generated'])} aten overloads on "
        f"{len(set(manifest['generated'].values()))} aclnn functions, "
        f"{len(manifest['skipped'])} skipped",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
