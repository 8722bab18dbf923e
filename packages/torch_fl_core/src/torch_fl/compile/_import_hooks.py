"""Run a function right after a module is first imported (a "post-import hook").

Why: torch-fl registers ``flagos`` with Dynamo and Inductor when ``torch_fl`` is imported, but
``import torch`` autoloads ``torch_fl`` before ``torch`` has finished importing, and importing
``torch._dynamo`` / ``torch._inductor`` eagerly would add about a second to every ``import torch``.
So registration is armed at import time and completes the moment Dynamo (or Inductor) is loaded,
before any graph can be traced or compiled. Modules already imported are handled at once.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Callable
from types import ModuleType

__all__ = ["when_imported"]

_lock = threading.RLock()
_pending: dict[str, list[Callable[[ModuleType], None]]] = {}


class _Loader(importlib.abc.Loader):
    """Wraps the real loader; runs the hooks once the module body has executed."""

    def __init__(self, name: str, loader: importlib.abc.Loader) -> None:
        self._name = name
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _fire(self._name, module)

    def __getattr__(self, name: str):  # resource readers and the like
        return getattr(self._loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):  # noqa: ANN001 - importlib protocol
        if fullname not in _pending:
            return None
        # Ask the rest of sys.meta_path, skipping ourselves.
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(fullname, spec.loader)
                return spec
        return None


_finder = _Finder()


def _fire(name: str, module: ModuleType) -> None:
    with _lock:
        hooks = _pending.pop(name, [])
        if not _pending and _finder in sys.meta_path:
            sys.meta_path.remove(_finder)
    for hook in hooks:
        hook(module)


def when_imported(name: str, hook: Callable[[ModuleType], None]) -> None:
    """Call ``hook(module)`` once ``name`` is imported (immediately if it already is)."""
    module = sys.modules.get(name)
    if module is not None and not getattr(
        getattr(module, "__spec__", None), "_initializing", False
    ):
        hook(module)
        return
    with _lock:
        _pending.setdefault(name, []).append(hook)
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)
