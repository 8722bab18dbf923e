"""tools/performance_table.py: docs/performance.md's figures block is the one the checked-in
results give, a hand edit of it fails the check, and a benchmark's ``--json`` record is filed as a
result whose headline is computed from it."""

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
TOOL = ROOT / "tools" / "performance_table.py"
DATA = ROOT / "docs" / "data" / "performance"


def run_tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=60
    )


def block(text: str) -> list[str]:
    """The lines between the figures markers."""
    inner = text.split("<!-- performance figures: begin", 1)[1]
    return inner.split("<!-- performance figures: end", 1)[0].splitlines()


@pytest.fixture
def tree(tmp_path: Path) -> tuple[str, ...]:
    """``--doc`` and ``--data`` arguments for a copy of the document and its data."""
    shutil.copy2(ROOT / "docs" / "performance.md", tmp_path / "performance.md")
    shutil.copytree(DATA, tmp_path / "data")
    return ("--doc", str(tmp_path / "performance.md"), "--data", str(tmp_path / "data"))


def test_check_passes_on_the_tree():
    result = run_tool("--check")
    assert result.returncode == 0, result.stderr


def test_a_hand_edit_of_the_block_fails_the_check(tree: tuple[str, ...]):
    doc = Path(tree[1])
    text = doc.read_text()
    row = next(line for line in block(text) if line.startswith("| gpt_step, decode |"))
    doc.write_text(text.replace(row, row.replace("0.979", "0.999", 1)))
    result = run_tool("--check", *tree)
    assert result.returncode == 1
    assert "the figures block differs" in result.stderr
    assert run_tool(*tree).returncode == 0
    assert doc.read_text() == text


def fake_record(path: Path, benchmark: str, **results) -> Path:
    env = {"torch": "2.13.0+cpu", "source": "abc1234"}
    path.write_text(json.dumps({"benchmark": benchmark, "env": env, **results}))
    return path


def test_record_needs_a_figure_where_the_benchmark_has_several(tmp_path, tree):
    run = fake_record(tmp_path / "g.json", "gpt_step", decode={"ratio": 0.5})
    result = run_tool(*tree, "record", str(run), "--machine", "cpu-2")
    assert result.returncode == 1
    assert "several figures ('gpt_step, training', 'gpt_step, decode')" in result.stderr
    ok = run_tool(*tree, "record", str(run), "--machine", "cpu-2", "--figure", "gpt_step, decode")
    assert ok.returncode == 0, ok.stderr
    row = next(line for line in block(Path(tree[1]).read_text()) if "gpt_step, decode" in line)
    cpu_cell = row.rsplit(" | ", 1)[-1]  # the last column: CPU/sim
    assert cpu_cell.startswith("**0.500** (abc1234, ") and cpu_cell.endswith("torch 2.13.0+cpu) |")
    assert run_tool("--check", *tree).returncode == 0


def test_record_refuses_a_record_that_does_not_fit_and_a_figure_without_headline(tmp_path, tree):
    bad = fake_record(tmp_path / "m.json", "mlp_step", rows=[])
    result = run_tool(*tree, "record", str(bad), "--machine", "cpu-2")
    assert result.returncode == 1 and "does not fit the record" in result.stderr
    compiled = fake_record(tmp_path / "c.json", "compile", times={})
    result = run_tool(*tree, "record", str(compiled), "--machine", "cpu-2")
    assert result.returncode == 1 and "say what it shows with --text" in result.stderr
    assert run_tool("--check", *tree).returncode == 0  # nothing was filed


def test_a_benchmark_run_is_filed_with_its_computed_headline(tmp_path, tree):
    out = tmp_path / "copy.json"
    env = {**os.environ, "FLAGOS_VENDOR": "sim"}
    bench = ROOT / "benchmarks" / "copy_bandwidth.py"
    run = subprocess.run(
        [sys.executable, str(bench), "--quick", "--native", "cpu", "--json", str(out)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    filed = run_tool(*tree, "record", str(out), "--machine", "cpu-2")
    assert filed.returncode == 0, filed.stderr
    summary = json.loads(out.read_text())["summary"]
    row = next(line for line in block(Path(tree[1]).read_text()) if "| copy_bandwidth |" in line)
    assert f"**lowest ratio {summary['min_ratio']:.2f}; " in row.rsplit(" | ", 2)[-1]
    result = json.loads((Path(tree[3]) / "cpu-2" / "copy_bandwidth.json").read_text())
    assert result["record"]["benchmark"] == "copy_bandwidth" and result["torch"]
