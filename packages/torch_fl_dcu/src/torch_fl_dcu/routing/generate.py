"""Generator of the dcu vendor's route tables.

::

    python -m torch_fl_dcu.routing.generate          # rewrite routes/dcu.conf, dcu-flaggems.conf
    python -m torch_fl_dcu.routing.generate --check  # exit 1 if either is out of date
    python -m torch_fl_dcu.routing.generate --dir packages/torch_fl_dcu/src/torch_fl_dcu  # sources

``routes/dcu.conf`` is the ``box:cuda`` base: one ``derive box:cuda except composite-implicit``
statement, expanded when the table is read into ``box:cuda`` routes for every ``aten`` overload
with a CUDA-key kernel in the process (DTK's HIP kernels: its hipified torch's, or the bundle's
loaded at activation), on alias views of the flagos memory, with the exclusions of the sim and cuda
tables (core's copies, allocation and views; CompositeImplicitAutograd; factories with a Device
argument; sparse layouts; see :mod:`torch_fl.routing.derived`). What routes is what registered, on
whatever torch minor is installed.

The FlagGems table below decides which FlagGems choices fall back to ``box:cuda``; it is generated
from checked-in inputs, so it reads the CUDA kernels torch declares from the schema torch ships
(``torchgen/packaged/ATen/native/native_functions.yaml``: a ``CUDA`` dispatch entry, a
``ufunc_inner_loop`` (ufunc codegen emits CPU and CUDA kernels), or a ``structured_delegate`` to an
overload with one) and is the same on any build of the torch minor, a CPU one included. Its
preference lists resolve when the table loads, so a declared kernel that did not register leaves
``cpu`` as the fallback.

``routes/dcu-flaggems.conf`` includes it and is FlagGems-first from checked-in inputs only, so it
is the same wherever it is generated: every overload FlagGems implements
(core's ``torch_fl/routing/flaggems_ops.txt``, a snapshot of FlagGems' ``_FULL_CONFIG`` names, plus the gap set's
overloads) gets ``flaggems, box:cuda, cpu`` (``flaggems, cpu`` outside the box:cuda base; none for
views, factories and decomposing overloads); the first choice available at load wins. Then the DCU
gap set (``routing/gaps.json``: per overload the dtypes excluded, ``"all"`` or a list, the family,
the reason and the document section it is stated in) takes overloads off flaggems: back to
``box:cuda`` where it has a kernel, else no route at all (PyTorch's default on flagos: the
composite kernel, or core's lazy view for ``_conj``/``transpose.int``). gaps.json's ``measured``
becomes the table's ``# flaggems-measured:`` pragma (:mod:`torch_fl.routing.provenance`). The
vendor loads this table when its ``flaggems`` backend is registered.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

import torch
import yaml
from torch_fl.routing import flaggems_first
from torch_fl.routing.generate import (
    EXCLUDED,
    STUB_COMPOSITES,
    classify_box_routes,
    flaggems_route_classes,
    write_or_check,
)
from torch_fl.routing.route_table import short_op_name
from torch_fl.routing.validation import torch_minor

__all__ = [
    "GAPS",
    "TABLE",
    "FLAGGEMS_TABLE",
    "box_text",
    "cuda_declared",
    "flaggems_text",
    "generate_box",
    "load_flaggems_ops",
    "load_gaps",
    "load_measured",
    "main",
]

#: The package directory (routes/ and routing/ are beside each other in it).
HERE = Path(__file__).resolve().parent.parent
TABLE = HERE / "routes" / "dcu.conf"
FLAGGEMS_TABLE = HERE / "routes" / "dcu-flaggems.conf"
GAPS = HERE / "routing" / "gaps.json"
FLAGGEMS_OPS = flaggems_first.FLAGGEMS_OPS
BOX = "box:cuda"


def native_functions_yaml() -> Path:
    import torchgen

    return (
        Path(torchgen.__file__).resolve().parent
        / "packaged"
        / "ATen"
        / "native"
        / ("native_functions.yaml")
    )


def cuda_declared(path: Path | None = None) -> set[str]:
    """``aten::`` overloads torch declares a CUDA kernel for (directly or structured)."""
    entries = yaml.load((path or native_functions_yaml()).read_text(), Loader=yaml.CSafeLoader)
    direct: set[str] = set()
    delegates: dict[str, str] = {}
    for e in entries:
        name = "aten::" + e["func"].split("(", 1)[0].strip()
        if e.get("ufunc_inner_loop"):
            direct.add(name)  # ufunc codegen emits its CPU and CUDA kernels (add.out)
        for keys in (e.get("dispatch") or {}).keys():
            if "CUDA" in (k.strip() for k in str(keys).split(",")):
                direct.add(name)
        if e.get("structured_delegate"):
            delegates[name] = "aten::" + str(e["structured_delegate"]).strip()
    return direct | {op for op, out in delegates.items() if out in direct}


def generate_box() -> tuple[list[str], dict[str, int]]:
    """The overloads routed to box:cuda, and per exclusion rule how many were left out."""
    declared = cuda_declared()
    routed, left = classify_box_routes(declared.__contains__, route_composite_implicit=False)
    counts = {rule: len(ops) for rule, ops in left.items()}
    counts["by name"] = counts.pop("excluded by name")
    return routed, counts


def box_text() -> str:
    lines = [
        "# dcu.conf: route table of the dcu vendor (torch-fl-dcu) without FlagGems.",
        "# GENERATED by `python -m torch_fl_dcu.routing.generate`; do not edit.",
        "# `python -m torch_fl_dcu.routing.generate --check` verifies it (the package tests run it).",
        "#",
        f"# Every overload with a CUDA-key kernel in the process goes to {BOX}: on DCU that is DTK's",
        "# HIP kernel (its hipified torch's, or the bundle's), run on alias views of the flagos",
        "# memory on the flagos (= CUDA-key) current stream. Derived when the table is read; left",
        "# out: what core serves natively (allocation, copies, views, .item()),",
        "# CompositeImplicitAutograd overloads (they decompose into routed operators), views,",
        "# factories with a Device argument, sparse layouts, and by name:",
        "# " + ", ".join(sorted(EXCLUDED)) + ".",
        "# FlagGems routes and the DCU gap set: dcu-flaggems.conf.",
        "",
        f"derive {BOX} except composite-implicit",
        "",
    ]
    return "\n".join(lines)


def load_gaps(path: Path = GAPS) -> dict[str, dict]:
    """{overload: {"dtypes", "family", "reason", "source"}} of the DCU gap set (core's reader)."""
    return flaggems_first.load_gaps(path)


def load_measured(path: Path = GAPS) -> str | None:
    """The ``# flaggems-measured:`` pragma's text from gaps.json's ``measured``, or None."""
    return flaggems_first.load_measured(path)


def load_flaggems_ops(path: Path = FLAGGEMS_OPS) -> list[str]:
    """The FlagGems overloads of the snapshot (comments and blank lines skipped)."""
    return flaggems_first.load_flaggems_ops(path)


def flaggems_text(
    gems: Iterable[str], gems_why: str, boxed: set[str], gaps_path: Path = GAPS
) -> str:
    """``gems``: overloads FlagGems implements; ``boxed``: the overloads of the box:cuda base
    (``aten::`` names)."""
    gaps = load_gaps(gaps_path)
    measured = load_measured(gaps_path)
    cpu_ok, _factories = flaggems_route_classes()
    base = {short_op_name(o) for o in boxed}
    body: list[str] = []
    n_lists = n_dtype = 0
    for op in sorted({*gems, *gaps}):
        entry = gaps.get(op)
        if op not in cpu_ok or (entry and entry["dtypes"] == "all"):
            continue  # no route a CPU fallback could back (views, factories), or gapped whole
        body.append(f"{op} = flaggems, {BOX}, cpu" if op in base else f"{op} = flaggems, cpu")
        n_lists += 1
        if entry:
            n_dtype += 1
            target = BOX if op in base else "cpu"
            body.append(
                f"{op}[{', '.join(entry['dtypes'])}] = {target}  # {entry['family']}: "
                f"{entry['reason']}"
            )
    n_whole = sum(1 for e in gaps.values() if e["dtypes"] == "all")
    head = [
        "# dcu-flaggems.conf: the dcu vendor's table when FlagGems runs (Triton hcu backend).",
        "# GENERATED by `python -m torch_fl_dcu.routing.generate` from routing/gaps.json; do not edit.",
        "#",
        f"# generated-for: torch {torch_minor()}",
    ]
    if measured:
        head.append(f"# flaggems-measured: {measured}")
    head += [
        "# FlagGems-first: every overload FlagGems implements (torch_fl/routing/flaggems_ops.txt and the gap",
        f"# set) is 'flaggems, {BOX}, cpu' ('flaggems, cpu' outside the {BOX} base); the first",
        "# choice available at load wins. The DCU gap set (routing/gaps.json) then sends its",
        f"# overloads back to {BOX}, or to no route at all where the {BOX} base has none (no CUDA",
        "# kernel of its own, a view, or a decomposing CompositeImplicitAutograd overload:",
        "# PyTorch's default on flagos).",
        f"# FlagGems overloads from {gems_why}.",
        f"# FlagGems routes: {n_lists} flaggems-first ({n_dtype} with a dtype gap); {n_whole} gap "
        "entries take the overload off flaggems.",
        "",
        "include dcu.conf",
        "",
    ]
    if body:
        body.append("")
    body.append("# The DCU gap set.")
    for op, entry in sorted(gaps.items()):
        if entry["dtypes"] != "all":
            continue
        full = "aten::" + op
        if full in boxed:
            body.append(f"{op} = {BOX}  # {entry['family']}: {entry['reason']}")
        else:
            body.append(
                f"# {op}: not routed (not in the box:cuda base: no CUDA kernel of its own, or it "
                f"decomposes; PyTorch's default on flagos) "
                f"-- {entry['family']}: {entry['reason']}"
            )
    return "\n".join(head + body) + "\n"


def unregistered(routed: Iterable[str]) -> list[str]:
    """Declared overloads without a CUDA-key kernel in this process (empty on a CPU torch)."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    if not has("aten::add.Tensor", "CUDA"):
        return []
    return [op for op in routed if op not in STUB_COMPOSITES and not has(op, "CUDA")]


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_fl_dcu.routing.generate")
    parser.add_argument("--check", action="store_true", help="exit 1 if a table is out of date")
    parser.add_argument(
        "--dir",
        default=None,
        help="package directory holding routes/ and routing/ (default: this package; pass the "
        "source tree's packages/torch_fl_dcu/src/torch_fl_dcu to regenerate the checked-in files)",
    )
    args = parser.parse_args(None if argv is None else list(argv))
    here = Path(args.dir).resolve() if args.dir else HERE
    table, gems_table = here / "routes" / TABLE.name, here / "routes" / FLAGGEMS_TABLE.name
    routed, _left = generate_box()
    gems = load_flaggems_ops()
    why = f"torch_fl/routing/{FLAGGEMS_OPS.name} and the gap set"
    texts = {
        table: box_text(),
        gems_table: flaggems_text(gems, why, set(routed), here / "routing" / GAPS.name),
    }
    missing = unregistered(routed)
    if missing:
        print(
            f"{len(missing)} overloads torch declares a CUDA kernel for have none registered here "
            f"(dcu.conf does not route them; their FlagGems lists fall back to cpu): {', '.join(short_op_name(o) for o in missing[:20])}"
            + (" ..." if len(missing) > 20 else "")
        )
    fix = "python -m torch_fl_dcu.routing.generate" + (f" --dir {args.dir}" if args.dir else "")
    # One failing file fails the run; every file is still checked (or written).
    failed = 0
    for path, text in texts.items():
        failed |= write_or_check(text, path, check=args.check, regenerate=fix, output_option=False)
    if args.check and not failed:
        print("dcu tables up to date")
    return failed


if __name__ == "__main__":
    sys.exit(main())
