"""Operator conformance of ``flagos`` against CPU, driven by PyTorch's OpInfo database.

For each OpInfo entry and dtype, :func:`check_op` runs the entry's sample inputs on CPU and on
``flagos`` and classifies the result as pass / wrong / error / skipped (see :mod:`.results`).
``python -m torch_fl.conformance`` runs every entry and writes ``docs/operator-conformance.md``.
Only public torch APIs are used, so it runs unchanged on any vendor.

    from torch_fl import conformance
    result = conformance.check_op(conformance.find("add"), torch.float32)
    assert result.outcome == "pass", result.detail
"""

from __future__ import annotations

from torch_fl.conformance.engine import CHECKS, DEFAULT_MAX_SAMPLES, check_op
from torch_fl.conformance.opdb import find, op_db
from torch_fl.conformance.results import OUTCOMES, CheckResult, OpResult

__all__ = [
    "CHECKS",
    "DEFAULT_MAX_SAMPLES",
    "OUTCOMES",
    "CheckResult",
    "OpResult",
    "check_op",
    "find",
    "op_db",
]
