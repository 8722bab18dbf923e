"""Route tables: parsing ``<vendor>.conf`` files (docs/routing.md is the user documentation).

Grammar, one statement per line::

    # a comment (also after a statement)
    include other.conf                  # relative to the including file's directory
    abs = box:cpu                       # op (default overload) = backend
    add.Tensor = flaggems               # op.overload = backend
    mm = flaggems, gcu, cpu             # preference list: the first available backend wins
    mul.out[int64, float64] = cpu       # only when the first tensor argument has these dtypes
    derive box:cpu                      # op = box:cpu for every overload the installed torch's
                                        # CPU kernels serve (torch_fl.routing.derived)
    derive box:cuda except composite-implicit
    foo.out = flaggems  when torch >= 2.12       # only on these torch minors
    bar = cpu  when torch >= 2.10, < 2.12
    # generated-for: torch 2.13         # pragma of generated tables (see validation)
    # flaggems-measured: flag_gems git:3c6f7537d on Enflame S60, torch 2.10
                                        # pragma: the file's flaggems choices were measured on
                                        # that FlagGems (see torch_fl.routing.provenance)

Statements apply in order and the later one wins: a plain rule replaces every earlier rule of the
same overload (plain and dtype-qualified); a dtype rule overrides the earlier rules for its dtypes
only. Includes are expanded in place, so a line after ``include`` overrides the included file.

A preference list ``a, b, c`` is resolved once, when the table is validated: the first backend
available in this process (registered, with a kernel for the overload) becomes the rule's backend,
and the choices passed over are recorded with why (``RouteRule.skipped_choices``). After that a
list rule is an ordinary rule, so "later wins" treats it exactly like a single-backend one.

A ``derive`` statement expands in place, when the table is read, into the rules it stands for
(each names the statement's file and line), so lines after it override them. A rule qualified
``when torch <ranges>`` applies on the torch minors the comma-separated ranges (``>= 2.12``,
``< 2.14``, ``== 2.11``) all admit, and is recorded in ``RouteTable.skipped`` elsewhere: a table
states where its measured decisions differ between minors instead of holding one table per minor.

Parsing checks syntax, dtype names and include files; :mod:`torch_fl.routing.validation` checks
operators and backends against the dispatcher and the router. Every error is a
:class:`RouteTableError` whose message starts with ``path:line:``; loading a table reports the
problems of both steps together (see :func:`torch_fl.routing.load_routes`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = [
    "GENERATED_PRAGMA",
    "MEASURED_PRAGMA",
    "FlagGemsMeasured",
    "ResolvedRoute",
    "RouteRule",
    "RouteTable",
    "RouteTableError",
    "BACKEND_ALIASES",
    "canonical_backend",
    "canonical_dtype",
    "parse_backends",
    "full_op_name",
    "parse_file",
    "parse_text",
    "short_op_name",
    "torch_admits",
]

GENERATED_PRAGMA = "generated-for"
MEASURED_PRAGMA = "flaggems-measured"
_MAX_SHOWN = 25

_OP_RE = re.compile(
    r"^(?:(?P<ns>[A-Za-z_][A-Za-z0-9_]*)::)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"(?:\.(?P<overload>[A-Za-z_][A-Za-z0-9_]*))?$"
)
_RULE_RE = re.compile(
    r"^(?P<op>[^\s\[=]+)\s*(?:\[(?P<dtypes>[^\]]*)\])?\s*=\s*(?P<backend>[^=]*?)\s*$"
)
_BACKEND_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*(?::[A-Za-z0-9_\-]+)?$")
_PRAGMA_RE = re.compile(r"^#\s*generated-for:\s*torch\s+(?P<version>\d+\.\d+)\s*$")
# flag_gems <spec> [on <device>][, torch X.Y]; <spec> is a version (5.0.2), a release series
# (5.4.x) or a git revision (git:3c6f7537d).
_MEASURED_RE = re.compile(
    r"^#\s*flaggems-measured:\s*(?P<rest>.*?)\s*$",
)
_MEASURED_BODY_RE = re.compile(
    r"^flag_gems\s+(?P<spec>git:[0-9a-fA-F]{7,40}|\d+(?:\.\d+)*(?:\.x)?)"
    r"(?:\s+on\s+(?P<device>[^,]+?))?(?:\s*,\s*torch\s+(?P<torch>\d+\.\d+))?$"
)


class RouteTableError(ValueError):
    """A route table (or a ``FLAGOS_OP_*`` override) that cannot be loaded.

    ``str(error)`` is one line per problem, each ``path:line: message`` (``NAME: message`` for an
    environment variable). ``problems`` holds the (path, line, message) triples.
    """

    def __init__(self, path: str | Path | None, line: int | None, message: str) -> None:
        self.problems: list[tuple[str, int | None, str]] = [
            (str(path) if path is not None else "<routes>", line, message)
        ]
        super().__init__(self._format())

    @classmethod
    def merge(
        cls, errors: Sequence[RouteTableError], files: Sequence[str | Path] | None = None
    ) -> RouteTableError:
        """One error listing the problems of ``errors``; with ``files`` (a table's files in the
        order they were read), sorted by file and line, problems elsewhere (the environment)
        last in their order."""
        problems = [p for e in errors for p in e.problems]
        if files is not None:
            order = {str(f): i for i, f in enumerate(files)}
            problems.sort(key=lambda p: (order.get(p[0], len(order)), p[1] or 0))
        merged = cls(*problems[0])
        merged.problems = problems
        merged.args = (merged._format(),)
        return merged

    @property
    def path(self) -> str:
        return self.problems[0][0]

    @property
    def line(self) -> int | None:
        return self.problems[0][1]

    @property
    def message(self) -> str:
        return self.problems[0][2]

    def _format(self) -> str:
        lines = [
            f"{path}:{line}: {message}" if line is not None else f"{path}: {message}"
            for path, line, message in self.problems[:_MAX_SHOWN]
        ]
        if len(self.problems) > _MAX_SHOWN:
            lines.append(f"... and {len(self.problems) - _MAX_SHOWN} more problems")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self._format()


#: Spellings accepted for a backend, and the backend they name. ``cuda`` is CUDA's in-process
#: kernels on alias views (``box:cuda``); ``flagos_python`` is the Python backend torch-fl ships
#: (``flaggems``, the FlagGems kernels).
BACKEND_ALIASES = {"none": "cpu", "cuda": "box:cuda", "flagos_python": "flaggems"}


def canonical_backend(name: str) -> str:
    """The backend a spelling names (:data:`BACKEND_ALIASES`); every other name is itself."""
    return BACKEND_ALIASES.get(name, name)


def parse_backends(text: str) -> tuple[str, ...]:
    """``("flaggems", "gcu", "cpu")`` for ``"flaggems, gcu, cpu"``, ``("cpu",)`` for ``"cpu"``.

    Raises ValueError for an empty item or what is not a backend name."""
    names = tuple(n.strip() for n in text.split(","))
    if len(names) == 1 and not names[0]:
        raise ValueError("no backend")
    for name in names:
        if not name:
            raise ValueError(f"empty backend in the preference list {text.strip()!r}")
        if not _BACKEND_RE.match(name):
            raise ValueError(f"{name!r} is not a backend name")
    return names


def canonical_dtype(name: str) -> str | None:
    """``"int64"`` for ``"int64"``/``"long"``/``"torch.int64"``; None if ``name`` is no dtype."""
    import torch

    attr = name.strip().removeprefix("torch.")
    dtype = getattr(torch, attr, None) if attr and not attr.startswith("_") else None
    if not isinstance(dtype, torch.dtype):
        return None
    return str(dtype).removeprefix("torch.")


def full_op_name(spelled: str) -> str:
    """``"aten::add.Tensor"`` for ``"add.Tensor"``, ``"aten::abs"`` for ``"abs"``/``"abs.default"``.

    Raises ValueError for what is not an operator name or names another namespace (the router
    routes ``aten`` operators only).
    """
    m = _OP_RE.match(spelled.strip())
    if not m:
        raise ValueError(f"{spelled!r} is not an operator name (expected op or op.overload)")
    ns = m.group("ns") or "aten"
    if ns != "aten":
        raise ValueError(f"{spelled!r}: only aten operators can be routed, not {ns}::")
    overload = m.group("overload") or ""
    if overload == "default":
        overload = ""
    return f"aten::{m.group('name')}" + (f".{overload}" if overload else "")


def short_op_name(full: str) -> str:
    """The spelling of tables and logs: ``"add.Tensor"`` for ``"aten::add.Tensor"``."""
    return full.removeprefix("aten::")


@dataclasses.dataclass(frozen=True)
class FlagGemsMeasured:
    """A ``# flaggems-measured:`` pragma: the FlagGems its file's ``flaggems`` choices were
    measured on (``spec``: ``"5.0.2"``, ``"5.4.x"`` or ``"git:3c6f7537d"``), where, and on which
    torch minor."""

    spec: str
    device: str = ""
    torch: str = ""
    line: int | None = None

    def __str__(self) -> str:
        where = f" on {self.device}" if self.device else ""
        torch_ = f", torch {self.torch}" if self.torch else ""
        return f"flag_gems {self.spec}{where}{torch_}"


@dataclasses.dataclass(frozen=True)
class RouteRule:
    """One statement ``op[dtypes] = backend`` (or ``= a, b, c``) and where it came from."""

    #: Full operator name: ``"aten::add.Tensor"``, ``"aten::abs"`` (default overload).
    op: str
    #: Backend as written (``none`` kept as written; see :attr:`backend_name`). For a preference
    #: list: its first choice when parsed, the chosen one once validated.
    backend: str
    #: Canonical dtype names (``"int64"``); empty for a plain rule.
    dtypes: tuple[str, ...] = ()
    #: The file (or ``FLAGOS_OP_<op>``) and 1-based line (None for the environment).
    file: str = "<routes>"
    line: int | None = None
    #: The preference list as written (``("flaggems", "gcu", "cpu")``); empty for one backend.
    choices: tuple[str, ...] = ()
    #: Filled by validation for a preference list: the choices before the chosen one, with why
    #: each was unavailable (``("flaggems", "not registered in this process: ...")``).
    skipped_choices: tuple[tuple[str, str], ...] = ()
    #: Choices taken out of the list before resolution, with why (a ``flaggems`` choice whose
    #: measurement does not cover the installed FlagGems: :mod:`torch_fl.routing.provenance`).
    demoted: tuple[tuple[str, str], ...] = ()
    #: Filled by validation for a preference list: the available choices after the chosen one
    #: (canonical names), which a device-graph capture falls to when the chosen one is a Python
    #: backend whose kernel a capture cannot record (:func:`torch_fl.routing.capture_alternates`).
    later_choices: tuple[str, ...] = ()

    @property
    def backend_name(self) -> str:
        return canonical_backend(self.backend)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line is not None else self.file

    def error(self, message: str) -> RouteTableError:
        return RouteTableError(self.file, self.line, message)

    @property
    def written(self) -> str:
        """The right-hand side as written: ``"flaggems, gcu, cpu"`` or ``"cpu"``."""
        return ", ".join(self.choices) if self.choices else self.backend

    def __str__(self) -> str:
        dt = f"[{','.join(self.dtypes)}]" if self.dtypes else ""
        return f"{short_op_name(self.op)}{dt} = {self.written}"


@dataclasses.dataclass(frozen=True)
class ResolvedRoute:
    """What the router installs for one overload: a default backend and dtype rules."""

    op: str
    backend: str
    #: (dtypes, backend) in order; later rules win for the dtypes they name.
    dtype_rules: tuple[tuple[tuple[str, ...], str], ...] = ()
    #: The available choices after ``backend`` in its preference list (empty for one backend).
    later_choices: tuple[str, ...] = ()

    def as_spec(self) -> tuple[str, str, list[tuple[list[str], str]]]:
        """The tuple ``torch_fl._C.router_install`` takes."""
        return (self.op, self.backend, [(list(d), b) for d, b in self.dtype_rules])

    def backend_for(self, dtype: str | None) -> str:
        """The backend serving a call whose first tensor argument has ``dtype``."""
        chosen = self.backend
        for dtypes, backend in self.dtype_rules:
            if dtype in dtypes:
                chosen = backend
        return chosen


@dataclasses.dataclass
class RouteTable:
    """The rules of one table (its includes expanded) in statement order."""

    #: The top-level file, or None for a table with no file (only overrides).
    path: Path | None = None
    rules: list[RouteRule] = dataclasses.field(default_factory=list)
    #: Every file read, the top-level one first.
    files: list[Path] = dataclasses.field(default_factory=list)
    #: File -> torch minor (``"2.13"``) of its ``# generated-for: torch X.Y`` pragma.
    generated_for: dict[str, str] = dataclasses.field(default_factory=dict)
    #: File -> its ``# flaggems-measured:`` pragma.
    flaggems_measured: dict[str, FlagGemsMeasured] = dataclasses.field(default_factory=dict)
    #: Rules skipped when the table was validated (generated tables on another torch minor).
    skipped: list[tuple[RouteRule, str]] = dataclasses.field(default_factory=list)
    #: Included file -> (including file, line) of the ``include`` that first read it.
    included_from: dict[str, tuple[str, int]] = dataclasses.field(default_factory=dict)

    def include_chain(self, file: str) -> list[tuple[str, int]]:
        """The ``include`` statements (file, line) through which ``file`` was read, outermost
        first; empty for the top-level file."""
        chain: list[tuple[str, int]] = []
        while file in self.included_from and len(chain) < 64:
            file, line = self.included_from[file]
            chain.append((file, line))
        return chain[::-1]

    def extend(self, rules: Iterable[RouteRule]) -> None:
        self.rules.extend(rules)

    def resolve(self) -> dict[str, ResolvedRoute]:
        """Apply "later wins": op -> the route installed for it, in first-mention order.

        Raises RouteTableError for an overload with dtype rules but no plain rule before them (the
        other dtypes would have no backend): add ``op = <backend>`` before the dtype rule.
        """
        plain: dict[str, RouteRule] = {}
        dtype_rules: dict[str, list[RouteRule]] = {}
        order: dict[str, None] = {}
        for rule in self.rules:
            order.setdefault(rule.op, None)
            if rule.dtypes:
                dtype_rules.setdefault(rule.op, []).append(rule)
            else:
                plain[rule.op] = rule
                dtype_rules.pop(rule.op, None)  # a later plain rule replaces them all
        out: dict[str, ResolvedRoute] = {}
        errors = []
        for op in order:
            extra = dtype_rules.get(op, [])
            if op not in plain:
                first = extra[0]
                errors.append(
                    first.error(
                        f"{first} has no plain rule '{short_op_name(op)} = <backend>' before it "
                        f"for the other dtypes; add one"
                    )
                )
                continue
            out[op] = ResolvedRoute(
                op,
                plain[op].backend_name,
                tuple((r.dtypes, r.backend_name) for r in extra),
                plain[op].later_choices,
            )
        if errors:
            raise RouteTableError.merge(errors)
        return out

    def specs(self) -> list[tuple[str, str, list[tuple[list[str], str]]]]:
        """The resolved routes as ``torch_fl._C.router_install`` takes them, sorted by op."""
        return [route.as_spec() for _, route in sorted(self.resolve().items())]


def _strip_comment(line: str) -> str:
    return line.split("#", 1)[0].strip()


_WHEN_RE = re.compile(r"^(?P<rule>.*?)\s+when\s+torch\s+(?P<ranges>.*)$")
_RANGE_RE = re.compile(r"^(?P<op>>=|<=|==|!=|>|<)\s*(?P<minor>\d+\.\d+)$")


def _minor_tuple(minor: str) -> tuple[int, int]:
    major, _, rest = minor.partition(".")
    return int(major), int(rest)


def torch_admits(ranges: str, minor: str) -> bool:
    """Whether torch ``minor`` (``"2.13"``) satisfies every range of ``">= 2.12, < 2.14"``.

    Raises ValueError for a malformed range."""
    have = _minor_tuple(minor)
    ok = True
    for part in ranges.split(","):
        m = _RANGE_RE.match(part.strip())
        if not m:
            raise ValueError(
                f"cannot parse the torch range {part.strip()!r}: expected '>= 2.12', '< 2.14', "
                f"'== 2.11' (minor versions)"
            )
        want = _minor_tuple(m.group("minor"))
        ok &= {
            ">=": have >= want,
            "<=": have <= want,
            "==": have == want,
            "!=": have != want,
            ">": have > want,
            "<": have < want,
        }[m.group("op")]
    return ok


def _parse_rule(text: str, path: str, lineno: int) -> RouteRule:
    m = _RULE_RE.match(text)
    # A space inside one backend ("abs = box cpu") is a malformed statement, not a list.
    if not m or any(re.search(r"\S\s+\S", b) for b in m.group("backend").split(",")):
        raise RouteTableError(
            path,
            lineno,
            f"cannot parse {text!r}: expected 'op.overload = backend', "
            f"'op.overload[dtype, ...] = backend' or 'include <file>'",
        )
    try:
        op = full_op_name(m.group("op"))
    except ValueError as exc:
        raise RouteTableError(path, lineno, str(exc)) from None
    if not m.group("backend"):
        raise RouteTableError(path, lineno, f"no backend after '=' for {short_op_name(op)}")
    try:
        names = parse_backends(m.group("backend"))
    except ValueError as exc:
        raise RouteTableError(path, lineno, str(exc)) from None
    backend = names[0]
    choices = names if len(names) > 1 else ()
    dtypes: tuple[str, ...] = ()
    if m.group("dtypes") is not None:
        names = [d.strip() for d in m.group("dtypes").split(",")]
        if not any(names):
            raise RouteTableError(path, lineno, f"empty dtype list in {text!r}")
        canon = []
        for name in names:
            if not name:
                raise RouteTableError(path, lineno, f"empty dtype name in {text!r}")
            dtype = canonical_dtype(name)
            if dtype is None:
                raise RouteTableError(
                    path,
                    lineno,
                    f"unknown dtype {name!r} (use torch dtype names: int64, float32 ...)",
                )
            if dtype not in canon:
                canon.append(dtype)
        dtypes = tuple(canon)
    return RouteRule(op=op, backend=backend, dtypes=dtypes, file=path, line=lineno, choices=choices)


def _parse_into(
    table: RouteTable,
    text: str,
    path: Path,
    stack: list[Path],
    errors: list[RouteTableError],
) -> None:
    shown = str(path)
    for lineno, raw in enumerate(text.splitlines(), start=1):
        pragma = _PRAGMA_RE.match(raw.strip())
        if pragma:
            table.generated_for[shown] = pragma.group("version")
            continue
        measured = _MEASURED_RE.match(raw.strip())
        if measured:
            body = _MEASURED_BODY_RE.match(measured.group("rest"))
            if body is None:
                errors.append(
                    RouteTableError(
                        shown,
                        lineno,
                        f"cannot parse {raw.strip()!r}: expected '# {MEASURED_PRAGMA}: flag_gems "
                        f"<5.0.2 | 5.4.x | git:<revision>> [on <device>][, torch X.Y]'",
                    )
                )
                continue
            table.flaggems_measured[shown] = FlagGemsMeasured(
                body.group("spec"), body.group("device") or "", body.group("torch") or "", lineno
            )
            continue
        line = _strip_comment(raw)
        if not line:
            continue
        words = line.split(None, 1)
        if words[0] == "include":
            target = words[1].strip() if len(words) > 1 else ""
            if not target:
                errors.append(RouteTableError(shown, lineno, "'include' needs a file name"))
                continue
            include = Path(target).expanduser()
            if not include.is_absolute():
                include = path.parent / include
            include = include.resolve()
            if include in stack:
                chain = " -> ".join(str(p) for p in [*stack[stack.index(include) :], include])
                errors.append(RouteTableError(shown, lineno, f"include cycle: {chain}"))
                continue
            try:
                included = _read_table(include)
            except (OSError, UnicodeDecodeError) as exc:
                errors.append(
                    RouteTableError(shown, lineno, f"cannot include {target}: {_why(include, exc)}")
                )
                continue
            if include not in table.files:
                table.files.append(include)
                table.included_from.setdefault(str(include), (shown, lineno))
            _parse_into(table, included, include, [*stack, include], errors)
            continue
        if words[0] == "derive":
            _derive_into(table, words[1] if len(words) > 1 else "", shown, lineno, errors)
            continue
        when = _WHEN_RE.match(line)
        if when:
            line = when.group("rule")
        try:
            rule = _parse_rule(line, shown, lineno)
        except RouteTableError as exc:
            errors.append(exc)
            continue
        if when:
            from torch_fl.routing.validation import torch_minor

            try:
                admitted = torch_admits(when.group("ranges"), torch_minor())
            except ValueError as exc:
                errors.append(RouteTableError(shown, lineno, str(exc)))
                continue
            if not admitted:
                table.skipped.append(
                    (rule, f"for torch {when.group('ranges').strip()}; this is {torch_minor()}")
                )
                continue
        table.rules.append(rule)


def _derive_into(
    table: RouteTable, rest: str, shown: str, lineno: int, errors: list[RouteTableError]
) -> None:
    from torch_fl.routing import derived

    backend, _, clause = rest.strip().partition(" ")
    backend = canonical_backend(backend)
    clause = " ".join(clause.split())
    if backend not in derived.DERIVABLE or clause not in ("", derived.EXCEPT_COMPOSITE_IMPLICIT):
        errors.append(
            RouteTableError(
                shown,
                lineno,
                f"cannot parse 'derive {rest.strip()}': expected 'derive <backend>' or 'derive "
                f"<backend> {derived.EXCEPT_COMPOSITE_IMPLICIT}' with a backend of "
                f"{', '.join(sorted(derived.DERIVABLE))}",
            )
        )
        return
    rules = derived.derived_rules(backend, except_composite_implicit=bool(clause))
    table.rules.extend(
        RouteRule(op=op, backend=b, dtypes=dtypes, file=shown, line=lineno)
        for op, dtypes, b in rules
    )


def _read_table(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


def _why(path: Path, exc: OSError | UnicodeDecodeError) -> str:
    """Why ``path`` could not be read as a table, naming it."""
    if isinstance(exc, UnicodeDecodeError):
        return (
            f"{path} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}); "
            f"a route table is a text file of 'op.overload = backend' lines"
        )
    return str(exc.strerror or exc)


def parse_text(
    text: str,
    path: str | Path = "<string>",
    *,
    problems: list[RouteTableError] | None = None,
) -> RouteTable:
    """Parse table text; includes resolve relative to ``path``'s directory.

    Raises one RouteTableError listing every syntax problem; with ``problems`` given, appends
    them there instead and returns the rules that did parse (so that validation can report its
    own problems with them, all at once)."""
    p = Path(path)
    resolved = p.resolve() if str(path) != "<string>" else p
    table = RouteTable(path=resolved, files=[resolved])
    errors: list[RouteTableError] = []
    _parse_into(table, text, resolved, [resolved], errors)
    if errors:
        if problems is None:
            raise RouteTableError.merge(errors)
        problems.extend(errors)
    return table


def parse_file(path: str | Path, *, problems: list[RouteTableError] | None = None) -> RouteTable:
    """Parse a table file (and its includes). Raises RouteTableError, never OSError or
    UnicodeDecodeError; ``problems``: as for :func:`parse_text` (a file that cannot be read at
    all is raised regardless)."""
    p = Path(path).expanduser().resolve()
    try:
        text = _read_table(p)
    except OSError as exc:
        raise RouteTableError(p, None, f"cannot read route table: {_why(p, exc)}") from None
    except UnicodeDecodeError as exc:
        raise RouteTableError(
            p,
            None,
            f"cannot read route table: not UTF-8 text (byte "
            f"{exc.object[exc.start]:#04x} at offset {exc.start}); a route table is a text file "
            f"of 'op.overload = backend' lines",
        ) from None
    return parse_text(text, p, problems=problems)
