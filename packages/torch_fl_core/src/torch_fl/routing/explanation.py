"""Why one overload is served by the backend it is: the text of
``python -m torch_fl.routing explain <op>`` and :func:`torch_fl.routing.explain`."""

from __future__ import annotations

from torch_fl.routing import activation, environment
from torch_fl.routing.route_table import RouteRule, canonical_backend, full_op_name, short_op_name
from torch_fl.routing.validation import Catalog, RuntimeCatalog

__all__ = ["explain", "resolve_name"]


def resolve_name(spelled: str, catalog: Catalog | None = None) -> str:
    """``"aten::mm"`` for ``mm``/``mm.default``/``aten::mm``; raises ValueError for what is no
    aten overload here (naming the overloads the operator has)."""
    catalog = catalog or RuntimeCatalog()
    op = full_op_name(spelled)
    if not catalog.op_exists(op):
        raise ValueError(catalog.describe_unknown_op(op))
    return op


def _where(rule: RouteRule, active: activation.ActiveRoutes) -> str:
    where = rule.where
    if rule.line is None:
        return f"{where} (environment)" if rule.file.startswith("FLAGOS_") else where
    chain = active.table.include_chain(rule.file)
    if chain:
        where += " (included from " + " <- ".join(f"{f}:{n}" for f, n in reversed(chain)) + ")"
    return where


def _choices(rule: RouteRule, catalog: Catalog) -> list[str]:
    lines = [f"    preference list: {rule.written}"]
    passed = dict(rule.skipped_choices)
    reached = False
    for choice in rule.choices:
        if choice in passed:
            lines.append(f"      {choice}: passed over at load: {passed[choice]}")
        elif choice == rule.backend and not reached:
            lines.append(f"      {choice}: chosen (first available)")
            reached = True
        else:
            why = catalog.unavailable(canonical_backend(choice), rule.op)
            state = "available here" if why is None else f"unavailable here: {why}"
            lines.append(f"      {choice}: not reached ({state})")
    return lines


def _rule_lines(rule: RouteRule, active: activation.ActiveRoutes, catalog: Catalog) -> list[str]:
    lines = [f"  {_where(rule, active)}: {rule}"]
    if rule.choices:
        lines.extend(_choices(rule, catalog))
    return lines


def _unrouted(op: str, catalog: Catalog) -> str:
    import torch

    has = torch._C._dispatch_has_kernel_for_dispatch_key
    if op in catalog.core_native_ops():
        return "served natively by core (allocation, copies, views ...); it cannot be routed"
    if catalog.is_composite_implicit(op):
        return (
            "CompositeImplicitAutograd: it decomposes into other operators on every device, each "
            "routed on its own"
        )
    if has(op, "PrivateUse1"):
        return "a flagos kernel registered outside the route table serves it"
    for key in ("CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional"):
        if has(op, key):
            return (
                f"PyTorch's {key} kernel runs on flagos and calls other operators (each routed on "
                f"its own)"
            )
    return "the CPU fallback serves it (copy the inputs to the CPU, compute, copy back)"


def explain(spelled: str, catalog: Catalog | None = None) -> str:
    """A report on the route of one overload in this process (scoped overrides included)."""
    catalog = catalog or RuntimeCatalog()
    op = resolve_name(spelled, catalog)
    short = short_op_name(op)
    active = activation.active_table()
    lines = [f"{op} ({short})"]
    if active is None:
        lines.append("  no route table is loaded (the router is not active in this process)")
        return "\n".join(lines) + "\n"
    lines.append(f"  table: {active.path or 'none'} ({active.source})")
    route = activation.effective_routes().get(op)
    scoped = [r for rules in activation.scoped_overrides() for r in rules if r.op == op]
    if route is None:
        lines.append(f"  route: none; {_unrouted(op, catalog)}")
    else:
        served = route.backend
        if route.dtype_rules:
            by = "; ".join(f"{','.join(d)} -> {b}" for d, b in route.dtype_rules)
            served += f" (by first tensor dtype: {by}; other dtypes -> {route.backend})"
        lines.append(f"  route: {served}")
    live, replaced = active.rules_for(op)
    if live:
        lines.append("decided by (later statements win; dtype rules after the plain rule):")
        for rule in live:
            lines.extend(_rule_lines(rule, active, catalog))
    if scoped:
        lines.append("scoped overrides active now (torch_fl.routing.override, innermost last):")
        for rule in scoped:
            lines.extend(_rule_lines(rule, active, catalog))
    if replaced:
        lines.append("replaced by a later statement:")
        for rule in replaced:
            lines.append(f"  {_where(rule, active)}: {rule}")
    if op in active.forced_kept:
        lines.append(
            f"{environment.FORCE_VAR}={active.forced} left it alone: that backend has no kernel"
        )
    skipped = [(r, why) for r, why in active.skipped if r.op == op]
    for rule, why in skipped:
        lines.append(f"skipped at load (generated table): {_where(rule, active)}: {rule}: {why}")
    return "\n".join(lines) + "\n"
