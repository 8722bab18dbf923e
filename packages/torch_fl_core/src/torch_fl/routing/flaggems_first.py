"""FlagGems-first route tables of native vendors: what every such generator shares.

A vendor whose kernels are its own (gcu, ascend) generates its table from checked-in inputs only,
so it is the same wherever it is generated:

- the FlagGems overloads: core's ``torch_fl/routing/flaggems_ops.txt`` (one snapshot of FlagGems'
  ``_FULL_CONFIG`` names for every vendor) plus every overload of the gap set, narrowed to those a route may name (core's
  :func:`torch_fl.routing.generate.flaggems_route_classes`; a factory only where the vendor has a
  kernel for it, since cpu cannot serve it);
- the vendor's gap set, ``routing/gaps.json`` (empty until a gap is measured): per overload the dtypes FlagGems must not serve (``"all"``
  or a list), the family, the reason and the document section it was measured in; its
  ``measured`` becomes the ``# flaggems-measured:`` pragma (:mod:`torch_fl.routing.provenance`);
- the overloads the vendor's kernels serve and those its kernel generator skipped (with why).

:class:`FlagGemsFirst` holds those inputs and the rules every table has (core's DispatchStub
composites routed to cpu whole, core's composite backend for the dtypes CPU lacks, the banner's
common lines); the vendor's generator makes only its own decisions (the per-overload rules) and
calls :func:`main` for the command line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from torch_fl.kit.kernel_ops import ALL_DTYPES
from torch_fl.routing import provenance
from torch_fl.routing.route_table import short_op_name

__all__ = [
    "ALL_DTYPES",
    "FLAGGEMS_OPS",
    "FlagGemsFirst",
    "Rule",
    "ServedTable",
    "checked_in_inputs",
    "load_flaggems_ops",
    "load_gaps",
    "load_measured",
    "main",
    "package_served_table",
    "served_rules",
    "served_table",
    "served_table_main",
]


#: The FlagGems overloads every vendor's generator starts from: the ``_FULL_CONFIG`` names of the
#: FlagGems wheel the tables target, one snapshot for all vendors.
FLAGGEMS_OPS = Path(__file__).resolve().parent / "flaggems_ops.txt"


def load_gaps(path: Path) -> dict[str, dict]:
    """{overload ("abs", "sum.dim_IntList"): {"dtypes", "family", "reason", "source"}}; every
    entry needs a family, a reason and its source (document and section); dtypes default to
    ``"all"``."""
    gaps = json.loads(path.read_text(encoding="utf-8"))["gaps"]
    for op, entry in gaps.items():
        if not entry.get("family") or not entry.get("reason"):
            raise ValueError(f"{path}: gap entry {op!r} needs a family and a reason")
        dtypes = entry.setdefault("dtypes", "all")
        if dtypes != "all" and not (isinstance(dtypes, list) and dtypes):
            raise ValueError(f'{path}: gap entry {op!r}: dtypes is "all" or a list of dtypes')
        source = entry.get("source") or {}
        if not source.get("document") or not source.get("section"):
            raise ValueError(f"{path}: gap entry {op!r} needs source.document and source.section")
    return gaps


def load_measured(path: Path) -> str | None:
    """The ``# flaggems-measured:`` pragma's text from gaps.json's ``measured``, or None."""
    return provenance.measured_pragma(path)


def load_flaggems_ops(path: Path) -> list[str]:
    """The FlagGems overloads of the snapshot (comments and blank lines skipped)."""
    return provenance.read_op_list(path)


def checked_in_inputs(routing_dir: Path) -> dict:
    """The keyword arguments of a vendor generator that come from ``routing_dir``
    (``gaps.json``) and from core (the FlagGems snapshot, torch minor, composites)."""
    from torch_fl.routing.derived import STUB_COMPOSITES, composite_kernels
    from torch_fl.routing.validation import torch_minor

    gaps = routing_dir / "gaps.json"
    return {
        "flaggems_ops": load_flaggems_ops(FLAGGEMS_OPS),
        "flaggems_why": "torch_fl/routing/flaggems_ops.txt and the gap set",
        "gaps": load_gaps(gaps),
        "torch_minor": torch_minor(),
        "stub_composites": STUB_COMPOSITES,
        "composites": composite_kernels(),
        "measured": load_measured(gaps),
    }


@dataclasses.dataclass(frozen=True)
class Rule:
    """One table line: ``op[dtypes] = backends  # why`` (no dtypes: the overload's plain rule)."""

    dtypes: tuple[str, ...]
    backends: str
    why: str = ""

    def line(self, op: str) -> str:
        lhs = f"{op}[{', '.join(self.dtypes)}]" if self.dtypes else op
        return f"{lhs} = {self.backends}" + (f"  # {self.why}" if self.why else "")


class FlagGemsFirst:
    """The inputs of one vendor's FlagGems-first table, the shared rules, and its text.

    ``native_ops``: overloads (``aten::abs`` or ``abs``) the vendor's kernels serve;
    ``flaggems_ops``: FlagGems' overloads (the snapshot); ``route_classes``: (overloads a cpu
    route serves, device-argument factories), default core's
    :func:`~torch_fl.routing.generate.flaggems_route_classes`.
    """

    def __init__(
        self,
        *,
        native_ops: Iterable[str],
        flaggems_ops: Iterable[str] | None,
        gaps: Mapping[str, dict],
        route_classes: tuple[Iterable[str], Iterable[str]] | None = None,
    ) -> None:
        if route_classes is None:
            from torch_fl.routing.generate import flaggems_route_classes

            route_classes = flaggems_route_classes()
        self.cpu_ok, self.factories = (frozenset(c) for c in route_classes)
        self.native = frozenset(short_op_name(o) for o in native_ops)
        self.gaps = gaps
        gems = {short_op_name(o) for o in flaggems_ops or ()} | set(gaps)
        #: The FlagGems overloads a route may name.
        self.gems = frozenset(
            op for op in gems if op in self.cpu_ok or (op in self.factories and op in self.native)
        )
        #: overload -> its rules, plain rule first; filled by the vendor, then :meth:`add_core_rules`.
        self.rules: dict[str, list[Rule]] = {}
        self.composites: dict[str, tuple[str, ...]] = {}

    def overloads(self) -> list[str]:
        """Every overload the vendor decides: FlagGems' and its own kernels', sorted."""
        return sorted(self.gems | self.native)

    def whole_gap(self, op: str) -> dict | None:
        """The gap entry taking FlagGems ``op`` off flaggems for every dtype, or None. A factory
        without a native kernel keeps flaggems: nothing else could serve it on the device."""
        entry = self.gaps.get(op) if op in self.gems else None
        if entry is None or entry.get("dtypes", "all") != "all":
            return None
        return None if (op in self.factories and op not in self.native) else entry

    def dtype_gap(self, op: str) -> tuple[str, ...]:
        """The dtypes a gap entry takes off flaggems for FlagGems ``op`` (empty: none)."""
        entry = self.gaps.get(op) if op in self.gems else None
        if entry is None or entry.get("dtypes", "all") == "all":
            return ()
        return tuple(entry["dtypes"])

    def gap_counts(self) -> tuple[int, int]:
        """(gap entries taking their overload off flaggems whole, those taking some dtypes)."""
        whole = sum(1 for op in self.gems if self.whole_gap(op) is not None)
        return whole, sum(1 for op in self.gems if self.dtype_gap(op))

    def add_core_rules(
        self,
        stub_composites: Mapping[str, str] | None,
        composites: Mapping[str, Iterable[str]] | None,
    ) -> None:
        """Core's rules, after the vendor's: composites whose kernel calls a DispatchStub for the
        tensor's device (no flagos entry) are served on the CPU whole; the dtypes CPU's kernel
        lacks go to core's composite backend (after a plain ``cpu`` rule where there is none)."""
        from torch_fl.routing.derived import COMPOSITE

        for op, why in sorted((stub_composites or {}).items()):
            self.rules.setdefault(short_op_name(op), [Rule((), "cpu", f"composite {why}")])
        self.composites = {short_op_name(op): tuple(d) for op, d in (composites or {}).items()}
        for op, dtypes in sorted(self.composites.items()):
            self.rules.setdefault(op, [Rule((), "cpu")]).append(
                Rule(dtypes, COMPOSITE, "CPU's kernel lacks these dtypes")
            )

    def counts(self) -> dict[str, int]:
        """Overloads per first choice of their plain rule (``flaggems``, the vendor's, ``cpu``)."""
        counts: dict[str, int] = {}
        for rules in self.rules.values():
            first = rules[0].backends.split(", ")[0]
            counts[first] = counts.get(first, 0) + 1
        return counts

    def text(
        self,
        *,
        title: str,
        command: str,
        torch_minor: str,
        measured: str | None,
        explanation: Iterable[str],
        skipped_heading: str,
        skipped: Mapping[str, str],
    ) -> str:
        """The table: banner (title, generator, torch minor, pragma, the vendor's explanation,
        the overloads without a native route, core's composites), then every rule, sorted."""
        lines = [
            f"# {title}",
            f"# GENERATED by `{command}` -- do not edit; `--check` in tests.",
            f"# generated-for: torch {torch_minor}",
        ]
        if measured:
            lines.append(f"# flaggems-measured: {measured}")
        lines += [
            *explanation,
            f"# {skipped_heading}: {len(skipped)}",
            *(f"#   {short_op_name(op)}: {why}" for op, why in sorted(skipped.items())),
            "# Dtypes CPU's kernel lacks and CUDA's takes go to core's composite backend: "
            f"{', '.join(sorted(self.composites)) or 'none'}.",
            "# Unlisted overloads keep PyTorch's default on flagos (composite, else the CPU fallback).",
            "",
        ]
        for op in sorted(self.rules):
            lines += [rule.line(op) for rule in self.rules[op]]
        return "\n".join(lines) + "\n"


def served_rules(
    t: FlagGemsFirst, op: str, backend: str, served: tuple[str, ...] | None
) -> list[Rule]:
    """FlagGems first, then the vendor's kernel (``backend``), then cpu; the dtypes the kernel
    does not compute in (``served``: those it does, None: all) and those the gap set excludes
    split off into rules of their own, so those calls never reach a kernel that would decline
    them."""
    whole, gap_dtypes = t.whole_gap(op), t.dtype_gap(op)
    flaggems = op in t.gems and whole is None
    comment = f"gap: {whole['family']}" if whole is not None else ""
    native = op in t.native
    # cpu closes a FlagGems list (and is the target where nothing else serves the op); a
    # native-only overload is the vendor alone, as a table line of one backend.
    tail = ["cpu"] if op not in t.factories and (flaggems or not native) else []
    plain = ", ".join((["flaggems"] if flaggems else []) + ([backend] if native else []) + tail)
    out = [Rule((), plain, comment)]
    if op in t.factories:
        return out
    declined = ()
    if native and op in t.cpu_ok and served is not None:
        declined = tuple(d for d in ALL_DTYPES if d not in served)
    # Per dtype: flaggems unless the gap excludes it, the vendor unless its kernel declines it.
    split: dict[str, list[str]] = {}
    for d in ALL_DTYPES:
        if d not in declined and d not in gap_dtypes:
            continue
        use_gems = flaggems and d not in gap_dtypes
        use_native = native and d not in declined
        backends = ", ".join(
            (["flaggems"] if use_gems else []) + ([backend] if use_native else []) + ["cpu"]
        )
        if backends != plain:
            split.setdefault(backends, []).append(d)
    for backends, ds in sorted(split.items(), key=lambda kv: ALL_DTYPES.index(kv[1][0])):
        why = ""
        if set(ds) & set(gap_dtypes):
            family = t.gaps[op]["family"]
            why = f"gap[{', '.join(d for d in ds if d in gap_dtypes)}]: {family}"
        out.append(Rule(tuple(ds), backends, why))
    return out


@dataclasses.dataclass(frozen=True)
class ServedTable:
    """What a vendor's table built by :func:`served_table` says about the vendor."""

    #: the vendor's backend name ("ascend")
    backend: str
    #: the table's title and the command that writes it
    title: str
    command: str
    #: the kernel library as the explanation names it ("ACLNN"), its ops table's path and the
    #: heading of the overloads without a native route
    kernels: str
    ops_table: str
    skipped_heading: str
    #: where the ``flaggems`` backend is registered, as comment lines
    flaggems_note: tuple[str, ...]


def served_table(
    vendor: ServedTable,
    *,
    native_ops: Mapping[str, str] | Iterable[str],
    dtypes: Mapping[str, Iterable[str]] | None = None,
    skipped: Mapping[str, str],
    flaggems_ops: Iterable[str] | None,
    flaggems_why: str,
    gaps: Mapping[str, dict],
    torch_minor: str,
    stub_composites: Mapping[str, str] | None = None,
    composites: Mapping[str, Iterable[str]] | None = None,
    measured: str | None = None,
    route_classes: tuple[Iterable[str], Iterable[str]] | None = None,
) -> tuple[str, list[str]]:
    """The FlagGems-first table of a vendor whose kernels say which dtypes they serve, and the
    generator's warnings.

    ``native_ops``: overloads (``aten::abs`` or ``abs``) with a vendor kernel; ``dtypes``: per
    overload the dtypes that kernel serves (absent: all). ``skipped``: overloads the kernel
    generator left out, with why. ``composites``: core's composite kernels (overload -> dtypes),
    which take those dtypes of the overload (a plain ``cpu`` rule first where it has no other).
    """
    b = vendor.backend
    t = FlagGemsFirst(
        native_ops=native_ops, flaggems_ops=flaggems_ops, gaps=gaps, route_classes=route_classes
    )
    served = {short_op_name(op): tuple(d) for op, d in (dtypes or {}).items()}
    for op in t.overloads():
        t.rules[op] = served_rules(t, op, b, served.get(op))
    t.add_core_rules(stub_composites, composites)
    counts = t.counts()
    whole, partial = t.gap_counts()
    split_ops = sum(1 for rules in t.rules.values() if len(rules) > 1)
    explanation = [
        "# FlagGems first: each overload FlagGems implements (torch_fl/routing/flaggems_ops.txt and",
        f"# the gap set) is 'flaggems, {b}, cpu' ('flaggems, cpu' where {vendor.kernels} has no kernel);",
        "# the first available at load wins.",
        *vendor.flaggems_note,
        f"# FlagGems overloads from {flaggems_why}.",
        f"# Dtypes an op's {vendor.kernels} kernel does not compute in ({vendor.ops_table}) skip",
        f"# '{b}': 'op[float64, ...] = flaggems, cpu' (or '= cpu').",
        f"# Routes: {counts.get('flaggems', 0)} flaggems-first, {counts.get(b, 0)} {b}, "
        f"{counts.get('cpu', 0)} cpu; {split_ops} split by dtype; of {len(gaps)} gap entries "
        f"{whole} take the overload off flaggems, {partial} only some dtypes.",
    ]
    text = t.text(
        title=vendor.title,
        command=vendor.command,
        torch_minor=torch_minor,
        measured=measured,
        explanation=explanation,
        skipped_heading=vendor.skipped_heading,
        skipped=skipped,
    )
    return text, skipped_warnings(b, skipped)


def package_served_table(vendor: ServedTable, package: str) -> tuple[str, list[str]]:
    """The table (and the generator's warnings) of an installed vendor package: its kernels
    manifest (``<package>.kernels_manifest()``) and its checked-in ``routing/`` inputs."""
    import importlib

    pkg = importlib.import_module(package)
    manifest = pkg.kernels_manifest()
    return served_table(
        vendor,
        native_ops=manifest.get("generated", {}),
        dtypes=manifest.get("dtypes", {}),
        skipped=manifest.get("skipped", {}),
        **checked_in_inputs(Path(pkg.__file__).resolve().parent / "routing"),
    )


def served_table_main(vendor: ServedTable, package: str, argv: Iterable[str] | None = None) -> int:
    """The command line of a vendor's served-table generator (``python -m
    <package>.routing.generate``, :func:`main`): :func:`package_served_table`, written to the
    package's ``routes/<backend>.conf``."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    routes = Path(spec.origin).resolve().parent / "routes"
    return main(
        argv,
        prog=f"{package}.routing.generate",
        build=lambda: package_served_table(vendor, package),
        default_output=routes / f"{vendor.backend}.conf",
    )


def skipped_warnings(backend: str, skipped: Mapping[str, str]) -> list[str]:
    """The generator's warnings: one per overload the kernel generator skipped."""
    return [
        f"no {backend} route for {short_op_name(op)}: {why}" for op, why in sorted(skipped.items())
    ]


def main(
    argv: Iterable[str] | None,
    *,
    prog: str,
    build: Callable[[], tuple[str, list[str]]],
    default_output: Path,
) -> int:
    """The command line of a vendor generator (``python -m <package>.routing.generate``):
    ``--check`` (exit 1 if the table is stale), ``--output`` (a file, or ``-`` for stdout).
    ``build()`` returns the table's text and the warnings."""
    from torch_fl.routing.generate import write_or_check

    parser = argparse.ArgumentParser(prog=f"python -m {prog}")
    parser.add_argument("--check", action="store_true", help="exit 1 if the table is stale")
    parser.add_argument("--output", default=str(default_output), help="file to write; - for stdout")
    args = parser.parse_args(list(argv) if argv is not None else None)
    text, warnings = build()
    for w in warnings:
        print(f"{prog}: warning: {w}", file=sys.stderr)
    return write_or_check(text, args.output, check=args.check, regenerate=f"python -m {prog}")
