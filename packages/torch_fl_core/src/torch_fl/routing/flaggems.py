"""The ``flaggems`` backend: FlagGems' Triton kernels on flagos memory (core mechanism).

The mechanism is core's; a vendor enables it with its specifics
(``GEMS_VENDOR``, the device type FlagGems' kernels expect, whether its Triton can run here)::

    from torch_fl.routing import flaggems

    flaggems.register(vendor="cuda", gems_vendor="nvidia", view_device="cuda")

What it does:

- Kernel names come from FlagGems' ``_FULL_CONFIG`` read from the package *source*, so
  ``import torch`` does not import FlagGems (which imports Triton: seconds) and route tables naming
  ``flaggems`` are still validated when they load. FlagGems is imported at the first call a route
  sends to it; entries whose condition is false are left out then.
- Kernels are the ``_FULL_CONFIG`` callables (on Hopper some entries are Hopper-specific ops), called
  through core's Python-backend trampoline. With ``view_device`` set, tensor arguments are alias
  views typed as that device (core's ``alias_as``, made in C++ per call): on a vendor whose runtime mirrors
  CUDA, FlagGems' device checks pass and its launches go to the CUDA current stream, which is the
  flagos current stream; results it allocates come from the same pool and join flagos without a
  copy (core's ``adopt``).
- ``GEMS_VENDOR`` is set (FlagGems otherwise probes every vendor it knows) and FlagGems' tuning
  cache goes under the user's cache dir (``FLAGGEMS_CACHE_DIR``), unless the user set them.
- ``flag_gems.enable()``/``use_gems()`` are never called: they register FlagGems on a dispatch key
  for every tensor of that device in the process, and rebuild ~430 registrations per use.
- ``FLAGOS_FLAGGEMS=0`` turns the backend off.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "BACKEND",
    "ENV_SWITCH",
    "claimed_overloads",
    "kernel_table",
    "register",
    "status",
    "triton_backend",
]

BACKEND = "flaggems"
ENV_SWITCH = "FLAGOS_FLAGGEMS"

_lock = threading.Lock()
_table: dict[str, Callable[..., Any]] | None = None
_status = "not registered"


def status() -> str:
    """Why the backend is (or is not) registered: ``"on: ..."`` or ``"off: <reason>"``."""
    return _status


def _prepare_environment(gems_vendor: str) -> None:
    os.environ.setdefault("GEMS_VENDOR", gems_vendor)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    os.environ.setdefault("FLAGGEMS_CACHE_DIR", str(Path(base) / "torch_fl" / "flaggems"))


def triton_backend(names: tuple[str, ...], label: str) -> tuple[bool, str]:
    """(available, why): the installed Triton lists one of ``names`` among its backends (it is
    imported to ask) and FlagGems is importable. ``label`` names the backend in the reason when
    none is there (``"'enflame'"``, ``"Ascend"``). A vendor's precondition for :func:`register`."""
    if importlib.util.find_spec("triton") is None:
        return False, "no Triton is installed"
    try:
        triton = importlib.import_module("triton")
        backends = set(getattr(getattr(triton, "backends", None), "backends", {}) or {})
    except Exception as exc:  # a broken Triton is as good as none, and says why
        return False, f"importing triton failed ({type(exc).__name__}: {exc})"
    found = [b for b in names if b in backends]
    if not found:
        listed = ", ".join(sorted(backends)) or "none"
        return False, f"the installed Triton has no {label} backend (backends: {listed})"
    if importlib.util.find_spec("flag_gems") is None:
        return False, f"Triton has the {found[0]!r} backend but FlagGems is not installed"
    return True, f"Triton with the {found[0]!r} backend and FlagGems are importable"


def claimed_overloads() -> list[str]:
    """The overload names FlagGems' ``_FULL_CONFIG`` lists, read from its source (not imported)."""
    spec = importlib.util.find_spec("flag_gems")
    if spec is None or spec.origin is None:
        return []
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "_FULL_CONFIG" for t in node.targets)
            and isinstance(node.value, ast.Tuple)
        ):
            names = {
                str(item.elts[0].value)
                for item in node.value.elts
                if isinstance(item, ast.Tuple)
                and item.elts
                and isinstance(item.elts[0], ast.Constant)
            }
            return sorted(names)
    return []


def kernel_table() -> dict[str, Callable[..., Any]]:
    """Imports FlagGems (once) and returns overload name -> callable from ``_FULL_CONFIG``, without
    the entries whose condition is false."""
    global _table
    with _lock:
        if _table is None:
            import flag_gems

            found: dict[str, Callable[..., Any]] = {}
            for entry in flag_gems._FULL_CONFIG:
                if len(entry) < 2:
                    continue
                cond = entry[2] if len(entry) > 2 else None
                if cond is not None and not (cond() if callable(cond) else cond):
                    continue
                found[entry[0]] = entry[1]
            _table = found
        return _table


class LazyKernel:
    """The FlagGems callable for one overload, resolved (importing FlagGems) on its first call."""

    __slots__ = ("name", "vendor", "fn")

    def __init__(self, name: str, vendor: str) -> None:
        self.name = name
        self.vendor = vendor
        self.fn: Callable[..., Any] | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return (self.fn or self.resolve())(*args, **kwargs)

    def resolve(self) -> Callable[..., Any]:
        """The FlagGems callable (importing FlagGems on the first call); the router calls it
        directly from then on (``PythonBackend.direct_call``)."""
        fn = self.fn
        if fn is None:
            where = f"the route for {self.name} chose backend 'flaggems' (vendor {self.vendor!r})"
            try:
                fn = kernel_table().get(self.name)
            except Exception as exc:
                raise RuntimeError(
                    f"flagos: {where}, but FlagGems failed to import: {type(exc).__name__}: {exc}"
                ) from exc
            if fn is None:
                import flag_gems

                raise RuntimeError(
                    f"flagos: {where}, but FlagGems {flag_gems.__version__} has no enabled kernel "
                    f"for it on this device; regenerate the vendor's table or set "
                    f"FLAGOS_OP_{self.name.replace('.', '__')} to another backend"
                )
            self.fn = fn
        return fn


def _servable(names: list[str]) -> list[str]:
    """The names the dispatcher knows that a Python backend may serve (not views)."""
    from torch_fl.routing.python_backend import _plan_for

    out = []
    for name in names:
        try:
            _plan_for(f"aten::{name}")
        except Exception:
            continue  # not an aten overload in this torch, or a view
        out.append(name)
    return out


def register(
    *,
    vendor: str,
    gems_vendor: str,
    view_device: str | None,
    available: tuple[bool, str] = (True, ""),
) -> bool:
    """Registers the ``flaggems`` backend for ``vendor`` if FlagGems can run here; returns whether
    it did (:func:`status` says why not).

    ``available`` is the vendor's own precondition (a Triton with its backend, ...), as
    ``(ok, reason)``; ``view_device`` the device type FlagGems' kernels expect their tensors on
    (None: the flagos tensors themselves).
    """
    global _status
    if os.environ.get(ENV_SWITCH, "1") == "0":
        _status = f"off: {ENV_SWITCH}=0"
        return False
    ok, why = available
    if not ok:
        _status = f"off: {why}"
        return False
    names = claimed_overloads()
    if not names:
        _status = "off: flag_gems is not installed (pip install --no-deps flag-gems)"
        return False
    _prepare_environment(gems_vendor)  # before anything imports flag_gems
    from torch_fl.routing.python_backend import register_python_backend

    servable = _servable(names)
    register_python_backend(
        BACKEND,
        {n: LazyKernel(n, vendor) for n in servable},
        view_device=view_device,
    )
    _status = f"on: {len(servable)} of the {len(names)} overloads FlagGems claims can be routed"
    return True
