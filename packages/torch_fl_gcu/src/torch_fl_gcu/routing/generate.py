"""Generator of the GCU route table, ``torch_fl_gcu/routes/gcu.conf``.

::

    python -m torch_fl_gcu.routing.generate              # rewrite the table
    python -m torch_fl_gcu.routing.generate --check      # exit 1 if it is not up to date
    python -m torch_fl_gcu.routing.generate --output -   # print it

FlagGems-first from the measured gap set, independent of what is importable where it runs:

- the FlagGems overloads are core's ``torch_fl/routing/flaggems_ops.txt`` (a snapshot of FlagGems' ``_FULL_CONFIG``
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

from collections.abc import Iterable
from pathlib import Path

from torch_fl.routing import flaggems_first
from torch_fl.routing.flaggems_first import FlagGemsFirst, Rule

__all__ = ["GAPS_FILE", "generate", "load_gaps", "main"]

ROUTING = Path(__file__).resolve().parent
GAPS_FILE = ROUTING / "gaps.json"
DEFAULT_OUTPUT = ROUTING.parent / "routes" / "gcu.conf"
SIXTY_FOUR_BIT = ("int64", "float64")


def load_gaps(path: Path = GAPS_FILE) -> dict[str, dict]:
    """{overload ("abs", "sum.dim_IntList"): {"dtypes", "family", "reason", "source"}}."""
    return flaggems_first.load_gaps(path)


def _rules(t: FlagGemsFirst, op: str) -> list[Rule]:
    """FlagGems first, then topsaten, then cpu; the gap set takes overloads (or dtypes) off
    flaggems; 64-bit dtypes never reach topsaten."""
    has_gcu = op in t.native
    whole, dtypes = t.whole_gap(op), t.dtype_gap(op)
    why = ""
    if op not in t.gems:
        backend = "gcu"
    elif whole is not None:
        backend, why = ("gcu" if has_gcu else "cpu"), f"gap: {whole['family']}"
    elif op in t.factories:
        backend = "flaggems, gcu"
    else:
        backend = "flaggems, gcu, cpu" if has_gcu else "flaggems, cpu"
    if dtypes:
        why = f"gap[{', '.join(dtypes)}]: {t.gaps[op]['family']}"
    on_gcu = "gcu" in backend.split(", ")
    # A dtype gap inside the 64-bit rule needs no line of its own; its comment goes there.
    covered = on_gcu and set(dtypes) <= set(SIXTY_FOUR_BIT)
    rules = [Rule((), backend, "" if dtypes else why)]
    if on_gcu:
        rules.append(Rule(SIXTY_FOUR_BIT, "cpu", why if dtypes and covered else ""))
    if dtypes and not covered:
        rules.append(Rule(dtypes, "cpu", why))
    return rules


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
    ``route_classes``: (overloads a cpu route serves, device-argument factories), default core's.
    ``composites``: core's composite kernels (overload -> dtypes), which take those dtypes of the
    overload (a plain ``cpu`` rule first where it has no other).
    """
    t = FlagGemsFirst(
        native_ops=gcu_ops, flaggems_ops=flaggems_ops, gaps=gaps, route_classes=route_classes
    )
    for op in t.overloads():
        t.rules[op] = _rules(t, op)
    t.add_core_rules(stub_composites, composites)
    counts = t.counts()
    whole, partial = t.gap_counts()
    explanation = [
        "# FlagGems-first: each overload FlagGems implements (torch_fl/routing/flaggems_ops.txt and the gap",
        "# set) is 'flaggems, gcu, cpu' ('flaggems, cpu' without a topsaten kernel); the first",
        "# available at load wins. The measured gap set (torch_fl_gcu/routing/gaps.json) then takes",
        "# overloads off flaggems (to gcu, else cpu), or only the dtypes it excludes (to cpu).",
        f"# FlagGems overloads from {flaggems_why}.",
        f"# Routes: {counts.get('flaggems', 0)} flaggems-first, {counts.get('gcu', 0)} gcu, "
        f"{counts.get('cpu', 0)} cpu; of {len(gaps)} gap entries {whole} take the overload off "
        f"flaggems, {partial} only some dtypes.",
        "# Rules with gcu send int64/float64 (first tensor) to cpu: topsaten has no 64-bit kernels.",
    ]
    text = t.text(
        title="Route table of the Enflame GCU vendor (torch-fl-gcu).",
        command="python -m torch_fl_gcu.routing.generate",
        torch_minor=torch_minor,
        measured=measured,
        explanation=explanation,
        skipped_heading="Without a gcu route (missing from libtopsaten.so, or a measured defect)",
        skipped=skipped,
    )
    return text, flaggems_first.skipped_warnings("gcu", skipped)


def _current() -> tuple[str, list[str]]:
    from torch_fl_gcu import kernels_manifest

    manifest = kernels_manifest()
    return generate(
        gcu_ops=manifest.get("generated", {}),
        skipped=manifest.get("skipped", {}),
        **flaggems_first.checked_in_inputs(ROUTING),
    )


def main(argv: Iterable[str] | None = None) -> int:
    return flaggems_first.main(
        argv, prog="torch_fl_gcu.routing.generate", build=_current, default_output=DEFAULT_OUTPUT
    )


if __name__ == "__main__":
    import sys

    sys.exit(main())
