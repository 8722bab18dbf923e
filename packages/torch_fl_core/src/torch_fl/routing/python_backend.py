"""Backends whose kernels are Python callables (how FlagGems plugs in).

::

    from torch_fl.routing import register_python_backend

    def abs_kernel(self):                     # called like the ATen overload: positional
        return torch.abs(self)                # arguments positionally, kwarg-only ones by name
    def mul_out(self, other, *, out):         # out=/in-place kernels write through `out`
        torch.mul(self, other, out=out)

    register_python_backend(
        "mykernels",
        {"abs": abs_kernel, "mul.out": mul_out},
        to_views=my_views,                     # tensor -> what the kernel library understands
        from_views=None,                       # (result, device) -> flagos tensor
    )

then route to it (``abs = mykernels`` in a table, or ``FLAGOS_OP_abs=mykernels``) and
``torch_fl.routing.load_routes()`` if the routes were loaded before the backend was registered. A
vendor registers its Python backends in ``Vendor.activate()``, which runs before its table loads.

How a call flows: the router hands the trampoline the operator's name and every schema argument,
converted from the dispatcher stack by PyTorch's own converters. The trampoline

1. applies ``to_views`` to every tensor argument, and to every tensor inside list arguments
   (``None`` stays ``None``); CPU tensors (0-dim scalars) go through it too, so return what the
   hook cannot handle unchanged. Without a hook, kernels get the flagos tensors themselves;
2. calls the kernel with the schema's positional arguments positionally and its kwarg-only
   arguments (``out``, ``alpha`` of some overloads ...) by name;
3. converts the results: a return that aliases a mutable argument (``Tensor(a!)``: out=, in-place)
   is the caller's original flagos tensor object. The kernel writes through the view it was given
   and returns that view (or None); if it returns another tensor instead, its value is copied into
   the caller's tensor, which is resized first if the shapes differ (so an out= kernel that cannot
   resize its view may return a fresh result). Every other tensor goes through
   ``from_views(tensor, device)``,
   ``device`` being that of the first flagos argument (else the current flagos device). The default
   returns flagos tensors unchanged and copies anything else there with ``.to(device)``.

With ``view_device`` (core views), steps 1 and 3 are done in C++ and, for operators with at most
one return, core calls the kernel itself as step 2 describes (:meth:`PythonBackend.direct_call`),
without the trampoline.

View operators (returns aliasing an argument without writing it) cannot be served by a Python
backend: their result must share the flagos storage, and core serves them natively.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

import torch

from torch_fl.routing.route_table import full_op_name, short_op_name

__all__ = ["PythonBackend", "python_backends", "register_python_backend"]

ToViews = Callable[[torch.Tensor], Any]
FromViews = Callable[[Any, torch.device], torch.Tensor]

_RESERVED = ("cpu", "none")
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


@dataclasses.dataclass(frozen=True)
class _Plan:
    """How to call one overload's kernel, computed from its schema once."""

    positional: tuple[int, ...]
    keywords: tuple[tuple[str, int], ...]
    #: Per return: the index of the argument it aliases for writing, else None.
    write_alias: tuple[int | None, ...]


def _schema(op: str) -> Any:
    name, _, overload = op.partition(".")
    try:
        return torch._C._get_schema(name, overload)
    except RuntimeError:
        packet = getattr(torch.ops.aten, name.removeprefix("aten::"))
        return getattr(packet, overload or "default")._schema


def _plan_for(op: str) -> _Plan:
    schema = _schema(op)
    positional: list[int] = []
    keywords: list[tuple[str, int]] = []
    for i, arg in enumerate(schema.arguments):
        if arg.kwarg_only:
            keywords.append((arg.name, i))
        else:
            positional.append(i)
    write_alias: list[int | None] = []
    for ret in schema.returns:
        info = ret.alias_info
        if info is None:
            write_alias.append(None)
            continue
        if not info.is_write:
            raise ValueError(
                f"{short_op_name(op)} is a view operator (its result aliases an argument): "
                f"core serves views natively, a Python backend cannot"
            )
        target = None
        for i, arg in enumerate(schema.arguments):
            a = arg.alias_info
            if a is not None and a.is_write and set(a.before_set) == set(info.before_set):
                target = i
                break
        write_alias.append(target)
    return _Plan(tuple(positional), tuple(keywords), tuple(write_alias))


def _is_flagos(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "flagos"


def _first_flagos_device(args: tuple) -> torch.device:
    for a in args:
        if _is_flagos(a):
            return a.device
        if isinstance(a, (list, tuple)):
            for x in a:
                if _is_flagos(x):
                    return x.device
    return torch.device("flagos", torch.flagos.current_device())


def default_from_views(result: Any, device: torch.device) -> Any:
    """Flagos tensors unchanged; other tensors copied to ``device``; anything else unchanged."""
    if isinstance(result, torch.Tensor) and result.device != device:
        return result.to(device)
    return result


class PythonBackend:
    """A named set of Python kernels, called by the router through :meth:`trampoline`."""

    def __init__(
        self,
        name: str,
        kernels: Mapping[str, Callable[..., Any]],
        to_views: ToViews | None = None,
        from_views: FromViews | None = None,
        core_views: bool = False,
    ) -> None:
        if not _NAME_RE.match(name) or name in _RESERVED:
            raise ValueError(
                f"{name!r} cannot name a Python backend (reserved: cpu, none, box:<key>; "
                f"use letters, digits, '_' and '-')"
            )
        self.name = name
        self.kernels: dict[str, Callable[..., Any]] = {}
        for spelled, fn in kernels.items():
            if not callable(fn):
                raise TypeError(f"backend {name!r}: the kernel for {spelled} is not callable")
            self.kernels[full_op_name(spelled)] = fn
        self.to_views = to_views
        self.from_views = from_views or default_from_views
        # Core makes the views and maps results back (register_python_backend(view_device=...)):
        # the trampoline only calls the kernel.
        self.core_views = core_views
        self._plans: dict[str, _Plan] = {}
        self._calls: dict[str, Callable[[tuple], Any]] = {}
        self._lock = threading.Lock()
        for op in self.kernels:
            self._plan(op)  # reject view operators and unknown schemas now

    def __repr__(self) -> str:
        return f"<torch_fl PythonBackend {self.name!r}: {len(self.kernels)} kernels>"

    def has_kernel(self, op: str) -> bool:
        """Whether ``op`` (full name, ``"aten::add.Tensor"``) has a kernel here."""
        return op in self.kernels

    def _plan(self, op: str) -> _Plan:
        plan = self._plans.get(op)
        if plan is None:
            plan = _plan_for(op)
            with self._lock:
                self._plans[op] = plan
        return plan

    def _view(self, value: Any) -> Any:
        hook = self.to_views
        if hook is None:
            return value
        if isinstance(value, torch.Tensor):
            return hook(value)
        if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
            return type(value)(hook(v) if isinstance(v, torch.Tensor) else v for v in value)
        return value

    def _back(self, value: Any, device: torch.device) -> Any:
        if isinstance(value, torch.Tensor):
            return self.from_views(value, device)
        if isinstance(value, (list, tuple)):
            return type(value)(self._back(v, device) for v in value)
        return value

    @staticmethod
    def _written(original: Any, view: Any, value: Any) -> Any:
        """The caller's tensor for an out=/in-place return; a kernel that returned another
        tensor than the view it was given (a fresh result) has its value copied in."""
        if value is None or value is view or value is original:
            return original
        if isinstance(original, torch.Tensor) and isinstance(value, torch.Tensor):
            if original.shape != value.shape:
                original.resize_(value.shape)
            original.copy_(value)
        return original

    def trampoline(self, op_name: str, args: tuple) -> Any:
        """Called by the router (GIL held) with every schema argument in schema order."""
        call = self._calls.get(op_name)
        if call is None:
            call = self._calls[op_name] = self._make_call(op_name)
        return call(args)

    def direct_call(self, op_name: str) -> tuple | None:
        """For core (asked once per operator, with core views): ``(fn, npos, kw_indices,
        kwnames)`` when calling the kernel itself is all the trampoline would do (one return or
        none), so core calls it without the trampoline's frames; else None. A kernel with a
        ``resolve()`` method (FlagGems' lazy kernels) is resolved to its final callable here."""
        if not self.core_views:
            return None
        kernel = self.kernels.get(op_name)
        if kernel is None:
            raise RuntimeError(f"backend {self.name!r} has no kernel for {op_name}")
        plan = self._plan(op_name)
        if len(plan.write_alias) > 1:
            return None
        resolve = getattr(kernel, "resolve", None)
        fn = resolve() if callable(resolve) else kernel
        kw_indices = tuple(i for _, i in plan.keywords)
        kwnames = tuple(n for n, _ in plan.keywords) or None
        return fn, len(plan.positional), kw_indices, kwnames

    def _make_call(self, op_name: str) -> Callable[[tuple], Any]:
        """The per-call work for ``op_name``, decided once from its plan: the kernel called with
        the schema's positional arguments positionally and its kwarg-only ones by name, then the
        returns mapped (module docstring, step 3). With core views the arguments already are
        views and core maps tensors back, so only the None-return rule of out=/in-place remains."""
        kernel = self.kernels.get(op_name)
        if kernel is None:
            raise RuntimeError(f"backend {self.name!r} has no kernel for {op_name}")
        plan = self._plan(op_name)
        if plan.keywords:
            npos, keywords = len(plan.positional), plan.keywords

            def invoke(args: Any) -> Any:
                return kernel(*args[:npos], **{n: args[i] for n, i in keywords})

        else:

            def invoke(args: Any) -> Any:
                return kernel(*args)

        returns = plan.write_alias
        if not self.core_views:
            return lambda args: self._call_with_hooks(op_name, invoke, returns, args)
        if not returns:

            def call_none(args: tuple) -> None:
                invoke(args)

            return call_none
        if returns == (None,):
            return invoke
        if len(returns) == 1:
            alias = returns[0]

            def call_written(args: tuple) -> Any:
                value = invoke(args)
                return args[alias] if value is None else value

            return call_written

        def call_many(args: tuple) -> tuple:
            values = self._returned(op_name, invoke(args), len(returns))
            return tuple(
                args[a] if v is None and a is not None else v
                for v, a in zip(values, returns, strict=True)
            )

        return call_many

    def _returned(self, op_name: str, result: Any, n: int) -> tuple:
        """The kernel's ``n`` return values as a tuple (an error naming the op if not ``n``)."""
        results = (result,) if n == 1 else tuple(result)
        if len(results) != n:
            raise RuntimeError(
                f"backend {self.name!r}: the kernel for {op_name} returned {len(results)} values, "
                f"the operator returns {n}"
            )
        return results

    def _call_with_hooks(
        self,
        op_name: str,
        invoke: Callable[[Any], Any],
        returns: tuple[int | None, ...],
        args: tuple,
    ) -> Any:
        """A call through the ``to_views``/``from_views`` hooks."""
        views = [self._view(a) for a in args]
        result = invoke(views)
        n = len(returns)
        if n == 0:
            return None
        device: torch.device | None = None
        out = []
        for value, alias in zip(self._returned(op_name, result, n), returns, strict=True):
            if alias is not None:
                out.append(self._written(args[alias], views[alias], value))
            else:
                if device is None:
                    device = _first_flagos_device(args)
                out.append(self._back(value, device))
        return out[0] if n == 1 else tuple(out)


_registry: dict[str, PythonBackend] = {}
_registry_lock = threading.Lock()


def register_python_backend(
    name: str,
    kernels: Mapping[str, Callable[..., Any]],
    *,
    to_views: ToViews | None = None,
    from_views: FromViews | None = None,
    view_device: str | None = None,
) -> PythonBackend:
    """Register a Python-kernel backend with the router; returns it.

    ``kernels`` maps overload names as tables spell them (``"abs"``, ``"add.Tensor"``,
    ``"mul.out"``) to callables. Registering a name again replaces the backend for routes
    installed afterwards (call :func:`torch_fl.routing.load_routes`).

    ``view_device`` (``"cuda"``, ``"cpu"``): kernels get alias views of that device type
    (``torch.ops.torch_fl.alias_as``) and their results of that type are adopted back into flagos,
    both done in core without a Python call per tensor; out=/in-place returns stay the caller's
    tensors. It replaces ``to_views``/``from_views``, which remain for other conversions.
    """
    from torch_fl import _C

    if view_device and (to_views or from_views):
        raise ValueError(f"backend {name!r}: view_device replaces to_views/from_views")
    backend = PythonBackend(name, kernels, to_views, from_views, core_views=bool(view_device))
    register = getattr(_C, "register_python_backend", None)
    if register is None:
        raise RuntimeError("torch_fl._C has no router (register_python_backend is missing)")
    with _registry_lock:
        register(
            name,
            backend.trampoline,
            backend.has_kernel,
            view_device=view_device or "",
            direct=backend.direct_call,
        )
        _registry[name] = backend
    return backend


def python_backends() -> dict[str, PythonBackend]:
    """The Python backends registered in this process, by name."""
    with _registry_lock:
        return dict(_registry)
