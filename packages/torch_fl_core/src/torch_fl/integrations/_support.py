"""What the adapters share: when to act, and how to wrap a library function once."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["IntegrationWarning", "flagos_is_the_accelerator", "wrap_once", "wrapped"]

_MARK = "__torch_fl_integration__"


class IntegrationWarning(UserWarning):
    """An adapter could not be installed, or was configured wrongly."""


def flagos_is_the_accelerator() -> bool:
    """Whether ``flagos`` is this process's accelerator, the only case adapters act in."""
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is None or not accelerator.is_available():
        return False
    current = accelerator.current_accelerator()
    return current is not None and current.type == "flagos"


def wrapped(fn: Any) -> bool:
    return getattr(fn, _MARK, False)


def wrap_once(fn: Callable[..., Any], make: Callable[[Callable[..., Any]], Callable[..., Any]]):
    """``make(fn)`` with ``fn``'s metadata, marked so that a second install keeps the first."""
    if wrapped(fn):
        return fn
    new = functools.wraps(fn)(make(fn))
    setattr(new, _MARK, True)
    return new
