"""Generate the ACLNN ATen kernels of torch-fl-ascend from the ops table (tools/aclnn_ops.py).

    python tools/gen_kernels.py --opapi $ASCEND_TOOLKIT_HOME/lib64/libopapi.so --out build/generated

The driver is core's (``torch_fl.kit.kernel_generator``: the SDK symbol check, aten's schemas,
``aclnn_kernels.cpp`` and ``kernels.json``); this file says what is ACLNN's: an op is the pair
``aclnnXGetWorkspaceSize`` + ``aclnnX`` (C symbols ``libopapi.so`` defines, ``nm -D``; either half
missing skips the op), each declared by its own ``aclnnop/`` header, and a kernel hands its
category routine both typed functions (the headers' prototypes) and the dtypes the table lists.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import aclnn_ops  # noqa: E402  (importing the table puts core's kit on sys.path)
from kernel_generator import KernelSdk, dtype_set_line, main  # noqa: E402


class Aclnn(KernelSdk):
    vendor = "ascend"
    namespace = "torch_fl_ascend"
    cpp_namespace = "tfl_ascend"
    prefix = "aclnn"
    option = "opapi"
    library = "libopapi.so"
    table = "aclnn_ops.py"
    categories_header = "aclnn_categories.h"
    kernels_file = "aclnn_kernels.cpp"
    nm_flags = ("-D", "--defined-only")
    symbol = re.compile(r"^\S*\s*[TW]\s+(aclnn\w+)$")
    handwritten = aclnn_ops.HANDWRITTEN

    def exported(self, function: str) -> tuple[str, ...]:
        return (f"{function}GetWorkspaceSize", function)

    def why_missing(self, missing):
        return f"libopapi.so does not define {' and '.join(missing)}"

    def includes(self, op):
        return (f"#include <aclnnop/{op.header}>",)

    def kernel_lines(self, op, function: str):
        return (dtype_set_line(op),)

    def call_arguments(self, op, function: str) -> str:
        return f'&{function}GetWorkspaceSize, &{function}, "{function}", dtypes'


SDK = Aclnn()

if __name__ == "__main__":
    sys.exit(main(SDK, aclnn_ops.OPS, description=__doc__.splitlines()[0]))
