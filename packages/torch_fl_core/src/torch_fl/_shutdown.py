"""Interpreter shutdown with flagos autograd threads.

The autograd engine runs backward work for a non-CPU device on a worker thread per device, and
that thread keeps the state of the last graph task it ran. Since torch 2.13 that state can hold a
Python object (the ``contextvars.Context`` stashed by ``_engine_run_backward``). If the thread
drops it while the interpreter is finalizing, taking the GIL ends the thread with
``pthread_exit`` and the process aborts ("terminate called without an active exception"), a
race seen in about 1 of 20 short scripts under load. At exit we run one last tiny backward on
each flagos device straight through the C++ engine, which stashes no Python context, so the
state each worker keeps no longer refers to Python.

That work is torch-fl's, not the program's: ``FLAGOS_LOG``'s dispatch and fallback lines are
switched off while it runs (and back on after), so the log ends with the program's last operator.
"""

from __future__ import annotations

import atexit
import os
import sys

import torch

_registered = False
_budget_registered = False
#: Exit status of a process whose CPU-fallback share exceeded FLAGOS_FALLBACK_BUDGET.
BUDGET_EXIT_STATUS = 3
_TOP = 20


def _quiesce_autograd_workers() -> None:
    from torch_fl import _C

    if not _C.runtime_active() or _C.device_count() == 0:
        return
    engine = torch.autograd.Variable._execution_engine
    log = None
    try:
        if hasattr(_C, "set_log"):
            from torch_fl.routing import activation

            log = activation.log()
            _C.set_log(False, False)
        for index in range(_C.device_count()):
            device = torch.device("flagos", index)
            leaf = torch.ones((), device=device, requires_grad=True)
            engine.run_backward(
                (leaf * 1,), (torch.ones((), device=device),), False, False, (), True, True
            )
    except Exception:  # noqa: BLE001 - exit path: never turn a clean exit into a failure
        pass
    finally:
        if log is not None:
            _C.set_log(log.dispatch, log.fallback)


def register() -> None:
    """Install the exit hook once per process."""
    global _registered
    if not _registered:
        atexit.register(_quiesce_autograd_workers)
        _registered = True


def fallback_budget_report(budget: float) -> str | None:
    """None when the CPU fallback's share of the calls so far is within ``budget``, else the
    report printed at exit: the share and the operators it served most."""
    from torch_fl import census
    from torch_fl.routing.environment import BUDGET_VAR

    counts = census.collect()
    fallback, total = census.fallback_share(counts)
    if total == 0 or fallback / total <= budget:
        return None
    lines = [
        f"torch-fl: {BUDGET_VAR}={os.environ.get(BUDGET_VAR, budget)}: the CPU fallback served "
        f"{fallback} of {total} calls ({fallback / total:.1%}), over the budget of {budget:.1%}",
        "Top CPU-fallback operators (python -m torch_fl.census lists every one):",
    ]
    ops = sorted(census.fallback_ops(counts).items(), key=lambda kv: (-kv[1], kv[0]))
    for op, n in ops[:_TOP]:
        why = "routed to cpu" if census._routed_to(op) == census.FALLBACK else "no route"
        lines.append(f"  {op.removeprefix('aten::')}  {n}  ({why})")
    if len(ops) > _TOP:
        lines.append(f"  ... and {len(ops) - _TOP} more operators")
    return "\n".join(lines)


def _check_fallback_budget(budget: float) -> None:
    try:
        text = fallback_budget_report(budget)
    except Exception as exc:  # noqa: BLE001 - report, but a broken check must not pass silently
        text = f"torch-fl: FLAGOS_FALLBACK_BUDGET: could not count the calls: {exc}"
    if text is None:
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed stream
            pass
    sys.stderr.write(text + "\n")
    sys.stderr.flush()
    # atexit cannot change the exit status; leave now (the later exit work only finalizes).
    os._exit(BUDGET_EXIT_STATUS)


def register_fallback_budget(budget: float) -> None:
    """Check FLAGOS_FALLBACK_BUDGET (a fraction of the calls) at exit, once per process."""
    global _budget_registered
    if not _budget_registered:
        atexit.register(_check_fallback_budget, budget)
        _budget_registered = True
