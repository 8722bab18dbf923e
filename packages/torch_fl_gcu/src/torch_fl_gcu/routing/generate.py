"""Generator of the GCU route table, ``torch_fl_gcu/routes/gcu.conf``.

::

    python -m torch_fl_gcu.routing.generate              # rewrite the table
    python -m torch_fl_gcu.routing.generate --check      # exit 1 if it is not up to date
    python -m torch_fl_gcu.routing.generate --output -   # print it

FlagGems-first from the measured gap set, independent of what is importable where it runs:

- the FlagGems overloads are ``routing/flaggems_ops.txt`` (a snapshot of FlagGems' ``_FULL_CONFIG``
  names) plus every overload of ``routing/gaps.json`` (each was a FlagGems route of the measured
  revision);
- ``gcu`` is available for the overloads this build generated topsaten kernels for
  (``lib/kernels.json``: the ops table checked against ``nm -DC libtopsaten.so``); an op the SDK
  lacks has no ``gcu`` route, and the generator warns about it;
- a FlagGems overload gets the preference list ``flaggems, gcu, cpu`` (``flaggems, cpu`` without
  a topsaten kernel): where FlagGems is not registered at load the list resolves to the next
  choice;
- the gap set (``routing/gaps.json``: per overload the dtypes excluded, ``"all"`` or a list, the
  family, the measured failure and the document section it was measured in) then takes overloads
  off ``flaggems``: an ``"all"`` entry routes it to ``gcu`` where topsaten has a kernel, else to
  ``cpu``; a dtype entry adds ``op[dtypes] = cpu`` and keeps the list for the other dtypes;
- every rule with ``gcu`` in it gets ``[int64, float64] = cpu``: topsaten has no 64-bit kernels
  (and the GCU300 Triton front end rejects 64-bit types);
- ``cpu`` is otherwise not written: an overload without a line keeps PyTorch's default on flagos
  (its composite kernel, else core's CPU fallback) -- except the composites whose kernel calls a
  DispatchStub for the tensor's device (core's ``STUB_COMPOSITES``, e.g. ``conj_physical_``),
  which are routed to ``cpu`` whole.

``gaps.json``'s ``measured`` (the FlagGems revision, device and torch minor of the measurement)
becomes the table's ``# flaggems-measured:`` pragma: where the installed FlagGems is another one,
the loader demotes the ``flaggems`` choices (:mod:`torch_fl.routing.provenance`).

The output is sorted and byte-identical on every run with the same build and torch minor.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "FLAGGEMS_OPS_FILE",
    "GAPS_FILE",
    "Decision",
    "generate",
    "load_flaggems_ops",
    "load_gaps",
    "load_measured",
    "main",
]

GAPS_FILE = Path(__file__).resolve().parent / "gaps.json"
FLAGGEMS_OPS_FILE = Path(__file__).resolve().parent / "flaggems_ops.txt"
DEFAULT_OUTPUT = Path(__file__).resolve().parent.parent / "routes" / "gcu.conf"
SIXTY_FOUR_BIT = "int64, float64"


class Decision:
    __slots__ = ("op", "backend", "why", "dtypes")

    def __init__(self, op: str, backend: str, why: str, dtypes: tuple[str, ...] = ()) -> None:
        self.op, self.backend, self.why, self.dtypes = op, backend, why, dtypes


def load_gaps(path: Path = GAPS_FILE) -> dict[str, dict]:
    """{overload ("abs", "sum.dim_IntList"): {"dtypes", "family", "reason", "source"}}."""
    data = json.loads(path.read_text())
    gaps = data["gaps"]
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


def load_measured(path: Path = GAPS_FILE) -> str | None:
    """The ``# flaggems-measured:`` pragma's text from gaps.json's ``measured``, or None."""
    from torch_fl.routing import provenance

    return provenance.measured_pragma(path)


def load_flaggems_ops(path: Path = FLAGGEMS_OPS_FILE) -> list[str]:
    """The FlagGems overloads of the snapshot (comments and blank lines skipped)."""
    from torch_fl.routing import provenance

    return provenance.read_op_list(path)


def _short(full: str) -> str:
    return full.removeprefix("aten::")


def _route_classes() -> tuple[frozenset[str], frozenset[str]]:
    """(overloads a ``cpu`` route can serve, factories with a Device argument): core's rules."""
    from torch_fl.routing.generate import flaggems_route_classes

    return flaggems_route_classes()


def generate(
    *,
    gcu_ops: Iterable[str],
    skipped: dict[str, str],
    flaggems_ops: Iterable[str] | None,
    flaggems_why: str,
    gaps: dict[str, dict],
    torch_minor: str,
    stub_composites: dict[str, str] | None = None,
    composites: dict[str, tuple[str, ...]] | None = None,
    measured: str | None = None,
    route_classes: tuple[Iterable[str], Iterable[str]] | None = None,
) -> tuple[str, list[str]]:
    """The table's text and the generator's warnings.

    ``gcu_ops``/``flaggems_ops``: overloads (``aten::abs`` or ``abs``) each backend has a kernel
    for. ``skipped``: overloads the kernel generator left out, with why (SDK lacks the function).
    ``route_classes``: (overloads a cpu route serves, device-argument factories), default
    :func:`_route_classes`. ``composites``: core's composite kernels (overload -> dtypes), which
    take those dtypes of the overload (a plain ``cpu`` rule first where it has no other).
    """
    cpu_ok, factories = (set(c) for c in (route_classes or _route_classes()))
    gcu = {_short(o) for o in gcu_ops}
    gems = {_short(o) for o in flaggems_ops or ()} | set(gaps)
    gems = {op for op in gems if op in cpu_ok or (op in factories and op in gcu)}
    decisions: dict[str, Decision] = {}
    for op in sorted(gems | gcu):
        if op in gems and op in factories:
            decisions[op] = Decision(op, "flaggems, gcu", "")
        elif op in gems:
            backend = "flaggems, gcu, cpu" if op in gcu else "flaggems, cpu"
            decisions[op] = Decision(op, backend, "")
        else:
            decisions[op] = Decision(op, "gcu", "")
    # Composites whose kernel calls a DispatchStub for the tensor's device (no flagos entry):
    # served on the CPU as a whole (core's list, torch_fl.routing.generate.STUB_COMPOSITES).
    for op, why in sorted((stub_composites or {}).items()):
        if _short(op) not in decisions:
            decisions[_short(op)] = Decision(_short(op), "cpu", f"composite {why}")
    composites = {_short(op): tuple(d) for op, d in (composites or {}).items()}
    for op in sorted(composites):
        if op not in decisions:
            decisions[op] = Decision(op, "cpu", "")
    whole = partial = 0
    for op, entry in sorted(gaps.items()):
        d = decisions.get(op)
        if d is None or not d.backend.startswith("flaggems"):
            continue
        if entry.get("dtypes", "all") == "all":
            if op in factories and op not in gcu:
                continue  # nothing but flaggems could serve it on the device
            whole += 1
            target = "gcu" if op in gcu else "cpu"
            decisions[op] = Decision(op, target, f"gap: {entry['family']}")
        else:
            partial += 1
            d.dtypes = tuple(entry["dtypes"])
            d.why = f"gap[{', '.join(d.dtypes)}]: {entry['family']}"
    warnings = [f"no gcu route for {_short(op)}: {why}" for op, why in sorted(skipped.items())]
    counts: dict[str, int] = {}
    for d in decisions.values():
        key = "flaggems" if d.backend.startswith("flaggems") else d.backend
        counts[key] = counts.get(key, 0) + 1
    lines = [
        "# Route table of the Enflame GCU vendor (torch-fl-gcu).",
        "# GENERATED by `python -m torch_fl_gcu.routing.generate` -- do not edit; `--check` in tests.",
        f"# generated-for: torch {torch_minor}",
    ]
    if measured:
        lines.append(f"# flaggems-measured: {measured}")
    lines += [
        "# FlagGems-first: each overload FlagGems implements (routing/flaggems_ops.txt and the gap",
        "# set) is 'flaggems, gcu, cpu' ('flaggems, cpu' without a topsaten kernel); the first",
        "# available at load wins. The measured gap set (torch_fl_gcu/routing/gaps.json) then takes",
        "# overloads off flaggems (to gcu, else cpu), or only the dtypes it excludes (to cpu).",
        f"# FlagGems overloads from {flaggems_why}.",
        f"# Routes: {counts.get('flaggems', 0)} flaggems-first, {counts.get('gcu', 0)} gcu, "
        f"{counts.get('cpu', 0)} cpu; of {len(gaps)} gap entries {whole} take the overload off "
        f"flaggems, {partial} only some dtypes.",
        "# Rules with gcu send int64/float64 (first tensor) to cpu: topsaten has no 64-bit kernels.",
        f"# Without a gcu route (missing from libtopsaten.so, or a measured defect): {len(skipped)}",
        *(f"#   {_short(op)}: {why}" for op, why in sorted(skipped.items())),
        "# Dtypes CPU's kernel lacks and CUDA's takes go to core's composite backend: "
        f"{', '.join(sorted(composites)) or 'none'}.",
        "# Unlisted overloads keep PyTorch's default on flagos (composite, else the CPU fallback).",
        "",
    ]
    from torch_fl.routing.generate import composite_rule

    for op in sorted(decisions):
        d = decisions[op]
        comment = f"  # {d.why}" if d.why else ""
        has_gcu = "gcu" in d.backend.split(", ")
        # A dtype gap inside the 64-bit rule needs no line of its own; its comment goes there.
        covered = has_gcu and set(d.dtypes) <= {"int64", "float64"}
        lines.append(f"{op} = {d.backend}{comment if not d.dtypes else ''}")
        if has_gcu:
            lines.append(f"{op}[{SIXTY_FOUR_BIT}] = cpu{comment if d.dtypes and covered else ''}")
        if d.dtypes and not covered:
            lines.append(f"{op}[{', '.join(d.dtypes)}] = cpu{comment}")
        if op in composites:
            lines.append(composite_rule(op, composites[op]))
    return "\n".join(lines) + "\n", warnings


def _current() -> tuple[str, list[str]]:
    from torch_fl.routing.generate import STUB_COMPOSITES, composite_kernels
    from torch_fl.routing.validation import torch_minor

    from torch_fl_gcu import kernels_manifest

    manifest = kernels_manifest()
    return generate(
        gcu_ops=manifest.get("generated", {}),
        skipped=manifest.get("skipped", {}),
        flaggems_ops=load_flaggems_ops(),
        flaggems_why=f"routing/{FLAGGEMS_OPS_FILE.name} and the gap set",
        gaps=load_gaps(),
        torch_minor=torch_minor(),
        stub_composites=STUB_COMPOSITES,
        composites=composite_kernels(),
        measured=load_measured(),
    )


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_fl_gcu.routing.generate")
    parser.add_argument("--check", action="store_true", help="exit 1 if the table is stale")
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT), help="file to write; - for stdout")
    args = parser.parse_args(list(argv) if argv is not None else None)
    text, warnings = _current()
    for w in warnings:
        print(f"torch_fl_gcu.routing.generate: warning: {w}", file=sys.stderr)
    from torch_fl.routing.generate import write_or_check

    return write_or_check(
        text, args.output, check=args.check, regenerate="python -m torch_fl_gcu.routing.generate"
    )


if __name__ == "__main__":
    sys.exit(main())
