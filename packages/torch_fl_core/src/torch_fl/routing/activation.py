"""Loading the route table when a vendor activates, and what is installed now.

:func:`load_routes` picks the table (``FLAGOS_BACKEND_CONFIG`` if set, else the vendor's
``route_table()``), parses it, applies the ``FLAGOS_OP_*`` overrides, validates everything and
installs the result in the C++ router (``torch_fl._C.router_install``), replacing what was
installed. Nothing is installed when any of it fails: one error lists every problem (syntax,
``FLAGOS_OP_*``, validation), each naming its file and line.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from torch_fl.routing import environment
from torch_fl.routing.route_table import (
    ResolvedRoute,
    RouteRule,
    RouteTable,
    RouteTableError,
    parse_file,
)
from torch_fl.routing.validation import Catalog, RuntimeCatalog, validate

__all__ = ["ActiveRoutes", "activate", "active_table", "load_routes", "router_available"]


@dataclasses.dataclass(frozen=True)
class ActiveRoutes:
    """The route table installed in the router, and where it came from."""

    #: The table file, or None when there is none (only FLAGOS_OP_* overrides, or nothing).
    path: Path | None
    #: Why this file: "FLAGOS_BACKEND_CONFIG", "vendor 'sim'", "load_routes(path=...)".
    source: str
    table: RouteTable
    #: The FLAGOS_OP_* overrides applied on top of the table.
    overrides: tuple[RouteRule, ...]
    #: op -> installed route.
    routes: Mapping[str, ResolvedRoute]

    @property
    def skipped(self) -> list[tuple[RouteRule, str]]:
        return self.table.skipped

    def describe(self) -> str:
        """One paragraph for ``torch_fl.info()``."""
        where = str(self.path) if self.path else "no table"
        n_dtype = sum(1 for r in self.routes.values() if r.dtype_rules)
        by_backend: dict[str, int] = {}
        for route in self.routes.values():
            by_backend[route.backend] = by_backend.get(route.backend, 0) + 1
        backends = ", ".join(f"{b} {n}" for b, n in sorted(by_backend.items())) or "none"
        lines = [f"{where} ({self.source})"]
        lines.append(
            f"  {len(self.routes)} overloads routed ({backends})"
            + (f", {n_dtype} with dtype rules" if n_dtype else "")
        )
        if self.table.generated_for:
            versions = sorted(set(self.table.generated_for.values()))
            lines.append(f"  generated for torch {', '.join(versions)}")
        if self.skipped:
            lines.append(
                f"  {len(self.skipped)} rules skipped (generated for another torch minor; "
                f"first: {self.skipped[0][0].where}: {self.skipped[0][1]})"
            )
        for rule in self.overrides:
            lines.append(f"  override {rule.file}")
        return "\n".join(lines)


_lock = threading.RLock()
_active: ActiveRoutes | None = None
# Attribute of the torch module (it outlives re-imports of torch_fl) holding the table paths
# already announced by "[flagos] loading backend config from <path>".
_ANNOUNCED_ATTR = "_torch_fl_announced_route_tables"


_log = environment.LogFlags()


def set_log(flags: environment.LogFlags) -> None:
    """Switch the router's ``FLAGOS_LOG`` output (``dispatch``, ``fallback``) to ``flags``."""
    global _log
    from torch_fl import _C

    _C.set_log(flags.dispatch, flags.fallback)
    _log = flags


def log() -> environment.LogFlags:
    """The router's ``FLAGOS_LOG`` output now (off until a table was loaded)."""
    return _log


def router_available() -> bool:
    """Whether torch_fl._C was built with the router."""
    from torch_fl import _C

    return hasattr(_C, "router_install")


def _announce(path: Path, flags: environment.LogFlags) -> None:
    if not flags.any:
        return
    announced: set[str] = getattr(torch, _ANNOUNCED_ATTR, None) or set()
    if str(path) in announced:
        return
    announced.add(str(path))
    setattr(torch, _ANNOUNCED_ATTR, announced)
    sys.stderr.write(f"[flagos] loading backend config from {path}\n")
    sys.stderr.flush()


def load_routes(
    vendor: Any = None,
    *,
    path: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    catalog: Catalog | None = None,
) -> ActiveRoutes:
    """Load, validate and install a route table; returns what is now installed.

    The table is ``path`` if given, else ``FLAGOS_BACKEND_CONFIG``, else ``vendor.route_table()``
    (``vendor`` defaults to the active vendor). ``FLAGOS_OP_*`` overrides apply on top in every
    case, and ``FLAGOS_LOG`` sets the router's logging. Raises RouteTableError (a ValueError) and
    leaves the installed routes unchanged when anything is invalid.
    """
    global _active
    from torch_fl import _C

    env = environment._env(environ)
    flags = environment.log_flags(env)
    with _lock:
        if path is not None:
            table_path: Path | None = Path(path).expanduser().resolve()
            source = "load_routes(path=...)"
        else:
            table_path = environment.config_override(env)
            source = f"{environment.CONFIG_VAR} is set"
            if table_path is None:
                if vendor is None:
                    from torch_fl import vendors

                    vendor = vendors.active_vendor()
                found = _vendor_table(vendor)
                table_path = Path(found).resolve() if found else None
                source = f"vendor {getattr(vendor, 'name', '?')!r}"
        set_log(flags)
        # Every problem at once: syntax errors, bad FLAGOS_OP_* variables and what validation
        # finds in the rules that did parse, in one RouteTableError.
        problems: list[RouteTableError] = []
        if table_path is not None:
            _announce(table_path, flags)
            try:
                table = parse_file(table_path, problems=problems)
            except RouteTableError as exc:  # unreadable: say which variable named it
                if not source.startswith(environment.CONFIG_VAR):
                    raise
                where, line, message = exc.problems[0]
                named = f"{message} ({environment.CONFIG_VAR} names it)"
                raise RouteTableError(where, line, named) from None
        else:
            table = RouteTable()
        overrides = environment.op_overrides(env, problems=problems)
        table.extend(overrides)
        validate(table, catalog or RuntimeCatalog(), problems=problems)
        if table.skipped and flags.any:
            rule, why = table.skipped[0]
            sys.stderr.write(
                f"[flagos] skipped {len(table.skipped)} routes of generated tables that this "
                f"torch cannot route (first: {rule.where}: {why}); python -m torch_fl counts them\n"
            )
            sys.stderr.flush()
        routes = table.resolve()
        _C.router_install([routes[op].as_spec() for op in sorted(routes)])
        _active = ActiveRoutes(table_path, source, table, tuple(overrides), dict(routes))
        return _active


def _vendor_table(vendor: Any) -> str | Path | None:
    getter = getattr(vendor, "route_table", None)
    if getter is not None:
        return getter()
    legacy = getattr(vendor, "routes", None)  # vendors written before route_table()
    return legacy() if legacy is not None else None


def activate(vendor: Any) -> ActiveRoutes | None:
    """The vendor-activation step: load the routes if this build has a router."""
    if not router_available():
        return None
    return load_routes(vendor)


def active_table() -> ActiveRoutes | None:
    """The route table installed now, or None before one was loaded."""
    return _active
