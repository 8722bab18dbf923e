"""Generator of the Ascend route table, ``torch_fl_ascend/routes/ascend.conf``.

::

    python -m torch_fl_ascend.routing.generate              # rewrite the table
    python -m torch_fl_ascend.routing.generate --check      # exit 1 if it is not up to date
    python -m torch_fl_ascend.routing.generate --output -   # print it

FlagGems first, native ACLNN kernels next, the CPU last; independent of what is importable where
it runs:

- the FlagGems overloads are ``routing/flaggems_ops.txt`` (a snapshot of FlagGems' ``_FULL_CONFIG``
  names, vendor neutral) plus every overload of ``routing/gaps.json``;
- ``ascend`` is available for the overloads this build generated ACLNN kernels for
  (``lib/kernels.json``: the ops table checked against ``nm -D libopapi.so``); an op the toolkit
  lacks has no ``ascend`` route, and the generator warns about it;
- a FlagGems overload gets ``flaggems, ascend, cpu`` (``flaggems, cpu`` without an ACLNN kernel).
  The ``flaggems`` backend is registered only where a Triton with an Ascend backend and FlagGems
  are importable (:func:`torch_fl_ascend.flaggems.ascend_triton`); elsewhere the list resolves to
  the native kernel at load;
- the dtypes an op's ACLNN kernel does not compute in (``kernels.json``'s ``dtypes``, from the ops
  table) get a rule of their own without ``ascend``: ``op[float64, ...] = flaggems, cpu`` (or
  ``= cpu``), so those calls never reach a kernel that would decline them;
- the gap set (``routing/gaps.json``, FlagGems failures measured on an Ascend NPU) takes overloads
  off ``flaggems``, whole (``"all"``) or for the dtypes it lists; it is empty until such a
  measurement exists, and its ``measured`` becomes the ``# flaggems-measured:`` pragma;
- ``cpu`` is otherwise not written: an overload without a line keeps PyTorch's default on flagos
  (its composite kernel, else core's CPU fallback) -- except the composites whose kernel calls a
  DispatchStub for the tensor's device (core's ``STUB_COMPOSITES``), routed to ``cpu`` whole.

The output is sorted and byte-identical on every run with the same build and torch minor.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = [
    "ALL_DTYPES",
    "FLAGGEMS_OPS_FILE",
    "GAPS_FILE",
    "generate",
    "load_flaggems_ops",
    "load_gaps",
    "load_measured",
    "main",
]

GAPS_FILE = Path(__file__).resolve().parent / "gaps.json"
FLAGGEMS_OPS_FILE = Path(__file__).resolve().parent / "flaggems_ops.txt"
DEFAULT_OUTPUT = Path(__file__).resolve().parent.parent / "routes" / "ascend.conf"
#: The dtypes a rule may split off (tools/aclnn_ops.py's ALL_DTYPES, in that order).
ALL_DTYPES = (
    "float32",
    "float16",
    "bfloat16",
    "float64",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
    "complex64",
    "complex128",
)


def load_gaps(path: Path = GAPS_FILE) -> dict[str, dict]:
    """{overload: {"dtypes", "family", "reason", "source"}} (see gaps.json's ``_schema``)."""
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
    ascend_ops: Mapping[str, str] | Iterable[str],
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
    """The table's text and the generator's warnings.

    ``ascend_ops``: overloads (``aten::abs`` or ``abs``) with an ACLNN kernel; ``dtypes``: per
    overload the dtypes that kernel serves (absent: all). ``skipped``: overloads the kernel
    generator left out, with why. ``flaggems_ops``: FlagGems' overloads. ``composites``: core's
    composite kernels (overload -> dtypes), which take those dtypes of the overload (a plain
    ``cpu`` rule first where it has no other).
    """
    cpu_ok, factories = (set(c) for c in (route_classes or _route_classes()))
    ascend = {_short(o) for o in ascend_ops}
    served = {_short(o): tuple(d) for o, d in (dtypes or {}).items()}
    gems = {_short(o) for o in flaggems_ops or ()} | set(gaps)
    gems = {op for op in gems if op in cpu_ok or (op in factories and op in ascend)}
    # op -> [(dtypes or () for the plain rule, backends, comment)]
    rules: dict[str, list[tuple[tuple[str, ...], str, str]]] = {}
    whole = partial = 0
    for op in sorted(gems | ascend):
        gap = gaps.get(op) if op in gems else None
        gap_dtypes: tuple[str, ...] = ()
        comment = ""
        flaggems = op in gems
        if gap is not None and gap.get("dtypes", "all") == "all":
            if not (op in factories and op not in ascend):  # else only flaggems could serve it
                flaggems = False
                comment = f"gap: {gap['family']}"
                whole += 1
        elif gap is not None:
            gap_dtypes = tuple(gap["dtypes"])
            partial += 1
        has_ascend = op in ascend
        # cpu closes a FlagGems list (and is the target where nothing else serves the op); a
        # native-only overload is 'ascend' alone, as a table line of one backend.
        tail = ["cpu"] if op not in factories and (flaggems or not has_ascend) else []
        plain = ", ".join(
            (["flaggems"] if flaggems else []) + (["ascend"] if has_ascend else []) + tail
        )
        if op in factories:
            rules[op] = [((), plain, comment)]
            continue
        out = [((), plain, comment)]
        if has_ascend and op in cpu_ok:
            declined = tuple(d for d in ALL_DTYPES if d not in served.get(op, ALL_DTYPES))
        else:
            declined = ()
        # Per dtype: flaggems unless the gap excludes it, ascend unless ACLNN declines it.
        split: dict[str, list[str]] = {}
        for d in ALL_DTYPES:
            if d not in declined and d not in gap_dtypes:
                continue
            use_gems = flaggems and d not in gap_dtypes
            use_ascend = has_ascend and d not in declined
            backends = ", ".join(
                (["flaggems"] if use_gems else []) + (["ascend"] if use_ascend else []) + ["cpu"]
            )
            if backends != plain:
                split.setdefault(backends, []).append(d)
        for backends, ds in sorted(split.items(), key=lambda kv: ALL_DTYPES.index(kv[1][0])):
            why = ""
            if gap is not None and set(ds) & set(gap_dtypes):
                why = f"gap[{', '.join(d for d in ds if d in gap_dtypes)}]: {gap['family']}"
            out.append((tuple(ds), backends, why))
        rules[op] = out
    for op, why in sorted((stub_composites or {}).items()):
        if _short(op) not in rules:
            rules[_short(op)] = [((), "cpu", f"composite {why}")]
    from torch_fl.routing.generate import COMPOSITE

    composites = {_short(op): tuple(d) for op, d in (composites or {}).items()}
    for op, ds in sorted(composites.items()):
        rules.setdefault(op, [((), "cpu", "")]).append(
            (ds, COMPOSITE, "CPU's kernel lacks these dtypes")
        )
    warnings = [f"no ascend route for {_short(op)}: {why}" for op, why in sorted(skipped.items())]
    counts: dict[str, int] = {}
    for rs in rules.values():
        backend = rs[0][1]
        key = "flaggems" if backend.startswith("flaggems") else backend.split(", ")[0]
        counts[key] = counts.get(key, 0) + 1
    split_ops = sum(1 for rs in rules.values() if len(rs) > 1)
    lines = [
        "# Route table of the Huawei Ascend vendor (torch-fl-ascend).",
        "# GENERATED by `python -m torch_fl_ascend.routing.generate` -- do not edit; `--check` in"
        " tests.",
        f"# generated-for: torch {torch_minor}",
    ]
    if measured:
        lines.append(f"# flaggems-measured: {measured}")
    lines += [
        "# FlagGems first: each overload FlagGems implements (routing/flaggems_ops.txt and the gap",
        "# set) is 'flaggems, ascend, cpu' ('flaggems, cpu' without an ACLNN kernel); the first",
        "# available at load wins. flaggems is registered only where a Triton with an Ascend",
        "# backend and FlagGems are importable; elsewhere these lists resolve to the ACLNN kernels.",
        f"# FlagGems overloads from {flaggems_why}.",
        "# Dtypes an op's ACLNN kernel does not compute in (tools/aclnn_ops.py) skip 'ascend':",
        "# 'op[float64, ...] = flaggems, cpu' (or '= cpu').",
        f"# Routes: {counts.get('flaggems', 0)} flaggems-first, {counts.get('ascend', 0)} ascend, "
        f"{counts.get('cpu', 0)} cpu; {split_ops} split by dtype; of {len(gaps)} gap entries "
        f"{whole} take the overload off flaggems, {partial} only some dtypes.",
        f"# Without an ascend route (missing from libopapi.so): {len(skipped)}",
        *(f"#   {_short(op)}: {why}" for op, why in sorted(skipped.items())),
        "# Dtypes CPU's kernel lacks and CUDA's takes go to core's composite backend: "
        f"{', '.join(sorted(composites)) or 'none'}.",
        "# Unlisted overloads keep PyTorch's default on flagos (composite, else the CPU fallback).",
        "",
    ]
    for op in sorted(rules):
        for ds, backends, why in rules[op]:
            lhs = f"{op}[{', '.join(ds)}]" if ds else op
            lines.append(f"{lhs} = {backends}" + (f"  # {why}" if why else ""))
    return "\n".join(lines) + "\n", warnings


def _current() -> tuple[str, list[str]]:
    from torch_fl.routing.generate import STUB_COMPOSITES, composite_kernels
    from torch_fl.routing.validation import torch_minor

    from torch_fl_ascend import kernels_manifest

    manifest = kernels_manifest()
    return generate(
        ascend_ops=manifest.get("generated", {}),
        dtypes=manifest.get("dtypes", {}),
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
    parser = argparse.ArgumentParser(prog="python -m torch_fl_ascend.routing.generate")
    parser.add_argument("--check", action="store_true", help="exit 1 if the table is stale")
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT), help="file to write; - for stdout")
    args = parser.parse_args(list(argv) if argv is not None else None)
    text, warnings = _current()
    for w in warnings:
        print(f"torch_fl_ascend.routing.generate: warning: {w}", file=sys.stderr)
    from torch_fl.routing.generate import write_or_check

    return write_or_check(
        text, args.output, check=args.check, regenerate="python -m torch_fl_ascend.routing.generate"
    )


if __name__ == "__main__":
    sys.exit(main())
