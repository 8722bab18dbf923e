"""Which arguments of an operator may be CPU tensors beside flagos tensors: CUDA's rule.

CUDA refuses a non-scalar CPU tensor beside CUDA tensors ("Expected all tensors to be on the same
device"), except in the arguments some kernels read or move themselves (the indices of
``index.Tensor``, ``index_put_``, ...). flagos raises where CUDA raises, whichever backend serves
the call, and accepts what CUDA accepts. Which arguments those are is a fact of ATen's CUDA
kernels, measured by ``tools/cpu_arguments_probe.py`` on a CUDA machine into
``cpu_arguments.json`` beside this module; core's same-device checks read it.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

__all__ = ["install", "rules"]

DATA = Path(__file__).with_name("cpu_arguments.json")


@functools.cache
def rules() -> dict[str, list[str]]:
    """Overload ("aten::index.Tensor") -> the arguments CUDA accepts as CPU tensors."""
    record = json.loads(DATA.read_text())
    rules = {op: list(names) for op, names in record["accepted"].items()}
    # Entries core accepted before they were measured, until a probe run covers them.
    for op, names in record.get("unmeasured", {}).get("accepted", {}).items():
        rules[op] = sorted(set(rules.get(op, [])) | set(names))
    return rules


def install() -> None:
    """Hand the rules to core's same-device checks (before any flagos operator runs)."""
    from torch_fl import _C

    _C.set_cpu_argument_rules(rules())
