"""Running a program's statements one by one and recording, after each, its error, warnings,
result and the state of every variable."""

from __future__ import annotations

import re
import warnings

import torch

from .state import (
    AllTainted,
    contains_tensor,
    describe_result,
    flatten_vars,
    norm_msg,
    snapshot,
    storage_key,
)
from .values import PROGRAM_GLOBALS

# resize of an out= tensor fill them under deterministic algorithms, on CPU and on flagos)
GROWS = re.compile(r"\.set_\(")


def run_program(lines, dev, dev1, stop_at=None, det=True):
    """Runs the statements; returns a list of per-statement records.

    det: torch.use_deterministic_algorithms(True, warn_only=True) with
    fill_uninitialized_memory, so memory a kernel allocates or an out= resize grows holds NaN
    (or the integer maximum) on both sides instead of garbage."""
    prev = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    torch.use_deterministic_algorithms(det, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        return _run_program(lines, dev, dev1, stop_at)
    finally:
        torch.use_deterministic_algorithms(prev[0], warn_only=prev[1])


class _Boxed(torch.utils._python_dispatch.TorchDispatchMode):
    """Every aten call re-issued from Python (OpOverload.__call__): the router's boxed path."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


BOXED = [False]


def _run_program(lines, dev, dev1, stop_at=None):
    if BOXED[0]:
        with _Boxed():
            return _run_program_inner(lines, dev, dev1, stop_at)
    return _run_program_inner(lines, dev, dev1, stop_at)


def _run_program_inner(lines, dev, dev1, stop_at=None):
    tainted = set()
    ns = dict(PROGRAM_GLOBALS)
    ns["dev"] = dev
    ns["dev1"] = dev1
    names: list[str] = []
    records = []
    for i, line in enumerate(lines):
        if stop_at is not None and i >= stop_at:
            break
        target = line.split("=", 1)[0].strip() if re.match(r"^[A-Za-z_]\w*\s*=[^=]", line) else None
        rec = {"line": i}
        grows = GROWS.search(line) is not None
        if grows:
            before = {
                storage_key(t): t.untyped_storage().nbytes() for _, t in flatten_vars(ns, names)
            }
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                exec(compile(line, f"<stmt {i}>", "exec"), ns)
                rec["error"] = None
            except Exception as e:
                rec["error"] = {"type": type(e).__name__, "msg": norm_msg(str(e))}
        rec["warnings"] = sorted({(w_.category.__name__, norm_msg(str(w_.message))) for w_ in w})
        if rec["error"] is None and target is not None:
            v = ns.get(target)
            rec["result"] = describe_result(v, ns, names, tainted=tainted)
            if target not in names and (contains_tensor(v)):
                names.append(target)
            elif target not in names:
                ns.pop(target, None)
        if grows:
            for _, t in flatten_vars(ns, names):
                k = storage_key(t)
                if t.untyped_storage().nbytes() > before.get(k, 0):
                    tainted.add(k)
            if tainted:  # copies of uninitialized bytes are uninitialized too: stop comparing bytes
                tainted = AllTainted()
        rec["snap"] = snapshot(ns, names, tainted)
        records.append(rec)
        if rec["error"] is not None:
            break
    return records, ns


# --------------------------------------------------------------------------------------------
