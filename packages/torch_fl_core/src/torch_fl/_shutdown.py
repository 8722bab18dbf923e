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

import torch

_registered = False


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
