"""The ``flaggems`` backend: FlagGems' Triton kernels on flagos memory.

Enabled when ``flag_gems`` is importable (``FLAGOS_FLAGGEMS=0`` turns it off). FlagGems is imported
lazily, on the first call a route sends to it, so ``import torch`` stays fast; the backend's kernel
names are known without importing it (its ``_FULL_CONFIG`` names are read from the package source),
so route tables naming ``flaggems`` are validated when they load.

How a call runs: the kernel is the callable FlagGems' ``_FULL_CONFIG`` lists for the overload (on
Hopper some entries are replaced by Hopper-specific ops; the table has them). Its tensor arguments are
CUDA-typed alias views of the flagos memory (``torch.ops.torch_fl.alias_as``), so FlagGems' device
checks (``x.is_cuda``, ``torch.cuda.device(x.device)``) pass and its launches go to the CUDA current
stream, which is the flagos current stream. Results FlagGems allocates come from torch's CUDA caching
allocator, which is the flagos pool, and join flagos without a copy (``torch.ops.torch_fl.adopt``).
RNG kernels read and advance ``torch.cuda.default_generators[i]``, which is the generator behind
``torch.flagos.default_generators[i]``: one Philox stream per device.

``flag_gems.enable()``/``use_gems()`` are never called: they register FlagGems on the CUDA key for
every CUDA tensor in the process, and rebuild ~430 registrations per use.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "BACKEND",
    "claimed_overloads",
    "register_backend",
    "status",
    "table",
]

BACKEND = "flaggems"
_ENV_SWITCH = "FLAGOS_FLAGGEMS"

_lock = threading.Lock()
_table: dict[str, Callable[..., Any]] | None = None
_status = "not registered yet"


def status() -> str:
    """Why the backend is (or is not) registered, for ``python -m torch_fl`` and error messages."""
    return _status


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "torch_fl" / "flaggems"


def _prepare_environment() -> None:
    # FlagGems probes every vendor it knows when GEMS_VENDOR is unset; say it.
    os.environ.setdefault("GEMS_VENDOR", "nvidia")
    # Its tuning cache (a sqlite db) goes under the user's cache dir, not the site-packages tree.
    os.environ.setdefault("FLAGGEMS_CACHE_DIR", str(_cache_dir()))


def claimed_overloads() -> list[str]:
    """The overload names FlagGems' ``_FULL_CONFIG`` lists, read from its source without importing
    it (importing FlagGems imports Triton and compiles nothing, but still costs seconds).

    Entries with a condition are included; the condition is evaluated when the table loads.
    """
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
            names = []
            for item in node.value.elts:
                if (
                    isinstance(item, ast.Tuple)
                    and item.elts
                    and isinstance(item.elts[0], ast.Constant)
                ):
                    names.append(str(item.elts[0].value))
            return sorted(set(names))
    return []


def table() -> dict[str, Callable[..., Any]]:
    """Imports FlagGems (once) and returns overload name -> callable from ``_FULL_CONFIG``, with
    entries whose condition is false left out."""
    global _table
    with _lock:
        if _table is None:
            _prepare_environment()
            import flag_gems

            found: dict[str, Callable[..., Any]] = {}
            for entry in flag_gems._FULL_CONFIG:
                if len(entry) < 2:
                    continue
                name, fn = entry[0], entry[1]
                cond = entry[2] if len(entry) > 2 else None
                if cond is not None and not (cond() if callable(cond) else cond):
                    continue
                found[name] = fn
            _table = found
        return _table


class _LazyKernel:
    """Resolves the FlagGems callable on its first call (importing FlagGems then)."""

    __slots__ = ("name", "fn")

    def __init__(self, name: str) -> None:
        self.name = name
        self.fn: Callable[..., Any] | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fn = self.fn
        if fn is None:
            try:
                fn = table().get(self.name)
            except Exception as exc:
                raise RuntimeError(
                    f"flagos: the route for {self.name} on {torch.flagos.current_device()} chose "
                    f"backend 'flaggems' (vendor 'cuda'), but FlagGems failed to import: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            if fn is None:
                import flag_gems

                raise RuntimeError(
                    f"flagos: the route for {self.name} chose backend 'flaggems' (vendor 'cuda'), "
                    f"but FlagGems {flag_gems.__version__} has no enabled kernel for it on this "
                    f"GPU; regenerate routes/cuda.conf or route it to box:cuda"
                )
            self.fn = fn
        return fn(*args, **kwargs)


_CUDA = torch.device("cuda")


def to_cuda_view(t: torch.Tensor) -> torch.Tensor:
    """A CUDA tensor over a flagos tensor's memory; anything else unchanged."""
    if t.device.type == "flagos":
        return torch.ops.torch_fl.alias_as(t, _CUDA)
    return t


def from_cuda(result: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A FlagGems result as a flagos tensor on ``device`` (zero-copy for CUDA memory)."""
    if result.device.type == "flagos":
        return result
    return torch.ops.torch_fl.adopt(result, device)


def _servable(names: list[str]) -> list[str]:
    """Names the dispatcher knows and a Python backend may serve (not views)."""
    from torch_fl.routing.python_backend import _plan_for

    out = []
    for name in names:
        try:
            _plan_for(f"aten::{name}")
        except Exception:
            continue  # not an aten overload in this torch, or a view
        out.append(name)
    return out


def register_backend() -> bool:
    """Registers the ``flaggems`` backend if FlagGems is installed; returns whether it did."""
    global _status
    if os.environ.get(_ENV_SWITCH, "1") == "0":
        _status = f"off: {_ENV_SWITCH}=0"
        return False
    names = claimed_overloads()
    if not names:
        _status = "off: flag_gems is not installed (pip install --no-deps flag-gems)"
        return False
    from torch_fl.routing import register_python_backend

    servable = _servable(names)
    register_python_backend(
        BACKEND,
        {n: _LazyKernel(n) for n in servable},
        to_views=to_cuda_view,
        from_views=from_cuda,
    )
    _status = f"on: {len(servable)} of the {len(names)} overloads FlagGems claims can be routed"
    return True
