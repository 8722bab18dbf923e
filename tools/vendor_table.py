"""Keeps the files that list the vendors in step with packages/vendors.toml.

    python tools/vendor_table.py          rewrite the generated blocks
    python tools/vendor_table.py --check  exit 1 naming every stale block; writes nothing

The blocks, each between a ``vendor table: begin`` and a ``vendor table: end`` marker line:

- docs/index.md: one row per vendor (its ``doc`` and ``summary``);
- pyproject.toml: one pytest marker per vendor (``<name>: torch-fl-<name> package tests``), the
  marker its package's tests carry.

The release workflows have their own tool (tools/release_workflows.py). ``--root DIR`` points at
another checkout. Standard library only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from release_workflows import TABLE, ToolError, _load_toml  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BEGIN = "vendor table: begin"
END = "vendor table: end"


def vendors(root: Path) -> dict[str, dict]:
    table = _load_toml(root / TABLE).get("vendor", {})
    for name, entry in table.items():
        for field in ("doc", "summary"):
            if not isinstance(entry.get(field), str):
                raise ToolError(f"{TABLE} [vendor.{name}]: '{field}' is missing or not a string")
    return table


def _index_rows(table: dict[str, dict]) -> list[str]:
    rows = ["| page | for |", "|---|---|"]
    for entry in table.values():
        doc = Path(entry["doc"]).name  # docs/index.md links beside itself
        rows.append(f"| [{doc}]({doc}) | {entry['summary']} |")
    return rows


def _marker_lines(table: dict[str, dict]) -> list[str]:
    return [
        f'  "{name}: torch-fl-{name} package tests (on its emulator where it has one)",'
        for name in table
    ]


def blocks(root: Path) -> dict[str, list[str]]:
    table = vendors(root)
    return {"docs/index.md": _index_rows(table), "pyproject.toml": _marker_lines(table)}


def _replace(text: str, rel: str, lines: list[str]) -> str:
    src = text.splitlines(keepends=True)
    begin = [i for i, line in enumerate(src) if BEGIN in line]
    end = [i for i, line in enumerate(src) if END in line]
    if len(begin) != 1 or len(end) != 1 or end[0] < begin[0]:
        raise ToolError(f"{rel}: needs exactly one '{BEGIN}' line followed by one '{END}' line")
    body = [line + "\n" for line in lines]
    return "".join(src[: begin[0] + 1] + body + src[end[0] :])


def run(root: Path, check: bool) -> int:
    stale = []
    for rel, lines in blocks(root).items():
        path = root / rel
        text = path.read_text(encoding="utf-8")
        new = _replace(text, rel, lines)
        if new == text:
            continue
        stale.append(rel)
        if not check:
            path.write_text(new, encoding="utf-8")
            print(f"{rel}: written")
    if check and stale:
        for rel in stale:
            print(f"{rel}: stale (run python tools/vendor_table.py)", file=sys.stderr)
        return 1
    if not stale:
        print(f"{len(blocks(root))} files match {TABLE}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--root", type=Path, default=ROOT)
    args = parser.parse_args(argv)
    try:
        return run(args.root, args.check)
    except ToolError as exc:
        print(f"vendor_table: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
