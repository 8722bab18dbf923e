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

from collections.abc import Iterable, Mapping
from pathlib import Path

from torch_fl.routing import flaggems_first
from torch_fl.routing.flaggems_first import FlagGemsFirst, Rule

__all__ = ["ALL_DTYPES", "GAPS_FILE", "generate", "load_gaps", "main"]

ROUTING = Path(__file__).resolve().parent
GAPS_FILE = ROUTING / "gaps.json"
DEFAULT_OUTPUT = ROUTING.parent / "routes" / "ascend.conf"
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
    return flaggems_first.load_gaps(path)


def _rules(t: FlagGemsFirst, op: str, served: tuple[str, ...] | None) -> list[Rule]:
    """FlagGems first, then ACLNN, then cpu; the dtypes ACLNN does not compute in (``served``:
    those it does, None: all) and those the gap set excludes split off into rules of their own."""
    whole, gap_dtypes = t.whole_gap(op), t.dtype_gap(op)
    flaggems = op in t.gems and whole is None
    comment = f"gap: {whole['family']}" if whole is not None else ""
    has_ascend = op in t.native
    # cpu closes a FlagGems list (and is the target where nothing else serves the op); a
    # native-only overload is 'ascend' alone, as a table line of one backend.
    tail = ["cpu"] if op not in t.factories and (flaggems or not has_ascend) else []
    plain = ", ".join(
        (["flaggems"] if flaggems else []) + (["ascend"] if has_ascend else []) + tail
    )
    if op in t.factories:
        return [Rule((), plain, comment)]
    out = [Rule((), plain, comment)]
    if has_ascend and op in t.cpu_ok:
        declined = tuple(
            d for d in ALL_DTYPES if d not in (ALL_DTYPES if served is None else served)
        )
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
        if set(ds) & set(gap_dtypes):
            family = t.gaps[op]["family"]
            why = f"gap[{', '.join(d for d in ds if d in gap_dtypes)}]: {family}"
        out.append(Rule(tuple(ds), backends, why))
    return out


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
    t = FlagGemsFirst(
        native_ops=ascend_ops, flaggems_ops=flaggems_ops, gaps=gaps, route_classes=route_classes
    )
    served = {op.removeprefix("aten::"): tuple(d) for op, d in (dtypes or {}).items()}
    for op in t.overloads():
        t.rules[op] = _rules(t, op, served.get(op))
    t.add_core_rules(stub_composites, composites)
    counts = t.counts()
    whole, partial = t.gap_counts()
    split_ops = sum(1 for rules in t.rules.values() if len(rules) > 1)
    explanation = [
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
    ]
    text = t.text(
        title="Route table of the Huawei Ascend vendor (torch-fl-ascend).",
        command="python -m torch_fl_ascend.routing.generate",
        torch_minor=torch_minor,
        measured=measured,
        explanation=explanation,
        skipped_heading="Without an ascend route (missing from libopapi.so)",
        skipped=skipped,
    )
    return text, flaggems_first.skipped_warnings("ascend", skipped)


def _current() -> tuple[str, list[str]]:
    from torch_fl_ascend import kernels_manifest

    manifest = kernels_manifest()
    return generate(
        ascend_ops=manifest.get("generated", {}),
        dtypes=manifest.get("dtypes", {}),
        skipped=manifest.get("skipped", {}),
        **flaggems_first.checked_in_inputs(ROUTING),
    )


def main(argv: Iterable[str] | None = None) -> int:
    return flaggems_first.main(
        argv, prog="torch_fl_ascend.routing.generate", build=_current, default_output=DEFAULT_OUTPUT
    )


if __name__ == "__main__":
    import sys

    sys.exit(main())
