"""Generate the muDNN ATen kernels of torch-fl-musa from the ops table (tools/mudnn_ops.py).

    python tools/gen_kernels.py --mudnn /usr/local/musa/lib/libmudnn.so --out build/generated

The driver is core's (``torch_fl.kit.kernel_generator``: the SDK symbol check, aten's schemas,
``mudnn_kernels.cpp`` and ``kernels.json``); this file says what is muDNN's: an object API whose
"functions" are operator classes with a mode (``Binary::ADD``) or a run method
(``MatMul::RunWithBiasAdd``); the exported C++ methods (``nm -DC``, demangled
``musa::dnn::Binary::Run(...)``) each needs are checked, and a kernel hands its category routine
the mode and the name.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mudnn_ops  # noqa: E402  (importing the table puts core's kit on sys.path)
from kernel_generator import KernelSdk, dtype_set_line, main  # noqa: E402


def _parts(function: str) -> tuple[str, str]:
    """("Binary", "ADD"), ("MatMul", "RunWithBiasAdd") or ("MatMul", "")."""
    cls, _, rest = function.partition("::")
    return cls, rest


def _is_mode(rest: str) -> bool:
    return bool(rest) and rest.upper() == rest


class Mudnn(KernelSdk):
    vendor = "musa"
    namespace = "torch_fl_musa"
    cpp_namespace = "tfl_musa"
    prefix = ""
    option = "mudnn"
    library = "libmudnn.so"
    table = "mudnn_ops.py"
    categories_header = "mudnn_categories.h"
    kernels_file = "mudnn_kernels.cpp"
    nm_flags = ("-DC", "--defined-only")
    symbol = re.compile(r"\bmusa::dnn::(\w+::\w+)\(")
    handwritten = mudnn_ops.HANDWRITTEN

    def exported(self, function: str) -> tuple[str, ...]:
        cls, rest = _parts(function)
        if _is_mode(rest):
            return (f"{cls}::SetMode", f"{cls}::Run")
        return (f"{cls}::{rest or 'Run'}",)

    def qualified(self, function: str) -> str:
        return f"musa::dnn::{function}"

    def why_missing(self, missing):
        return "libmudnn.so does not export " + ", ".join(f"musa::dnn::{m}" for m in missing)

    def kernel_lines(self, op, function: str):
        return (dtype_set_line(op),)

    def call_arguments(self, op, function: str) -> str:
        cls, rest = _parts(function)
        if _is_mode(rest):
            return f'musa::dnn::{cls}::Mode::{rest}, "{function}", dtypes'
        return f'"{cls}::{rest or "Run"}", dtypes'


SDK = Mudnn()


if __name__ == "__main__":
    sys.exit(main(SDK, mudnn_ops.OPS, description=__doc__.splitlines()[0]))
