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
``FLAGOS_FORCE_BACKEND=<backend>``
    Route every overload the table routes to this backend (those it has no kernel for keep
    their route); ``FLAGOS_OP_*`` still apply on top.
``FLAGOS_FALLBACK_BUDGET=<fraction>``
    At exit, fail the process when more than this share of routed calls ran on the CPU fallback.

:data:`KNOWN_VARIABLES` lists every ``FLAGOS_*`` name core reads, and each installed vendor lists
its own ``FLAGOS_<NAME>_*`` family in ``Vendor.environment`` (:func:`vendor_variables`): any other
(a misspelling) warns once at import with the closest known name.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from torch_fl.routing.route_table import RouteRule, RouteTableError, full_op_name, parse_backends

__all__ = [
    "BUDGET_VAR",
    "CONFIG_VAR",
    "FORCE_VAR",
    "KNOWN_VARIABLES",
    "LOG_VAR",
    "OP_PREFIX",
    "LogFlags",
    "VariableError",
    "config_override",
    "fallback_budget",
    "force_backend",
    "log_flags",
    "op_from_variable",
    "op_overrides",
    "unknown_variables",
    "vendor_variables",
    "warn_unknown_variables",
]

CONFIG_VAR = "FLAGOS_BACKEND_CONFIG"
OP_PREFIX = "FLAGOS_OP_"
LOG_VAR = "FLAGOS_LOG"
FORCE_VAR = "FLAGOS_FORCE_BACKEND"
BUDGET_VAR = "FLAGOS_FALLBACK_BUDGET"

#: Every FLAGOS_* variable read by core, tests and tools (docs/environment.md), besides the
#: FLAGOS_OP_<op> family and the vendors' own (:func:`vendor_variables`).
KNOWN_VARIABLES = (
    "FLAGOS_VENDOR",
    CONFIG_VAR,
    LOG_VAR,
    FORCE_VAR,
    BUDGET_VAR,
    "FLAGOS_FLAGGEMS",
    "FLAGOS_FLAGGEMS_UNMEASURED",
    "FLAGOS_DIST_TIER",
    "FLAGOS_DIST_CHECK_SHAPES",
    "FLAGOS_DISABLE_INTEGRATIONS",
    "FLAGOS_SIM_DEVICES",
    "FLAGOS_SIM_MEMORY",
    "FLAGOS_SIM_FAULTS",
    "FLAGOS_SIM_COMM_TIMEOUT",
)
#: Prefixes of variable families: FLAGOS_OP_<op>, and FLAGOS_TEST_* of the test suites.
KNOWN_PREFIXES = (OP_PREFIX, "FLAGOS_TEST_")
# Attribute of the torch module (it outlives re-imports of torch_fl): names already warned about.
_WARNED_ATTR = "_torch_fl_warned_variables"
LOG_CATEGORIES = ("dispatch", "fallback")
# Categories read by other parts of torch_fl (dist: torch_fl.distributed.log); known, so not warned.
OTHER_LOG_CATEGORIES = ("dist",)

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class VariableError(ValueError):
    """A FLAGOS_* variable with a value torch-fl cannot use (a configuration mistake: uncaught,
    it prints as its message, ``NAME=value: what is expected``)."""


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
        try:
            names = parse_backends(backend)
        except ValueError as exc:
            errors.append(RouteTableError(where, None, str(exc)))
            continue
        choices = names if len(names) > 1 else ()
        rules.append(RouteRule(op=op, backend=names[0], file=where, line=None, choices=choices))
    if errors:
        if problems is None:
            raise RouteTableError.merge(errors)
        problems.extend(errors)
    return rules


def force_backend(environ: Mapping[str, str] | None = None) -> str | None:
    """The backend FLAGOS_FORCE_BACKEND names (as written), or None when unset or empty."""
    value = _env(environ).get(FORCE_VAR, "").strip()
    if not value:
        return None
    try:
        names = parse_backends(value)
    except ValueError as exc:
        raise RouteTableError(f"{FORCE_VAR}={value}", None, str(exc)) from None
    if len(names) > 1:
        raise RouteTableError(
            f"{FORCE_VAR}={value}", None, "names one backend (use FLAGOS_OP_<op> for lists)"
        )
    return names[0]


def fallback_budget(environ: Mapping[str, str] | None = None) -> float | None:
    """FLAGOS_FALLBACK_BUDGET as a fraction in [0, 1] (``0.05`` or ``5%``); None when unset.

    Raises VariableError naming the variable for anything else."""
    raw = _env(environ).get(BUDGET_VAR, "")
    value = raw.strip()
    if not value:
        return None
    try:
        budget = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        budget = float("nan")
    if not 0.0 <= budget <= 1.0:  # also NaN
        raise VariableError(
            f"{BUDGET_VAR}={raw}: expected the largest share of calls the CPU fallback may "
            f"serve, a number from 0 to 1 (0.05) or a percentage (5%)"
        )
    return budget


def vendor_variables() -> tuple[str, ...]:
    """The ``FLAGOS_*`` variables the installed vendors read (``Vendor.environment``). A vendor
    package that fails to load contributes none; choosing the vendor reports that failure."""
    from torch_fl.vendors import discovery

    try:
        found = discovery.installed()
    except Exception:  # two packages of one vendor: discovery.select() raises it
        return ()
    names: list[str] = []
    for item in found.values():
        names.extend(getattr(item.vendor, "environment", None) or ())
    return tuple(dict.fromkeys(names))


def unknown_variables(
    environ: Mapping[str, str] | None = None, vendor_known: Sequence[str] | None = None
) -> list[tuple[str, str | None]]:
    """(name, closest known name or None) for every FLAGOS_* variable torch-fl does not read.

    ``vendor_known``: the vendors' variables (default: :func:`vendor_variables`, read only when
    some ``FLAGOS_*`` variable is neither core's nor of a family)."""
    out: list[tuple[str, str | None]] = []
    candidates = [
        name
        for name in sorted(_env(environ))
        if name.startswith("FLAGOS_")
        and name not in KNOWN_VARIABLES
        and not name.startswith(KNOWN_PREFIXES)
    ]
    if not candidates:
        return out
    if vendor_known is None:
        vendor_known = vendor_variables()
    known = [*KNOWN_VARIABLES, *vendor_known]
    for name in candidates:
        if name in vendor_known:
            continue
        close = difflib.get_close_matches(name, [*known, OP_PREFIX], n=1, cutoff=0.6)
        out.append((name, close[0] if close else None))
    return out


def warn_unknown_variables(environ: Mapping[str, str] | None = None) -> None:
    """Warn once per process and name about each unknown FLAGOS_* variable."""
    import torch

    warned: set[str] = getattr(torch, _WARNED_ATTR, None) or set()
    for name, close in unknown_variables(environ):
        if name in warned:
            continue
        warned.add(name)
        hint = f"did you mean {close}? " if close else ""
        _warn_at_user(f"{name} is not a variable torch-fl reads ({hint}known: docs/environment.md)")
    setattr(torch, _WARNED_ATTR, warned)


def _warn_at_user(message: str) -> None:
    """A UserWarning attributed to the first frame outside torch-fl, torch and the import system
    (the user's ``import torch``): a fixed stacklevel would print a line of torch-fl's source,
    since the import reaches here through torch's backend autoload or ``import torch_fl``."""
    import sys

    import torch

    packages = (Path(__file__).resolve().parents[1], Path(torch.__file__).resolve().parent)
    ours = tuple(f"{p}{os.sep}" for p in packages)
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        module = str(frame.f_globals.get("__name__", ""))
        internal = filename.startswith("<frozen ") or module.split(".")[0] == "importlib"
        if not internal and not str(Path(filename).resolve()).startswith(ours):
            break
        frame = frame.f_back
    if frame is None:  # nothing outside: attribute it to the process, without a source line
        warnings.warn_explicit(message, UserWarning, "sys", 1, module="sys", registry={})
        return
    globs = frame.f_globals
    warnings.warn_explicit(
        message,
        UserWarning,
        frame.f_code.co_filename,
        frame.f_lineno,
        module=globs.get("__name__", "<unknown>"),
        registry=globs.setdefault("__warningregistry__", {}),
    )
