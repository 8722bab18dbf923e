"""The routing environment variables (names users know from the platform docs; keep them).

``FLAGOS_BACKEND_CONFIG=<file>``
    Load this route table instead of the vendor's.
``FLAGOS_OP_<op>=<backend>``
    Route one overload to a backend, on top of the table; ``.`` is written ``__``:
    ``FLAGOS_OP_abs`` is ``abs`` (the default overload), ``FLAGOS_OP_sum__dim_IntList`` is
    ``sum.dim_IntList``. Works for any overload, whether the table names it or not. An empty value
    is ignored.
``FLAGOS_LOG=dispatch,fallback``
    ``dispatch`` prints ``[flagos dispatch] <op> -> <backend>`` once per (op, backend) pair,
    ``fallback`` prints ``[flagos fallback] <op> -> cpu`` for every call served by the CPU
    fallback; either prints ``[flagos] loading backend config from <path>`` once per process.
    ``all`` means both. Separators: commas or spaces.
"""

from __future__ import annotations

import dataclasses
import os
import re
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path

from torch_fl.routing.route_table import RouteRule, RouteTableError, full_op_name

__all__ = [
    "CONFIG_VAR",
    "LOG_VAR",
    "OP_PREFIX",
    "LogFlags",
    "config_override",
    "log_flags",
    "op_from_variable",
    "op_overrides",
]

CONFIG_VAR = "FLAGOS_BACKEND_CONFIG"
OP_PREFIX = "FLAGOS_OP_"
LOG_VAR = "FLAGOS_LOG"
LOG_CATEGORIES = ("dispatch", "fallback")
# Categories read by other parts of torch_fl (dist: torch_fl.distributed.log); known, so not warned.
OTHER_LOG_CATEGORIES = ("dist",)

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclasses.dataclass(frozen=True)
class LogFlags:
    dispatch: bool = False
    fallback: bool = False

    @property
    def any(self) -> bool:
        return self.dispatch or self.fallback


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def log_flags(environ: Mapping[str, str] | None = None) -> LogFlags:
    """FLAGOS_LOG parsed; unknown categories are ignored with a warning."""
    value = _env(environ).get(LOG_VAR, "")
    chosen: set[str] = set()
    for token in re.split(r"[,\s]+", value.strip().lower()):
        if not token:
            continue
        if token == "all":
            chosen.update(LOG_CATEGORIES)
        elif token in LOG_CATEGORIES:
            chosen.add(token)
        elif token in OTHER_LOG_CATEGORIES:
            continue
        else:
            warnings.warn(
                f"{LOG_VAR}={value}: unknown category {token!r} ignored "
                f"(known: {', '.join(LOG_CATEGORIES + OTHER_LOG_CATEGORIES)}, all)",
                stacklevel=2,
            )
    return LogFlags(dispatch="dispatch" in chosen, fallback="fallback" in chosen)


def config_override(environ: Mapping[str, str] | None = None) -> Path | None:
    """The file FLAGOS_BACKEND_CONFIG names, or None when it is unset or empty."""
    value = _env(environ).get(CONFIG_VAR, "").strip()
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.exists() or path.is_dir():
        raise RouteTableError(
            f"{CONFIG_VAR}={value}", None, "no such file (it must name a route table)"
        )
    return path.resolve()


def op_from_variable(suffix: str, exists: Callable[[str], bool] | None = None) -> str:
    """The full operator name a ``FLAGOS_OP_<suffix>`` variable names.

    Every way of reading one ``__`` as the ``.`` is tried (operator names may contain ``__``
    themselves, e.g. ``__and__.Tensor`` is ``FLAGOS_OP___and____Tensor``); the reading that names
    an existing overload wins. Raises ValueError when none or several do.
    """
    if exists is None:
        from torch_fl.routing.validation import op_exists as exists
    candidates: list[str] = []
    if _NAME_RE.match(suffix):
        candidates.append(suffix)
    start = suffix.find("__")
    while start != -1:
        name, overload = suffix[:start], suffix[start + 2 :]
        if _NAME_RE.match(name) and _NAME_RE.match(overload):
            candidates.append(f"{name}.{overload}")
        start = suffix.find("__", start + 1)
    if not candidates:
        raise ValueError(f"{suffix!r} is not an operator name ('.' is written '__')")
    full = list(dict.fromkeys(full_op_name(c) for c in candidates))
    found = [op for op in full if exists(op)]
    if len(found) == 1:
        return found[0]
    if found:
        readings = ", ".join(op.removeprefix("aten::") for op in found)
        raise ValueError(f"ambiguous: it reads as {readings}")
    from torch_fl.routing.validation import describe_unknown_op

    # Report the most natural reading: the last '__' as the '.', else the whole name.
    return_op = full[-1]
    raise ValueError(describe_unknown_op(return_op) + " ('.' is written '__')")


def op_overrides(
    environ: Mapping[str, str] | None = None,
    exists: Callable[[str], bool] | None = None,
    *,
    problems: list[RouteTableError] | None = None,
) -> list[RouteRule]:
    """The FLAGOS_OP_* variables as rules (sorted by variable name), applied after the table.

    Raises one RouteTableError for every variable naming no operator; with ``problems`` given,
    appends them there instead and returns the rules of the others."""
    env = _env(environ)
    rules: list[RouteRule] = []
    errors: list[RouteTableError] = []
    for var in sorted(k for k in env if k.startswith(OP_PREFIX)):
        backend = env[var].strip()
        if not backend:
            continue
        where = f"{var}={env[var]}"
        try:
            op = op_from_variable(var[len(OP_PREFIX) :], exists)
        except ValueError as exc:
            errors.append(RouteTableError(where, None, str(exc)))
            continue
        rules.append(RouteRule(op=op, backend=backend, file=where, line=None))
    if errors:
        if problems is None:
            raise RouteTableError.merge(errors)
        problems.extend(errors)
    return rules
