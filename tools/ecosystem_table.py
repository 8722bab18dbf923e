"""Writes the table of docs/ecosystem.md from the results the ecosystem tests record.

``tests/ecosystem`` records, with ``FLAGOS_TEST_ECOSYSTEM_DIR`` set, one JSON file per vendor and
pytest worker (library, its installed version, the case, works/fails/skipped). This tool merges
them into one Markdown table (a row per library, version and case; a column per vendor) and puts
it between the table markers of docs/ecosystem.md.

    python tools/ecosystem_table.py [--results .nox/ecosystem] [--doc docs/ecosystem.md] [--check]

``--check`` changes nothing and exits 1 when the document's table differs (``nox -s tests`` runs
it after the suites).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN = "<!-- ecosystem table: begin (tools/ecosystem_table.py writes it) -->"
END = "<!-- ecosystem table: end -->"
VENDOR_ORDER = ("sim", "gcu", "ascend", "cuda", "dcu")


def load(results: Path) -> dict[str, dict[tuple[str, str, str], str]]:
    """vendor -> (library, version, case) -> outcome."""
    table: dict[str, dict[tuple[str, str, str], str]] = {}
    for path in sorted(results.glob("*.json")):
        doc = json.loads(path.read_text())
        rows = table.setdefault(doc["vendor"], {})
        for r in doc["results"]:
            rows[(r["library"], r["version"], r["case"])] = r["outcome"]
    return table


def render(table: dict[str, dict[tuple[str, str, str], str]]) -> str:
    vendors = sorted(table, key=lambda v: (VENDOR_ORDER + (v,)).index(v))
    keys = sorted({k for rows in table.values() for k in rows})
    lines = [
        "| library | version | case | " + " | ".join(vendors) + " |",
        "|---|---|---|" + "---|" * len(vendors),
    ]
    for library, version, case in keys:
        cells = [table[v].get((library, version, case), "not run") for v in vendors]
        lines.append(f"| {library} | {version} | {case} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=ROOT / ".nox" / "ecosystem")
    p.add_argument("--doc", type=Path, default=ROOT / "docs" / "ecosystem.md")
    p.add_argument("--check", action="store_true")
    args = p.parse_args(argv)
    table = load(args.results)
    if not table:
        print(f"no ecosystem results in {args.results}", file=sys.stderr)
        return 1
    text = args.doc.read_text()
    if BEGIN not in text or END not in text:
        print(f"{args.doc} has no table markers ({BEGIN} ... {END})", file=sys.stderr)
        return 1
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{render(table)}\n{END}{tail}"
    if args.check:
        if new != text:
            print(
                f"{args.doc}: the table differs from these results "
                f"(python tools/ecosystem_table.py --results {args.results})",
                file=sys.stderr,
            )
            return 1
        return 0
    args.doc.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
