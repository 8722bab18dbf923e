"""Validating a parsed route table against this process's dispatcher and router.

Each rule is checked when the table loads, never at the first call:

1. the operator overload exists in the dispatcher (``torch._C._dispatch_find_schema_or_throw``,
   present on every torch this package supports);
2. core does not serve it natively (``torch_fl._C.core_native_ops()``: allocation, copies, views,
   ``resize_``, ``set_`` ...); routing it would replace core's own kernel;
3. it is not a CompositeImplicitAutograd operator without a kernel of its own (``linear``,
   ``dropout``): those decompose into other operators on every device, and a flagos kernel for
   them would bypass the autograd of what they decompose into. Route the operators they call;
4. the backend is known (``torch_fl._C.router_backends()``, plus ``none``);
5. the backend has a kernel for that overload (``torch_fl._C.backend_has_kernel``).

A file carrying the pragma ``# generated-for: torch X.Y`` is a generated table: its generator's
``--check`` (run by the test suite on the torch minor it names) is what keeps it exact, and the
loader is tolerant of it so that ``import torch`` keeps working on other torch minors and while a
table awaits regeneration: a rule of that file failing 1, 2, 3 or 5 (all of which depend on the
torch and core the table was generated against) is skipped and recorded in
``RouteTable.skipped`` (``torch_fl.info()`` counts and lists them; ``FLAGOS_LOG`` announces them)
instead of failing. An unknown backend is always an error, and so is any problem in a file without
the pragma (a hand-written table that includes a generated one stays strict for its own lines) and
in every ``FLAGOS_OP_*`` override.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Iterable, Sequence

import torch

from torch_fl.routing.route_table import (
    RouteRule,
    RouteTable,
    RouteTableError,
    canonical_backend,
    short_op_name,
)

__all__ = ["Catalog", "RuntimeCatalog", "torch_minor", "validate", "validate_rule"]


def torch_minor(version: str | None = None) -> str:
    """``"2.13"`` for ``"2.13.0+cpu"`` (the running torch when ``version`` is None)."""
    v = version or torch.__version__
    parts = v.split("+", 1)[0].split(".")
    return ".".join(parts[:2])


def _split(op: str) -> tuple[str, str]:
    name, _, overload = op.partition(".")
    return name, overload


@functools.lru_cache(maxsize=4096)
def op_exists(op: str) -> bool:
    """Whether the dispatcher knows ``op`` (full name, ``"aten::add.Tensor"``)."""
    name, overload = _split(op)
    try:
        torch._C._dispatch_find_schema_or_throw(name, overload)
    except RuntimeError:
        return False
    return True


def _all_aten_ops() -> list[str]:
    return sorted(n for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::"))


def describe_unknown_op(op: str, known: Iterable[str] | None = None) -> str:
    """'unknown operator ... (did you mean ...)' with the closest names or the overloads."""
    names = list(known) if known is not None else _all_aten_ops()
    name, overload = _split(op)
    overloads = sorted(short_op_name(n) for n in names if n == name or n.startswith(f"{name}."))
    if overloads:
        return (
            f"unknown overload {short_op_name(op)!r}: {short_op_name(name)} has "
            f"{', '.join(overloads)}"
        )
    shorts = sorted({short_op_name(n) for n in names})
    close = difflib.get_close_matches(short_op_name(op), shorts, n=3, cutoff=0.75)
    hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
    return f"unknown operator {short_op_name(op)!r}{hint}"


class Catalog:
    """What validation asks about operators and backends. Tests substitute a fake."""

    def op_exists(self, op: str) -> bool:
        return op_exists(op)

    def describe_unknown_op(self, op: str) -> str:
        return describe_unknown_op(op)

    def is_composite_implicit(self, op: str) -> bool:
        """CompositeImplicitAutograd and no CPU kernel of its own: it only decomposes."""
        has = torch._C._dispatch_has_kernel_for_dispatch_key
        return has(op, "CompositeImplicitAutograd") and not has(op, "CPU")

    def core_native_ops(self) -> frozenset[str]:
        raise NotImplementedError

    def backends(self) -> list[str]:
        """Canonical backend names (``none`` is implied as the alias of ``cpu``)."""
        raise NotImplementedError

    def has_kernel(self, backend: str, op: str) -> bool:
        raise NotImplementedError


class RuntimeCatalog(Catalog):
    """The catalog of this process: torch's dispatcher and ``torch_fl._C``'s router."""

    def __init__(self) -> None:
        from torch_fl import _C

        self._C = _C
        self._native: frozenset[str] | None = None

    def core_native_ops(self) -> frozenset[str]:
        if self._native is None:
            self._native = frozenset(
                n if "::" in n else f"aten::{n}" for n in self._C.core_native_ops()
            )
        return self._native

    def backends(self) -> list[str]:
        return sorted(canonical_backend(b) for b in self._C.router_backends())

    def has_kernel(self, backend: str, op: str) -> bool:
        return bool(self._C.backend_has_kernel(backend, op))


def valid_backends_text(catalog: Catalog) -> str:
    names = sorted({*catalog.backends(), "none"})
    return ", ".join(names)


def validate_rule(rule: RouteRule, catalog: Catalog) -> tuple[str, str] | None:
    """None if ``rule`` is valid, else (kind, message); kind "backend" is never tolerated."""
    op = rule.op
    short = short_op_name(op)
    if not catalog.op_exists(op):
        return "op", catalog.describe_unknown_op(op)
    if op in catalog.core_native_ops():
        return "op", f"{short} is served natively by core and cannot be routed"
    if catalog.is_composite_implicit(op):
        return "op", (
            f"{short} is CompositeImplicitAutograd: it decomposes into other operators on every "
            f"device and has no kernel to route (a flagos kernel would bypass their autograd); "
            f"route the operators it calls instead"
        )
    backend = canonical_backend(rule.backend)
    known = catalog.backends()
    if backend not in known:
        return "backend", (
            f"unknown backend {rule.backend!r} for {short} "
            f"(valid backends: {valid_backends_text(catalog)})"
        )
    if not catalog.has_kernel(backend, op):
        return "op", f"backend {rule.backend!r} has no kernel for {short}"
    return None


def validate(
    table: RouteTable,
    catalog: Catalog | None = None,
    *,
    problems: Sequence[RouteTableError] = (),
) -> RouteTable:
    """Check every rule (see the module docstring); raise one RouteTableError listing them all.

    ``problems``: errors found before (syntax errors of the table, bad ``FLAGOS_OP_*``
    variables), reported in the same error, sorted by file and line. Rules of generated files that
    this process cannot route are moved from ``table.rules`` to ``table.skipped`` as (rule,
    reason). Returns ``table``.
    """
    catalog = catalog or RuntimeCatalog()
    errors: list[RouteTableError] = list(problems)
    kept: list[RouteRule] = []
    skipped: list[tuple[RouteRule, str]] = []
    for rule in table.rules:
        problem = validate_rule(rule, catalog)
        if problem is None:
            kept.append(rule)
            continue
        kind, message = problem
        if kind != "backend" and rule.file in table.generated_for:
            skipped.append((rule, message))
            continue
        errors.append(rule.error(message))
    if errors:
        try:  # dtype rules without a plain rule, among the rules that are otherwise valid
            RouteTable(rules=kept).resolve()
        except RouteTableError as exc:
            errors.append(exc)
        raise RouteTableError.merge(errors, files=table.files)
    table.rules = kept
    table.skipped.extend(skipped)
    table.resolve()  # dtype rules without a plain rule
    return table
