"""tools/contracts_table.py: docs/contracts.md's status block is the one the recorded runs give,
a hand edit of it fails the check, and a run of the suites records a row the tool renders."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.tooling

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "contracts_table.py"
DATA = ROOT / "docs" / "data" / "contracts"


def status_block(text: str) -> list[str]:
    """The lines between the status markers."""
    return (
        text.split("<!-- contracts status: begin", 1)[1]
        .split("<!-- contracts status: end")[0]
        .splitlines()
    )


def run_tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the document and its data."""
    doc = tmp_path / "contracts.md"
    shutil.copy2(ROOT / "docs" / "contracts.md", doc)
    shutil.copytree(DATA, tmp_path / "data")
    return doc, tmp_path / "data"


def test_check_passes_on_the_tree():
    result = run_tool("--check")
    assert result.returncode == 0, result.stderr


def test_a_hand_edit_of_the_block_fails_the_check(tree: tuple[Path, Path]):
    doc, data = tree
    text = doc.read_text()
    row = next(line for line in status_block(text) if line.startswith("| `test_copy.py` |"))
    doc.write_text(text.replace(row, row.replace("passed", "passed, 1 failed", 1)))
    result = run_tool("--check", "--doc", str(doc), "--data", str(data))
    assert result.returncode == 1
    assert "the status block differs" in result.stderr
    # Writing puts the data's figures back.
    assert run_tool("--doc", str(doc), "--data", str(data)).returncode == 0
    assert doc.read_text() == text


def test_new_data_makes_the_block_stale_until_written(tree: tuple[Path, Path]):
    doc, data = tree
    row = json.loads((data / "gcu-cpu-2.json").read_text())
    row.update(machine="cpu-64", date="2031-01-01", suites={"test_copy.py": {"passed": 7}})
    row["totals"] = {"passed": 7}
    (data / "gcu-cpu-64.json").write_text(json.dumps(row))
    args = ("--doc", str(doc), "--data", str(data))
    assert run_tool("--check", *args).returncode == 1
    assert run_tool(*args).returncode == 0
    assert run_tool("--check", *args).returncode == 0
    assert "gcu-emulated, cpu-64" in doc.read_text()


def test_a_row_filed_under_another_name_is_refused(tree: tuple[Path, Path]):
    doc, data = tree
    (data / "sim-cpu-2.json").rename(data / "sim-cpu-9.json")
    result = run_tool("--check", "--doc", str(doc), "--data", str(data))
    assert result.returncode == 1
    assert "holds sim-cpu-2, not sim-cpu-9" in result.stderr


def test_a_run_of_the_suites_records_a_row_the_tool_renders(tree: tuple[Path, Path]):
    doc, data = tree
    env = {
        **os.environ,
        "FLAGOS_VENDOR": "sim",
        "FLAGOS_TEST_MACHINE": "testbox",
        "FLAGOS_TEST_CONTRACTS_DIR": str(data),
    }
    suite = "tests/contract/test_graphs.py"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", suite, "-q", "-p", "no:cacheprovider", "-p", "no:xdist"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    row = json.loads((data / "sim-testbox.json").read_text())
    graphs = row["suites"]["test_graphs.py"]
    assert graphs["passed"] >= 1 and graphs["skipped"] >= 1
    assert sum(graphs["skip_reasons"].values()) == graphs["skipped"]
    assert row["totals"]["passed"] == graphs["passed"] and row["command"].endswith("no:xdist")
    args = ("--doc", str(doc), "--data", str(data))
    assert run_tool(*args).returncode == 0
    text = doc.read_text()
    header = next(line for line in status_block(text) if line.startswith("| suite |"))
    assert "| sim, testbox |" in header
    assert f"{graphs['passed']} passed, {graphs['skipped']} skipped" in text
