"""The ``flaggems`` backend on DCU: FlagGems' Triton kernels on FlagTree's ``hcu`` backend.

Same mechanism as the cuda vendor's (core's Python backend; FlagGems is imported lazily, at the
first call a route sends to it): its hygon vendor declares ``device_name="cuda"``, so FlagGems
runs on CUDA-typed alias views of flagos memory (``torch.ops.torch_fl.alias_as``) and its results
join flagos without a copy (``torch.ops.torch_fl.adopt``). Registered only where it can run: a
Triton with the ``hcu`` backend (FlagTree) and ``flag_gems`` importable; ``FLAGOS_FLAGGEMS=0``
turns it off. ``GEMS_VENDOR=hygon`` is set automatically (it also selects FlagGems' hygon kernels;
DTK's own Triton carries no backend metadata, which is why ``hcu`` must come from FlagTree).

The small pieces shared in spirit with torch_fl_cuda.flaggems are repeated here on purpose:
vendors never import each other.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["BACKEND", "claimed_overloads", "hcu_triton", "register_backend", "status"]

BACKEND = "flaggems"
GEMS_VENDOR = "hygon"
_ENV_SWITCH = "FLAGOS_FLAGGEMS"

_lock = threading.Lock()
_table: dict[str, Callable[..., Any]] | None = None
_status = "not registered yet"


def status() -> str:
    return _status


def hcu_triton() -> tuple[bool, str]:
    """Whether FlagGems can run on DCU here, and why (or why not); imports nothing."""
    if importlib.util.find_spec("triton") is None:
        return False, "no Triton is installed (install FlagTree's hcu wheel)"
    try:
        names = {ep.name for ep in importlib.metadata.entry_points(group="triton.backends")}
    except Exception as exc:  # broken metadata: say so rather than guess
        return False, f"cannot read Triton's backend entry points: {exc}"
    if "hcu" not in names:
        return False, (
            f"the installed Triton has no 'hcu' backend (backends: {', '.join(sorted(names)) or 'none'}); "
            "install FlagTree's hcu build"
        )
    if importlib.util.find_spec("flag_gems") is None:
        return False, "flag_gems is not installed"
    return True, "Triton hcu backend and flag_gems importable"


def _prepare_environment() -> None:
    os.environ.setdefault("GEMS_VENDOR", GEMS_VENDOR)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    os.environ.setdefault("FLAGGEMS_CACHE_DIR", str(Path(base) / "torch_fl" / "flaggems"))


def claimed_overloads() -> list[str]:
    """Overload names of FlagGems' ``_FULL_CONFIG``, read from its source without importing it."""
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
            return sorted(
                {
                    str(item.elts[0].value)
                    for item in node.value.elts
                    if isinstance(item, ast.Tuple)
                    and item.elts
                    and isinstance(item.elts[0], ast.Constant)
                }
            )
    return []


def _kernels() -> dict[str, Callable[..., Any]]:
    global _table
    with _lock:
        if _table is None:
            _prepare_environment()
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


class _LazyKernel:
    __slots__ = ("name", "fn")

    def __init__(self, name: str) -> None:
        self.name, self.fn = name, None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.fn is None:
            try:
                fn = _kernels().get(self.name)
            except Exception as exc:
                raise RuntimeError(
                    f"flagos: the route for {self.name} chose backend 'flaggems' (vendor 'dcu'), "
                    f"but FlagGems failed to import: {type(exc).__name__}: {exc}"
                ) from exc
            if fn is None:
                raise RuntimeError(
                    f"flagos: the route for {self.name} chose backend 'flaggems' (vendor 'dcu'), "
                    f"but FlagGems has no enabled kernel for it on this DCU; regenerate "
                    f"routes/dcu-flaggems.conf or set FLAGOS_OP_{self.name.replace('.', '__')}=box:cuda"
                )
            self.fn = fn
        return self.fn(*args, **kwargs)


def _to_cuda_view(t):  # type: ignore[no-untyped-def]
    import torch

    return torch.ops.torch_fl.alias_as(t, torch.device("cuda")) if t.device.type == "flagos" else t


def _from_cuda(result, device):  # type: ignore[no-untyped-def]
    import torch

    return result if result.device.type == "flagos" else torch.ops.torch_fl.adopt(result, device)


def register_backend() -> bool:
    """Registers ``flaggems`` where it can run on DCU; returns whether it did."""
    global _status
    if os.environ.get(_ENV_SWITCH, "1") == "0":
        _status = f"off: {_ENV_SWITCH}=0"
        return False
    ok, why = hcu_triton()
    if not ok:
        _status = f"off: {why}"
        return False
    _prepare_environment()  # GEMS_VENDOR=hygon before anything imports flag_gems
    from torch_fl.routing import register_python_backend
    from torch_fl.routing.python_backend import _plan_for

    names = claimed_overloads()
    servable = []
    for name in names:
        try:
            _plan_for(f"aten::{name}")
        except Exception:
            continue  # not an aten overload in this torch, or a view
        servable.append(name)
    register_python_backend(
        BACKEND,
        {n: _LazyKernel(n) for n in servable},
        to_views=_to_cuda_view,
        from_views=_from_cuda,
    )
    _status = f"on: {len(servable)} of the {len(names)} overloads FlagGems claims can be routed"
    return True
