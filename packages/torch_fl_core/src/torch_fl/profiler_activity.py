"""The vendor's native profiler activity, recorded by every Kineto profile of ``flagos``.

A vendor whose device work one of torch's own tracers already sees declares that activity
(:attr:`torch_fl.vendors.Vendor.profiler_activity`): the cuda vendor's boxed kernels are CUDA
kernels on the CUDA current stream, so CUPTI (``ProfilerActivity.CUDA``) records them. A profile
that targets ``flagos`` through Kineto, ``torch.profiler.profile(activities=[CPU, PrivateUse1])``
or ``torch.autograd.profiler.profile(use_device="flagos", use_kineto=True)``, then records that
activity too. Torch links each kernel to the op row that launched it (Kineto correlation ids) and
its ``_parse_kineto_results`` adds CUDA and PrivateUse1 kernels to those rows alike, so
``FunctionEvent.device_time_total`` counts them.

The hook is ``torch.autograd.profiler.profile.__init__``, which ``torch.profiler.profile``
constructs in ``prepare_trace``: on torch 2.10 to 2.13 it computes ``use_device``,
``profiler_kind`` and the ``kineto_activities`` set that ``_prepare_profiler`` and
``_enable_profiler`` receive later, so the activity is added to that set right after it.

Left alone: the legacy state (``KINETO_PRIVATEUSE1_FALLBACK``, e.g. ``use_kineto=False``), where
core's ProfilerStubs time every op and kernel rows would count the same time twice; and torch
builds that lack the activity (a CPU wheel has no CUPTI), where core's runtime events stay the
source of device time. Once the activity is in force, core's own Kineto activity profiler
(torch >= 2.12) is switched off for the process: it would bracket the same calls with runtime
events.

Installed at import only when the active vendor declares an activity (never on ``sim``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import torch
from torch.autograd import ProfilerActivity, ProfilerState

__all__ = ["in_force", "install", "installed_activity", "uninstall"]


def _supported_activities() -> set[ProfilerActivity]:
    # An attribute of this module so tests can stand in for a torch with the activity.
    return set(torch.autograd._supported_activities())


@dataclasses.dataclass
class _Installed:
    activity: ProfilerActivity
    original_init: Callable[..., None]
    #: Whether this torch supports the activity; decided at the first profile (not at import:
    #: asking counts the GPUs).
    in_force: bool | None = None


_installed: _Installed | None = None
_ORIGINAL = "_torch_fl_original_init"


def _profile_class() -> type:
    return torch.autograd.profiler.profile


def _decide(state: _Installed) -> bool:
    if state.in_force is None:
        state.in_force = state.activity in _supported_activities()
        if state.in_force:
            from torch_fl import _C

            _C.set_kineto_session_enabled(False)
    return state.in_force


def _after_init(prof: Any) -> None:
    state = _installed
    if state is None or not getattr(prof, "enabled", False):
        return
    # Decided for every profile, whatever it targets: a [CPU, CUDA] profile would otherwise start
    # core's session beside CUPTI.
    if not _decide(state):
        return
    if prof.use_device != torch._C._get_privateuse1_backend_name():
        return
    if prof.profiler_kind == ProfilerState.KINETO_PRIVATEUSE1_FALLBACK:
        return
    prof.kineto_activities.add(state.activity)


def install(activity: ProfilerActivity | None, *, vendor: str = "") -> None:
    """Make Kineto profiles of ``flagos`` record ``activity`` too; None installs nothing.

    Idempotent for the same activity; another one replaces it. ``vendor`` names the declaring
    vendor in the error for a value that is not a ``ProfilerActivity``.
    """
    global _installed
    if activity is None:
        return
    if not isinstance(activity, ProfilerActivity):
        raise TypeError(
            f"vendor {vendor!r} declares profiler_activity={activity!r}; expected a "
            f"torch.profiler.ProfilerActivity member or None"
        )
    if _installed is not None:
        if _installed.activity == activity:
            return
        uninstall()
    cls = _profile_class()
    # A re-imported torch_fl finds its earlier wrapper: replace it, do not wrap it.
    original = getattr(cls.__init__, _ORIGINAL, cls.__init__)

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        _after_init(self)

    setattr(__init__, _ORIGINAL, original)
    cls.__init__ = __init__
    _installed = _Installed(activity=activity, original_init=original)


def uninstall() -> None:
    """Undo :func:`install`: torch's own ``__init__`` back, core's Kineto session allowed again."""
    global _installed
    if _installed is None:
        return
    _profile_class().__init__ = _installed.original_init
    if _installed.in_force:
        from torch_fl import _C

        _C.set_kineto_session_enabled(True)
    _installed = None


def installed_activity() -> ProfilerActivity | None:
    """The activity flagos profiles add, or None when nothing is installed."""
    return _installed.activity if _installed is not None else None


def in_force() -> bool:
    """Whether the installed activity is supported by this torch (so kernel rows come from it and
    core's runtime-event timing is off). False when nothing is installed."""
    return _installed is not None and _decide(_installed)
