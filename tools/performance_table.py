"""Writes the figures table of docs/performance.md from the benchmark records checked in under
docs/data/performance.

``figures.json`` lists the figures (a row each: its benchmark, what it measures, the target, and a
``headline``: a format string over the benchmark's JSON record, or null where the figure is read
by hand); ``machines.json`` the machines (a column each). ``<machine>/<figure>.json`` is the
current result of one figure on one machine: the run's torch, date, command and commit, the
benchmark's own ``--json`` record, and ``text``, what the cell says beyond the headline.

    python tools/performance_table.py [--check]
    python tools/performance_table.py record RUN.json --machine h200-x1 [--figure ID]
        [--text "what the headline does not say"] [--command "the command line"]

``record`` files a benchmark's ``--json`` output as the current result of its figure on that
machine and rewrites the table; ``--check`` changes nothing and exits 1 when the document's
block differs from the data (the tooling tests run it, so a hand edit of the block fails them).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN = "<!-- performance figures: begin (tools/performance_table.py writes it from docs/data/performance) -->"
END = "<!-- performance figures: end -->"
RESULT_KEYS = ("figure", "benchmark", "machine", "torch", "date", "command", "text", "record")


class DataError(ValueError):
    pass


def slug(figure: str) -> str:
    """A figure's file name: ``gpt_step, decode`` -> ``gpt_step-decode``."""
    return figure.replace(", ", "-").replace(" ", "-")


def load(data: Path) -> tuple[list[dict], dict[str, dict], dict[tuple[str, str], dict]]:
    figures = json.loads((data / "figures.json").read_text())
    machines = json.loads((data / "machines.json").read_text())
    known = {f["id"] for f in figures}
    results: dict[tuple[str, str], dict] = {}
    for path in sorted(data.glob("*/*.json")):
        doc = json.loads(path.read_text())
        missing = [k for k in RESULT_KEYS if k not in doc]
        if missing:
            raise DataError(f"{path}: missing {', '.join(missing)}")
        where = f"{doc['machine']}/{slug(doc['figure'])}"
        if path.parent.name != doc["machine"] or path.stem != slug(doc["figure"]):
            raise DataError(f"{path}: holds {where}.json")
        if doc["figure"] not in known:
            raise DataError(f"{path}: no figure {doc['figure']!r} in figures.json")
        if doc["machine"] not in machines:
            raise DataError(f"{path}: no machine {doc['machine']!r} in machines.json")
        results[(doc["figure"], doc["machine"])] = doc
    return figures, machines, results


def headline(figure: dict, record: dict | None) -> str:
    spec = figure.get("headline")
    if record is not None and record.get("skipped"):
        return f"skipped: {record['skipped']}"  # the benchmark does not apply on that machine
    if not spec or record is None:
        return ""
    try:
        return spec.format_map(record)
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise DataError(
            f"figure {figure['id']!r}: its headline {spec!r} does not fit the record ({e!r})"
        ) from e


def cell(figure: dict, result: dict | None) -> str:
    """The headline (bold) computed from the record, the text, and a recorded run's provenance
    (a seeded result's text names its own)."""
    if result is None:
        return ""
    head = headline(figure, result["record"])
    body = "; ".join(part for part in (head and f"**{head}**", result["text"]) if part)
    if result["record"] is not None:
        source = f"{result['source']}, " if result.get("source") else ""
        body += f" ({source}{result['date']}, torch {result['torch']})"
    return body


def render(figures: list[dict], machines: dict[str, dict], results: dict) -> str:
    lines = [f"- **{m['label']}**: {m['description']}." for m in machines.values()]
    lines += [
        "",
        "| benchmark | figure | target | "
        + " | ".join(m["label"] for m in machines.values())
        + " |",
        "|---|---|---|" + "---|" * len(machines),
    ]
    for f in figures:
        cells = [cell(f, results.get((f["id"], m))) for m in machines]
        row = f"| {f['id']} | {f['figure']} | {f['target']} | " + " | ".join(cells) + " |"
        lines.append(row.replace("|  |", "| |").replace("|  |", "| |"))
    return "\n".join(lines)


def update(text: str, block: str) -> str:
    if BEGIN not in text or END not in text:
        raise DataError(f"no figures markers ({BEGIN} ... {END})")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{block}\n{END}{tail}"


def record(
    data: Path, run: Path, machine: str, figure: str | None, text: str, command: str
) -> Path:
    """Files a benchmark's ``--json`` record as the current result of its figure on ``machine``."""
    figures, machines, _ = load(data)
    doc = json.loads(run.read_text())
    bench = doc.get("benchmark")
    mine = [f for f in figures if f["benchmark"] == bench]
    if not mine:
        raise DataError(f"{run}: benchmark {bench!r} has no figure in figures.json")
    if figure is None:
        if len(mine) > 1:
            names = ", ".join(repr(f["id"]) for f in mine)
            raise DataError(f"{bench} has several figures ({names}): name one with --figure")
        figure = mine[0]["id"]
    fig = next((f for f in mine if f["id"] == figure), None)
    if fig is None:
        raise DataError(f"figure {figure!r} is not one of {bench}'s")
    if machine not in machines:
        raise DataError(f"no machine {machine!r} in machines.json (add it there first)")
    if not fig.get("headline") and not text:
        raise DataError(f"figure {figure!r} has no headline: say what it shows with --text")
    env = doc.get("env", {})
    result = {
        "figure": figure,
        "benchmark": bench,
        "machine": machine,
        "torch": env.get("torch", ""),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "source": env.get("source", ""),
        "command": command or f"python benchmarks/{bench}.py --json {run.name}",
        "recorded_by": "tools/performance_table.py record",
        "text": text,
        "record": doc,
    }
    headline(fig, doc)  # the record must fit the figure's headline
    path = data / machine / f"{slug(figure)}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=ROOT / "docs" / "data" / "performance")
    p.add_argument("--doc", type=Path, default=ROOT / "docs" / "performance.md")
    p.add_argument("--check", action="store_true")
    sub = p.add_subparsers(dest="action")
    r = sub.add_parser("record", help="file a benchmark's --json record, then write the table")
    r.add_argument("run", type=Path)
    r.add_argument("--machine", required=True)
    r.add_argument("--figure", default=None)
    r.add_argument("--text", default="")
    r.add_argument("--command", default="")
    args = p.parse_args(argv)
    try:
        if args.action == "record":
            path = record(args.data, args.run, args.machine, args.figure, args.text, args.command)
            print(f"wrote {path}")
        text = args.doc.read_text()
        new = update(text, render(*load(args.data)))
    except (DataError, json.JSONDecodeError, OSError) as e:
        print(f"{args.doc}: {e}", file=sys.stderr)
        return 1
    if args.check:
        if new != text:
            print(
                f"{args.doc}: the figures block differs from {args.data} (edit the data, not the "
                f"block; python tools/performance_table.py writes it)",
                file=sys.stderr,
            )
            return 1
        return 0
    if new != text:
        args.doc.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
