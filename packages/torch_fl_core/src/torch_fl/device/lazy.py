"""Lazy initialisation of the ``flagos`` device module, like ``torch.cuda``'s.

The vendor runtime is loaded when ``torch_fl`` is imported, but the device module is
"initialised" only on first use: PyTorch calls ``torch.flagos._lazy_init()`` before it creates a
``flagos`` tensor from Python, and every function here that needs a device calls it too. Until then
calls that would touch a device (``torch.manual_seed`` reaching ``manual_seed_all``, for instance)
are queued, so ``import torch`` and ``torch.manual_seed`` keep working on a machine whose vendor
has no device. Initialisation fails, with the vendor's reason, when there is no device.

After ``fork()`` an initialised parent leaves the child in a "bad fork": the runtime's threads did
not survive, and re-initialising there is an error (use the ``spawn`` start method).
"""

from __future__ import annotations

import os
import threading
import traceback
from collections.abc import Callable

from torch_fl import _C
from torch_fl.device import errors

__all__ = ["_is_in_bad_fork", "_lazy_call", "_lazy_init", "init", "is_initialized"]

_initialized = False
_in_bad_fork = False
_lock = threading.RLock()
_tls = threading.local()
# Queued calls with the stack that queued them (shown if the call fails at initialisation).
_queued_calls: list[tuple[Callable[[], None], list[str]]] = []
# Only the latest manual_seed / manual_seed_all matters; kept apart so they do not pile up.
_seed_calls: dict[str, tuple[Callable[[], None], list[str]]] = {}


class DeferredFlagosError(RuntimeError):
    """A call queued before initialisation failed when initialisation ran it."""


def is_initialized() -> bool:
    """Whether the ``flagos`` device module has been initialised in this process."""
    return _initialized and not _in_bad_fork


def init() -> None:
    """Initialise the ``flagos`` device module now, as ``torch.cuda.init()`` does: raises with
    the vendor's reason when there is no device, and in a forked child of an initialised parent."""
    _lazy_init()


def _is_in_bad_fork() -> bool:
    return _in_bad_fork


def _lazy_call(fn: Callable[[], None], *, seed: bool = False, seed_all: bool = False) -> None:
    """Run ``fn`` now if initialised, else at initialisation (only the last seed call is kept)."""
    with _lock:
        if is_initialized():
            run_now = True
        else:
            run_now = False
            stack = traceback.format_stack()
            if seed_all:
                _seed_calls.pop("seed_all", None)
                _seed_calls.pop("seed", None)  # manual_seed_all supersedes manual_seed
                _seed_calls["seed_all"] = (fn, stack)
            elif seed:
                _seed_calls.pop("seed", None)
                _seed_calls["seed"] = (fn, stack)
            else:
                _queued_calls.append((fn, stack))
    if run_now:
        fn()


def _lazy_init() -> None:
    """Initialise the device module once; raise with the vendor's reason when there is no device."""
    global _initialized
    if is_initialized() or getattr(_tls, "is_initializing", False):
        return
    with _lock:
        if is_initialized():
            return
        if _in_bad_fork:
            raise RuntimeError(
                "flagos: cannot re-initialize the device in a forked subprocess. To use flagos "
                "with multiprocessing, use the 'spawn' start method."
            )
        if _C.device_count() == 0:
            raise RuntimeError(errors.no_device())
        _tls.is_initializing = True
        try:
            # The vendor's own lazy initialisation first (the cuda vendor initialises torch.cuda,
            # whose queued calls, seeds included, must run before ours and never after).
            from torch_fl import vendors

            selection = vendors.active()
            hook = getattr(selection.vendor, "lazy_init", None) if selection else None
            if hook is not None:
                hook()
            for fn, stack in [*_seed_calls.values(), *_queued_calls]:
                try:
                    fn()
                except Exception as exc:
                    raise DeferredFlagosError(
                        f"flagos call failed lazily at initialization with error: {exc}\n\n"
                        f"flagos call was originally invoked at:\n\n{''.join(stack)}"
                    ) from exc
            # ATen's own record of the accelerator's initialisation (torch.cuda's lazy init makes
            # the same call for CUDA): Tensor.is_pinned() asks it first.
            _C.lazy_init_context()
        finally:
            _tls.is_initializing = False
        _seed_calls.clear()
        _queued_calls.clear()
        _initialized = True


def _after_fork_in_child() -> None:
    global _initialized, _in_bad_fork, _lock
    _lock = threading.RLock()  # another thread may have held it at fork time
    if _initialized:
        _initialized = False
        _in_bad_fork = True


os.register_at_fork(after_in_child=_after_fork_in_child)
