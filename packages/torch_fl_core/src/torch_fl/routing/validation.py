"""Validating a parsed route table against this process's dispatcher and router.

Each rule is checked when the table loads, never at the first call:

1. the operator overload exists in the dispatcher (``torch._C._dispatch_find_schema_or_throw``,
   present on every torch this package supports);
2. core does not serve it natively (``torch_fl._C.core_native_ops()``: allocation, copies, views,
   ``resize_``, ``set_`` ...); routing it would replace core's own kernel;
3. it is not a CompositeImplicitAutograd operator without a kernel of its own (``linear``,
   ``dropout``): those decompose into other operators on every device, and a flagos kernel for
   them would bypass the autograd of what they decompose into. Route the operators they call;
4. the backend is registered here (``torch_fl._C.router_backends()``, plus ``none``); one that is
   not is reported as absent, with why, when some vendor or core provides it
   (:func:`possible_backend`: ``flaggems`` without FlagGems, a vendor that is not the active one),
   else as unknown (a misspelling);
5. the backend has a kernel for that overload (``torch_fl._C.backend_has_kernel``).

A preference list (``mm = flaggems, gcu, cpu``) is resolved here, once: checks 1-3 apply to the
rule, then the first choice that passes 4 and 5 becomes its backend; the choices before it are
recorded with why they were passed over (``RouteRule.skipped_choices``). A choice that is not
registered in this process is no error as long as it is a name some vendor or core provides
(:func:`possible_backend`): a table can ship ``flaggems, gcu, cpu`` and load where FlagGems is
absent. A choice no vendor could provide (a misspelling) is an error, and so is a list none of
whose choices is available.

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

import dataclasses
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

__all__ = [
    "Catalog",
    "RuntimeCatalog",
    "describe_absent_backend",
    "possible_backend",
    "resolve_rule",
    "torch_minor",
    "validate",
    "validate_rule",
]

#: The vendors of torch-fl's package table (packages/vendors.toml), whose name is their own
#: backend: a table may name one where its package is not installed (absent, not misspelled).
#: Vendors outside the table are known once installed (:func:`installed_vendor_names`).
# vendor table: begin (tools/vendor_table.py writes these names from packages/vendors.toml)
VENDOR_BACKENDS = ("cuda", "gcu", "dcu", "ascend", "musa")
# vendor table: end
#: Backends that core or a vendor registers somewhere (beyond ``box:<key>``): in a preference
#: list they may be absent from this process without being an error.
KNOWN_BACKENDS = ("cpu", "composite", "flaggems", *VENDOR_BACKENDS)


@functools.lru_cache(maxsize=256)
def _device_type(key: str) -> bool:
    try:
        torch.device(key)
    except (RuntimeError, ValueError):
        return False
    return True


@functools.lru_cache(maxsize=1)
def installed_vendor_names() -> frozenset[str]:
    """The names of the installed vendors (entry points, not loaded), and ``sim``."""
    import importlib.metadata

    from torch_fl.vendors.discovery import ENTRY_POINT_GROUP

    eps = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    return frozenset({"sim", *(ep.name for ep in eps)})


def possible_backend(name: str) -> bool:
    """Whether some vendor or core could provide backend ``name`` (canonical spelling): ``cpu``,
    ``composite``, ``flaggems``, ``box:<device type>``, the names of the package table's vendors
    and of the installed ones."""
    if name in KNOWN_BACKENDS:
        return True
    if name.startswith("box:"):
        return _device_type(name[4:])
    return name in installed_vendor_names()


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

    def is_possible_backend(self, backend: str) -> bool:
        """A name a preference list may hold even when it is not registered here."""
        return backend in self.backends() or possible_backend(backend)

    def why_unregistered(self, backend: str) -> str:
        return "not registered in this process"

    def why_no_kernel(self, backend: str, op: str) -> str:
        return f"backend has no kernel for {short_op_name(op)}"

    def unavailable(self, backend: str, op: str) -> str | None:
        """None when ``backend`` (canonical) can serve ``op`` here, else why not."""
        if backend not in self.backends():
            return self.why_unregistered(backend)
        if not self.has_kernel(backend, op):
            return self.why_no_kernel(backend, op)
        return None


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

    def why_unregistered(self, backend: str) -> str:
        if backend == "flaggems":
            import importlib.util

            from torch_fl.routing import flaggems

            state = flaggems.status()
            if state.startswith("off: "):
                return f"not registered in this process: FlagGems is {state}"
            if importlib.util.find_spec("flag_gems") is None:
                return "not registered in this process: FlagGems is not importable"
            return "not registered in this process: the vendor does not enable FlagGems"
        if backend in installed_vendor_names():
            return f"not registered in this process (vendor {backend!r} is not the active one)"
        if backend in VENDOR_BACKENDS:
            return (
                f"not registered in this process (no vendor package providing {backend!r} is "
                f"installed)"
            )
        if backend.startswith("box:"):
            return (
                f"not registered in this process (the runtime gives no {backend[4:]} views of "
                f"flagos memory)"
            )
        return "not registered in this process"

    def why_no_kernel(self, backend: str, op: str) -> str:
        from torch_fl.routing.library_backend import library_backends

        namespace = library_backends().get(backend)
        if namespace is not None:
            return f"the SDK kernel is absent ({namespace} has no {short_op_name(op)})"
        return super().why_no_kernel(backend, op)


def valid_backends_text(catalog: Catalog) -> str:
    names = sorted({*catalog.backends(), "none"})
    return ", ".join(names)


def describe_absent_backend(backend: str, short: str, catalog: Catalog) -> str:
    """Why the single backend ``backend`` (as written) cannot serve ``short``: a name some vendor
    or core provides is absent here, and says why as a preference list would; any other name is
    unknown (a misspelling)."""
    name = canonical_backend(backend)
    if catalog.is_possible_backend(name):
        return (
            f"backend {backend!r} is not available for {short}: {catalog.why_unregistered(name)} "
            f"(valid backends here: {valid_backends_text(catalog)}; a preference list such as "
            f"'{backend}, cpu' falls back when it is absent)"
        )
    return (
        f"unknown backend {backend!r} for {short} (valid backends: {valid_backends_text(catalog)})"
    )


def _op_problem(rule: RouteRule, catalog: Catalog) -> tuple[str, str] | None:
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
    return None


def validate_rule(rule: RouteRule, catalog: Catalog) -> tuple[str, str] | None:
    """None if ``rule`` (one backend) is valid, else (kind, message); kind "backend" is never
    tolerated."""
    problem = _op_problem(rule, catalog)
    if problem is not None:
        return problem
    op = rule.op
    short = short_op_name(op)
    backend = canonical_backend(rule.backend)
    known = catalog.backends()
    if backend not in known:
        return "backend", describe_absent_backend(rule.backend, short, catalog)
    if not catalog.has_kernel(backend, op):
        return "op", f"backend {rule.backend!r} has no kernel for {short}"
    return None


def resolve_rule(
    rule: RouteRule, catalog: Catalog
) -> tuple[RouteRule | None, tuple[str, str] | None]:
    """(the rule to install, None) or (None, (kind, message)), as :func:`validate_rule`; a
    preference list comes back as a rule of its first available choice."""
    if not rule.choices:
        problem = validate_rule(rule, catalog)
        return (rule, None) if problem is None else (None, problem)
    problem = _op_problem(rule, catalog)
    if problem is not None:
        return None, problem
    short = short_op_name(rule.op)
    for choice in rule.choices:
        if not catalog.is_possible_backend(canonical_backend(choice)):
            return None, (
                "backend",
                f"unknown backend {choice!r} in '{rule.written}' for {short}: no vendor or core "
                f"provides it (valid backends here: {valid_backends_text(catalog)})",
            )
    skipped: list[tuple[str, str]] = list(rule.demoted)
    for i, choice in enumerate(rule.choices):
        why = catalog.unavailable(canonical_backend(choice), rule.op)
        if why is None:
            later = tuple(
                canonical_backend(c)
                for c in rule.choices[i + 1 :]
                if catalog.unavailable(canonical_backend(c), rule.op) is None
            )
            chosen = dataclasses.replace(
                rule, backend=choice, skipped_choices=tuple(skipped), later_choices=later
            )
            return chosen, None
        skipped.append((choice, why))
    # Only a registered backend lacking the kernel depends on the torch a generated table was
    # made for; a list of backends none of which is registered is always an error.
    registered = set(catalog.backends())
    kind = "op" if any(canonical_backend(c) in registered for c, _ in skipped) else "backend"
    reasons = "; ".join(f"{c}: {why}" for c, why in skipped)
    return None, (kind, f"no backend of '{rule.written}' is available for {short} ({reasons})")


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
        resolved, problem = resolve_rule(rule, catalog)
        if problem is None:
            assert resolved is not None
            kept.append(resolved)
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
