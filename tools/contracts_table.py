"""Writes the status table of docs/contracts.md from the runs the contract suites recorded.

Each file in ``docs/data/contracts`` is the current row of one vendor on one machine
(``<vendor>-<machine>.json``), written by ``tests/_status_record.py`` when a run of the suites has
``FLAGOS_TEST_CONTRACTS_DIR`` set (``nox -s tests`` and ``nox -s test-<vendor>`` set it): per suite
the pytest outcome counts and skip reasons, the totals, and the run's torch, date, command and
commit. This tool puts, between the status markers of docs/contracts.md, a table (a row per suite,
a column per vendor and machine) and, per column, the run it comes from and its skip reasons.

    python tools/contracts_table.py [--data docs/data/contracts] [--doc docs/contracts.md] [--check]

``--check`` changes nothing and exits 1 when the document's block differs from the data (the
tooling tests run it, so a hand edit of the block fails them).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN = (
    "<!-- contracts status: begin (tools/contracts_table.py writes it from docs/data/contracts) -->"
)
END = "<!-- contracts status: end -->"
#: pytest's outcome categories, in the order a cell lists them.
CATEGORIES = ("passed", "skipped", "xfailed", "xpassed", "failed", "error")
REQUIRED = ("vendor", "machine", "torch", "date", "command", "suites", "totals")
SUITE_KEYS = {*CATEGORIES, "skip_reasons", "note"}


class DataError(ValueError):
    pass


def vendor_order(root: Path = ROOT) -> list[str]:
    """Columns by vendor: core's sim, then packages/vendors.toml's order (a new vendor needs no
    edit here)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    table = tomllib.loads((root / "packages" / "vendors.toml").read_text(encoding="utf-8"))
    return ["sim", *table.get("vendor", {})]


def load(data: Path) -> list[dict]:
    """The recorded runs, one per vendor and machine, in table order; each file checked."""
    runs = []
    for path in sorted(data.glob("*.json")):
        doc = json.loads(path.read_text())
        missing = [k for k in REQUIRED if k not in doc]
        if missing:
            raise DataError(f"{path}: missing {', '.join(missing)}")
        if path.stem != f"{doc['vendor']}-{doc['machine']}":
            raise DataError(f"{path}: holds {doc['vendor']}-{doc['machine']}, not {path.stem}")
        for suite, entry in doc["suites"].items():
            unknown = set(entry) - SUITE_KEYS
            if unknown:
                raise DataError(f"{path}: {suite}: unknown keys {', '.join(sorted(unknown))}")
        runs.append(doc)
    order = {v: i for i, v in enumerate(vendor_order())}
    runs.sort(key=lambda d: (order.get(d["vendor"], len(order)), d["vendor"], d["machine"]))
    return runs


def suite_order(text: str, runs: list[dict]) -> list[str]:
    """The contract suites in the order of the document's suites table, then any other suite,
    then the other test directories a run counted (core's unit tests)."""
    listed = re.findall(r"^\| `(test_\w+\.py)` \|", text, re.M)
    seen = {s for run in runs for s in run["suites"]}
    suites = [s for s in dict.fromkeys(listed) if s in seen]
    rest = sorted(seen - set(suites))
    return suites + [s for s in rest if s.endswith(".py")] + [s for s in rest if "/" in s]


def counts(entry: dict) -> str:
    return ", ".join(f"{entry[c]} {c}" for c in CATEGORIES if entry.get(c))


def cell(entry: dict | None) -> str:
    if entry is None:
        return "not recorded"
    text = counts(entry)
    note = entry.get("note")
    return f"{text} ({note})" if text and note else text or note or "none"


def label(run: dict) -> str:
    emulated = "-emulated" if run.get("emulated") else ""
    return f"{run['vendor']}{emulated}, {run['machine']}"


def _duration(seconds: int | None) -> str:
    if not seconds:
        return ""
    minutes, sec = divmod(int(seconds), 60)
    return f", {minutes} min {sec} s" if minutes else f", {sec} s"


def provenance(run: dict) -> list[str]:
    """The bullet of one column: the run, its totals, its skip reasons and notes."""
    # The emulator's name, not the whole phrase its vendor prints.
    emulated = f" on {run['emulated'].split(' (', 1)[0]}" if run.get("emulated") else ""
    source = f", source `{run['source']}`" if run.get("source") else ""
    python = f", Python {run['python']}" if run.get("python") else ""
    workers = run.get("workers")
    workers = f", {workers} pytest-xdist workers" if workers and str(workers) != "1" else ""
    head = (
        f"- **{label(run)}**{emulated}: {run['date']}, torch {run['torch']}{python}{source}; "
        f"`{run['command']}`{workers}{_duration(run.get('duration_s'))}: "
        f"**{counts(run['totals'])}**."
    )
    by = run.get("recorded_by", "")
    lines = [f"{head} {by[:1].upper()}{by[1:]}." if by else head]
    reasons: Counter = Counter()
    for entry in run["suites"].values():
        reasons.update(entry.get("skip_reasons", {}))
    if reasons:
        lines.append(
            "  Skips: " + "; ".join(f"{r} ({n})" for r, n in sorted(reasons.items())) + "."
        )
    lines += [f"  {note}" for note in run.get("notes", [])]
    return lines


def render(runs: list[dict], text: str) -> str:
    suites = suite_order(text, runs)
    lines = [
        "| suite | " + " | ".join(label(r) for r in runs) + " |",
        "|---|" + "---|" * len(runs),
    ]
    for suite in suites:
        name = f"`{suite}`" if suite.endswith(".py") else suite
        cells = [cell(r["suites"].get(suite)) for r in runs]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("| **all** | " + " | ".join(f"**{counts(r['totals'])}**" for r in runs) + " |")
    lines.append("")
    for run in runs:
        lines += provenance(run)
    return "\n".join(lines)


def update(text: str, block: str) -> str:
    if BEGIN not in text or END not in text:
        raise DataError(f"no status markers ({BEGIN} ... {END})")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{block}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=ROOT / "docs" / "data" / "contracts")
    p.add_argument("--doc", type=Path, default=ROOT / "docs" / "contracts.md")
    p.add_argument("--check", action="store_true")
    args = p.parse_args(argv)
    text = args.doc.read_text()
    try:
        runs = load(args.data)
        if not runs:
            raise DataError(f"no recorded runs in {args.data}")
        new = update(text, render(runs, text))
    except (DataError, json.JSONDecodeError) as e:
        print(f"{args.doc}: {e}", file=sys.stderr)
        return 1
    if args.check:
        if new != text:
            print(
                f"{args.doc}: the status block differs from {args.data} (edit the data, not the "
                f"block; python tools/contracts_table.py writes it)",
                file=sys.stderr,
            )
            return 1
        return 0
    if new != text:
        args.doc.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
