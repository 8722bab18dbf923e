"""Routing: which backend serves each ATen overload on ``flagos`` (docs/routing.md).

- :mod:`~torch_fl.routing.route_table`: the table grammar (``op.overload[dtypes] = backend``,
  ``include``, ``#`` comments, later wins) and :class:`RouteTableError` (``path:line: message``);
- :mod:`~torch_fl.routing.validation`: checks against the dispatcher and the router at load time;
- :mod:`~torch_fl.routing.environment`: ``FLAGOS_BACKEND_CONFIG``, ``FLAGOS_OP_<op>``, ``FLAGOS_LOG``;
- :mod:`~torch_fl.routing.python_backend`: backends whose kernels are Python callables;
- :mod:`~torch_fl.routing.library_backend`: backends whose kernels are a vendor's C++ operators;
- :mod:`~torch_fl.routing.activation`: loading and installing the table when a vendor activates;
- :mod:`~torch_fl.routing.explanation`: why an overload is served where it is
  (``python -m torch_fl.routing explain mm``);
- :mod:`~torch_fl.routing.bisect`: the overloads whose route changes a workload's result
  (``python -m torch_fl.routing bisect -- script.py``; scripts publish with :func:`bisect_report`);
- :mod:`~torch_fl.routing.generate`: the generator of the built-in ``sim`` table.
"""

from __future__ import annotations

from torch_fl.routing.activation import (
    ActiveRoutes,
    RouteOverride,
    active_table,
    effective_routes,
    load_routes,
    override,
    router_available,
)
from torch_fl.routing.bisect import bisect_report
from torch_fl.routing.library_backend import register_library_backend
from torch_fl.routing.python_backend import (
    PythonBackend,
    python_backends,
    register_python_backend,
)
from torch_fl.routing.route_table import (
    ResolvedRoute,
    RouteRule,
    RouteTable,
    RouteTableError,
    parse_file,
    parse_text,
)
from torch_fl.routing.validation import validate

__all__ = [
    "ActiveRoutes",
    "PythonBackend",
    "ResolvedRoute",
    "RouteOverride",
    "RouteRule",
    "RouteTable",
    "RouteTableError",
    "active_table",
    "bisect_report",
    "effective_routes",
    "explain",
    "load_routes",
    "override",
    "parse_file",
    "parse_text",
    "python_backends",
    "register_library_backend",
    "register_python_backend",
    "router_available",
    "validate",
]


def explain(op: str) -> str:
    """Why ``op`` (``mm``, ``mm.default``, ``aten::mm.out``) is served by its backend here: the
    winning rule and its file:line, its preference list, dtype rules, scoped overrides."""
    from torch_fl.routing.explanation import explain as _explain

    return _explain(op)
