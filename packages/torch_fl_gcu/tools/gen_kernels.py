"""Generate the topsaten ATen kernels of torch-fl-gcu from the ops table (tools/topsaten_ops.py).

    python tools/gen_kernels.py --topsaten /opt/tops/lib/libtopsaten.so --out build/generated

The driver is core's (``torch_fl.kit.kernel_generator``: the SDK symbol check, aten's schemas,
``topsaten_kernels.cpp`` and ``kernels.json``); this file says what is topsaten's: the functions
are C++ (``nm -DC``, demangled ``topsaten::topsatenXxx(...)``), one symbol per function, and a
kernel hands its category routine the function and its name.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import topsaten_ops  # noqa: E402  (importing the table puts core's kit on sys.path)
from kernel_generator import KernelSdk, main  # noqa: E402


class Topsaten(KernelSdk):
    vendor = "gcu"
    namespace = "torch_fl_gcu"
    cpp_namespace = "tfl_gcu"
    prefix = "topsaten"
    option = "topsaten"
    library = "libtopsaten.so"
    table = "topsaten_ops.py"
    categories_header = "topsaten_categories.h"
    kernels_file = "topsaten_kernels.cpp"
    nm_flags = ("-DC", "--defined-only")
    symbol = re.compile(r"\btopsaten::(topsaten\w+)\(")
    handwritten = topsaten_ops.HANDWRITTEN

    def qualified(self, function: str) -> str:
        return f"topsaten::{function}"

    def why_missing(self, missing):
        return "libtopsaten.so does not export " + ", ".join(self.qualified(m) for m in missing)

    def missing_warning(self, function: str, why: str) -> str:
        return f"{self.qualified(function)} is not exported by libtopsaten.so"

    def call_arguments(self, op, function: str) -> str:
        return f'&topsaten::{function}, "{function}"'


SDK = Topsaten()


if __name__ == "__main__":
    sys.exit(main(SDK, topsaten_ops.OPS, description=__doc__.splitlines()[0]))
