"""Loading the route table when a vendor activates, and what is installed now.

:func:`load_routes` picks the table (``FLAGOS_BACKEND_CONFIG`` if set, else the vendor's
``route_table()``), parses it, applies the ``FLAGOS_OP_*`` overrides, validates everything and
installs the result in the C++ router (``torch_fl._C.router_install``), replacing what was
installed. Nothing is installed when any of it fails: one error lists every problem (syntax,
``FLAGOS_OP_*``, validation), each naming its file and line.

Precedence, lowest first: the table (later statement wins), ``FLAGOS_FORCE_BACKEND``,
``FLAGOS_OP_*``, then the scoped overrides of :func:`override` active now (innermost last).
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

from torch_fl.routing import environment, provenance
from torch_fl.routing.environment import OP_PREFIX
from torch_fl.routing.route_table import (
    ResolvedRoute,
    RouteRule,
    RouteTable,
    RouteTableError,
    canonical_backend,
    parse_backends,
    parse_file,
)
from torch_fl.routing.validation import (
    Catalog,
    RuntimeCatalog,
    resolve_rule,
    valid_backends_text,
    validate,
)

__all__ = [
    "ActiveRoutes",
    "RouteOverride",
    "activate",
    "active_table",
    "effective_routes",
    "load_routes",
    "override",
    "router_available",
    "scoped_overrides",
]


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
    #: op -> installed route (without scoped overrides; see :func:`effective_routes`).
    routes: Mapping[str, ResolvedRoute]
    #: FLAGOS_FORCE_BACKEND as written, and the routed overloads it has no kernel for (kept).
    forced: str | None = None
    forced_kept: tuple[str, ...] = ()

    @property
    def skipped(self) -> list[tuple[RouteRule, str]]:
        return self.table.skipped

    def rules_for(self, op: str) -> tuple[list[RouteRule], list[RouteRule]]:
        """(rules in force for ``op``: its last plain rule then the dtype rules after it, rules
        that a later statement replaced), in statement order."""
        mine = [r for r in self.table.rules if r.op == op]
        last_plain = max((i for i, r in enumerate(mine) if not r.dtypes), default=None)
        if last_plain is None:
            return [], mine
        return mine[last_plain:], mine[:last_plain]

    def preference_rules(self) -> list[RouteRule]:
        """The rules written as preference lists that are in force, in statement order."""
        live = {id(r) for op in self.routes for r in self.rules_for(op)[0]}
        return [r for r in self.table.rules if r.choices and id(r) in live]

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
        prefs = self.preference_rules()
        if prefs:
            won: dict[str, int] = {}
            passed: dict[tuple[str, str], int] = {}
            for rule in prefs:
                won[rule.backend_name] = won.get(rule.backend_name, 0) + 1
                for choice, why in rule.skipped_choices:
                    passed[(choice, why)] = passed.get((choice, why), 0) + 1
            lines.append(
                f"  {len(prefs)} preference lists resolved: "
                + ", ".join(f"{b} {n}" for b, n in sorted(won.items()))
            )
            for (choice, why), n in sorted(passed.items(), key=lambda kv: (-kv[1], kv[0])):
                lines.append(f"    {choice} passed over for {n}: {why}")
        if self.forced:
            kept = f" ({len(self.forced_kept)} kept: no kernel)" if self.forced_kept else ""
            lines.append(f"  forced to {self.forced} by {environment.FORCE_VAR}{kept}")
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
        forced = None
        try:
            forced = environment.force_backend(env)
        except RouteTableError as exc:
            problems.append(exc)
        catalog = catalog or RuntimeCatalog()
        if forced is not None:
            forced_name = canonical_backend(forced)
            if forced_name not in catalog.backends():
                where = f"{environment.FORCE_VAR}={forced}"
                if catalog.is_possible_backend(forced_name):  # absent here, not misspelled
                    why = (
                        f"backend {forced!r} is not available: "
                        f"{catalog.why_unregistered(forced_name)} (valid backends here: "
                        f"{valid_backends_text(catalog)})"
                    )
                else:
                    why = (
                        f"unknown backend {forced!r} (valid backends: "
                        f"{valid_backends_text(catalog)})"
                    )
                problems.append(RouteTableError(where, None, why))
        table.extend(overrides)
        # Before validation, so that a demoted list resolves to its next choice like any other.
        provenance.demote_unmeasured(table, environ=env)
        validate(table, catalog, problems=problems)
        if table.skipped and flags.any:
            rule, why = table.skipped[0]
            sys.stderr.write(
                f"[flagos] skipped {len(table.skipped)} routes of generated tables that this "
                f"torch cannot route (first: {rule.where}: {why}); python -m torch_fl counts them\n"
            )
            sys.stderr.flush()
        kept: list[str] = []
        if forced is not None:
            # Forced rules go between the table's and FLAGOS_OP_*'s, so that explain() shows them.
            n_env = sum(1 for r in table.rules if r.line is None and r.file.startswith(OP_PREFIX))
            split = len(table.rules) - n_env
            own, env_rules = table.rules[:split], table.rules[split:]
            where = f"{environment.FORCE_VAR}={forced}"
            forced_rules = []
            for op in sorted(table.resolve()):
                if catalog.has_kernel(canonical_backend(forced), op):
                    forced_rules.append(RouteRule(op=op, backend=forced, file=where, line=None))
                else:
                    kept.append(op)
            table.rules = [*own, *forced_rules, *env_rules]
        routes = table.resolve()
        _active = ActiveRoutes(
            table_path,
            source,
            table,
            tuple(overrides),
            dict(routes),
            forced=forced,
            forced_kept=tuple(kept),
        )
        _install_locked()
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


# ---- scoped overrides ------------------------------------------------------------------------
#
# The router is process-wide (one table, read without a lock on every call), so an override is
# process-wide too, like torch.backends flags: a thread-local one would need a per-call
# thread-local lookup in the router's hot path. Entering and leaving are serialized by _lock, and
# the installed routes are always recomputed from the loaded table plus the overrides active now,
# so threads entering and leaving in any order never leave a stale route behind.

_scoped: list[tuple[int, tuple[RouteRule, ...]]] = []
_tokens = itertools.count(1)


def scoped_overrides() -> list[tuple[RouteRule, ...]]:
    """The rules of the overrides active now, outermost first."""
    with _lock:
        return [rules for _, rules in _scoped]


def _apply(routes: dict[str, ResolvedRoute], rules: Iterable[RouteRule]) -> None:
    for rule in rules:
        if not rule.dtypes:
            routes[rule.op] = ResolvedRoute(
                rule.op, rule.backend_name, later_choices=rule.later_choices
            )
            continue
        base = routes[rule.op]  # checked when the override was made
        routes[rule.op] = ResolvedRoute(
            rule.op,
            base.backend,
            (*base.dtype_rules, (rule.dtypes, rule.backend_name)),
            base.later_choices,
        )


def effective_routes() -> dict[str, ResolvedRoute]:
    """op -> the route installed now: the loaded table's, with the scoped overrides applied."""
    with _lock:
        routes = dict(_active.routes) if _active is not None else {}
        for _, rules in _scoped:
            _apply(routes, rules)
        return routes


def _install_locked() -> None:
    from torch_fl import _C

    routes = effective_routes()
    _C.router_install([routes[op].as_spec() for op in sorted(routes)])
    _C.router_capture_alternates(capture_alternates(routes))


def capture_alternates(routes: Mapping[str, ResolvedRoute]) -> dict[str, str]:
    """op -> the backend a device-graph capture runs it on when its route's backend is a Python
    backend that a capture cannot record for it (a draw from a generator, host views): the first
    later choice of its preference list that is not a Python backend and not ``cpu`` (the CPU
    fallback never captures). ``"flaggems, ascend, cpu"`` captures on ``ascend``."""
    from torch_fl.routing.python_backend import python_backends

    python = set(python_backends())
    out: dict[str, str] = {}
    for op, route in routes.items():
        if route.backend not in python:
            continue
        for choice in route.later_choices:
            if choice not in python and choice != "cpu":
                out[op] = choice
                break
    return out


class RouteOverride:
    """The context manager :func:`override` returns; reusable, reentrant, one entry per
    ``with``."""

    def __init__(self, rules: tuple[RouteRule, ...]) -> None:
        self.rules = rules
        self._entered: list[int] = []

    def __enter__(self) -> RouteOverride:
        token = next(_tokens)
        with _lock:
            for rule in self.rules:
                if rule.dtypes and rule.op not in effective_routes():
                    plain = any(r.op == rule.op and not r.dtypes for r in self.rules)
                    if not plain:
                        raise rule.error(
                            f"{rule} overrides dtypes of an overload no route covers; give "
                            f"'{rule.op.removeprefix('aten::')}' a plain backend too"
                        )
            _scoped.append((token, self.rules))
            self._entered.append(token)
            try:
                _install_locked()
            except BaseException:
                _scoped.remove((token, self.rules))
                self._entered.remove(token)
                raise
        return self

    def __exit__(self, *exc: object) -> None:
        with _lock:
            token = self._entered.pop()
            for i, (t, _) in enumerate(_scoped):
                if t == token:
                    del _scoped[i]
                    break
            _install_locked()


def _backends_text(value: object) -> str | None:
    """``value`` of an override() entry as a table spells it, or None if it names no backends."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)) or not isinstance(value, Iterable):
        return None
    names = list(value)
    if not all(isinstance(n, str) for n in names):
        return None
    return ", ".join(names)


def override(routes: Mapping[str, str | Iterable[str]]) -> RouteOverride:
    """A context manager routing overloads elsewhere for its block, process-wide::

        with torch_fl.routing.override({"mm": "cpu", "mul.out[int64]": "cpu"}):
            ...

    Keys are spelled as in tables (``mm``, ``aten::mm.out``, ``mul.out[int64]``); values are a
    backend, a preference list (``"flaggems, cpu"`` or a sequence). Validated now like table rules
    (RouteTableError naming the caller's file and line). Overrides nest (the innermost wins) and
    are undone on exit, exceptions included; they apply on top of FLAGOS_OP_* and survive a
    :func:`load_routes`.
    """
    from torch_fl.routing.route_table import _parse_rule

    caller = sys._getframe(1)
    where = f"override() at {caller.f_code.co_filename}:{caller.f_lineno}"
    catalog = RuntimeCatalog()
    rules: list[RouteRule] = []
    errors: list[RouteTableError] = []
    for key, value in routes.items():
        text = _backends_text(value)
        if text is None:
            errors.append(
                RouteTableError(
                    where,
                    None,
                    f"{key!r}: {value!r} is not a backend: use a backend name ('cpu'), a "
                    f"preference list ('flaggems, cpu') or a sequence of names "
                    f"(['flaggems', 'cpu'])",
                )
            )
            continue
        try:
            parse_backends(text)
            rule = _parse_rule(f"{key} = {text}", where, 0)
        except (RouteTableError, ValueError) as exc:
            message = exc.message if isinstance(exc, RouteTableError) else str(exc)
            errors.append(RouteTableError(where, None, f"{key!r}: {message}"))
            continue
        rule = dataclasses.replace(rule, line=None)
        resolved, problem = resolve_rule(rule, catalog)
        if problem is not None:
            errors.append(RouteTableError(where, None, problem[1]))
            continue
        assert resolved is not None
        rules.append(resolved)
    if errors:
        raise RouteTableError.merge(errors)
    return RouteOverride(tuple(rules))
