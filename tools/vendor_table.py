"""Keeps the files that list the vendors in step with packages/vendors.toml.

    python tools/vendor_table.py          rewrite the generated blocks
    python tools/vendor_table.py --check  exit 1 naming every stale block; writes nothing

The blocks, each between a ``vendor table: begin`` and a ``vendor table: end`` marker line:

- docs/index.md: one row per vendor (its ``doc`` and ``summary``);
- README.md: the vendor packages (``path``, ``summary``, ``doc``);
- docs/environment.md: the vendors' variables, the rows of each package's ``environment.md``
  (a vendor documents there what its package, its build and its emulator read);
- docs/contracts.md: where each vendor's contract suites run (``contracts``);
- pyproject.toml: one pytest marker per vendor (``<name>: torch-fl-<name> package tests``), the
  marker its package's tests carry;
- core's ``torch_fl/routing/validation.py``: the vendors' names, backends a route table may name
  where that vendor is not installed.

So a new vendor is its package plus one entry in the table, and a run of this tool.

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


#: Core's routing validation, relative to core's package directory.
VALIDATION = "src/torch_fl/routing/validation.py"
#: A vendor package's rows of docs/environment.md, relative to its directory.
ENVIRONMENT_ROWS = "environment.md"
#: ruff's line length (the generated Python stays `ruff format` clean).
LINE_LENGTH = 100


def vendors(root: Path) -> dict[str, dict]:
    table = _load_toml(root / TABLE).get("vendor", {})
    for name, entry in table.items():
        for field in ("path", "doc", "summary"):
            if not isinstance(entry.get(field), str):
                raise ToolError(f"{TABLE} [vendor.{name}]: '{field}' is missing or not a string")
    return table


def _core_path(root: Path) -> str:
    core = _load_toml(root / TABLE).get("core", {})
    if not isinstance(core.get("path"), str):
        raise ToolError(f"{TABLE} [core]: 'path' is missing or not a string")
    return core["path"]


def _index_rows(table: dict[str, dict]) -> list[str]:
    rows = ["| page | for |", "|---|---|"]
    for entry in table.values():
        doc = Path(entry["doc"]).name  # docs/index.md links beside itself
        rows.append(f"| [{doc}]({doc}) | {entry['summary']} |")
    return rows


def _readme_rows(table: dict[str, dict]) -> list[str]:
    rows = ["| vendor package | for |", "|---|---|"]
    for entry in table.values():
        rows.append(
            f"| `{entry['path']}/` | {entry['summary']} ([{entry['doc']}]({entry['doc']})) |"
        )
    return rows


def _environment_rows(root: Path, table: dict[str, dict]) -> list[str]:
    rows = ["| variable | read by | meaning |", "|---|---|---|"]
    for entry in table.values():
        path = root / entry["path"] / ENVIRONMENT_ROWS
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            rows.extend(line.rstrip() for line in text.splitlines() if line.startswith("|"))
    return rows


def _contract_rows(table: dict[str, dict]) -> list[str]:
    rows = [
        "| vendor | in CI (`nox -s tests`) | everything on the vendor |",
        "|---|---|---|",
    ]
    for name, entry in table.items():
        if entry.get("contracts") == "ci":
            ci = "its package tests, then the contract suites on its emulator less `vendor_neutral`"
            where = f"`nox -s test-{name}`"
        else:
            ci = "its package tests, on sim (its contract suites need the device)"
            where = f"`nox -s test-{name}` where the device is present"
        rows.append(f"| {name} | {ci} | {where} |")
    return rows


def _python_tuple(name: str, values: list[str]) -> list[str]:
    """``name = ("a", "b")`` as ruff format writes it."""
    items = [f'"{v}"' for v in values]
    one = f"{name} = ({', '.join(items)}{',' if len(items) == 1 else ''})"
    if len(one) <= LINE_LENGTH:
        return [one]
    return [f"{name} = (", *(f"    {item}," for item in items), ")"]


def _marker_lines(table: dict[str, dict]) -> list[str]:
    return [
        f'  "{name}: torch-fl-{name} package tests (on its emulator where it has one)",'
        for name in table
    ]


def blocks(root: Path) -> dict[str, list[str]]:
    table = vendors(root)
    return {
        "docs/index.md": _index_rows(table),
        "README.md": _readme_rows(table),
        "docs/environment.md": _environment_rows(root, table),
        "docs/contracts.md": _contract_rows(table),
        "pyproject.toml": _marker_lines(table),
        f"{_core_path(root)}/{VALIDATION}": _python_tuple("VENDOR_BACKENDS", list(table)),
    }


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
