"""tools/vendor_table.py: the vendor rows of docs/index.md and the vendors' pytest markers follow
packages/vendors.toml, and every vendor package has the common skeleton."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.tooling

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "vendor_table.py"
sys.path.insert(0, str(ROOT / "tools"))
import vendor_table  # noqa: E402


def run_tool(*args: str, root: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOL), "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for rel in ("packages/vendors.toml", "docs/index.md", "pyproject.toml"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, tmp_path / rel)
    return tmp_path


def test_check_passes_on_the_tree():
    result = run_tool("--check")
    assert result.returncode == 0, result.stderr


def test_a_new_vendor_is_one_table_entry(tree: Path):
    table = tree / "packages" / "vendors.toml"
    table.write_text(
        table.read_text()
        + '\n[vendor.musa]\npath = "packages/torch_fl_musa"\ntag = "musa-v"\ncompiled = true\n'
        'doc = "docs/musa.md"\nsummary = "Moore Threads GPUs (`torch-fl-musa`)"\n'
    )
    stale = run_tool("--check", root=tree)
    assert stale.returncode == 1
    assert "docs/index.md: stale" in stale.stderr and "pyproject.toml: stale" in stale.stderr
    assert run_tool(root=tree).returncode == 0
    assert (
        "| [musa.md](musa.md) | Moore Threads GPUs (`torch-fl-musa`) |"
        in (tree / "docs" / "index.md").read_text()
    )
    assert '"musa: torch-fl-musa package tests' in (tree / "pyproject.toml").read_text()
    assert run_tool("--check", root=tree).returncode == 0


def test_an_entry_without_a_summary_is_refused(tree: Path):
    table = tree / "packages" / "vendors.toml"
    table.write_text(table.read_text() + '\n[vendor.x]\npath = "p"\ntag = "x-v"\ndoc = "d.md"\n')
    result = run_tool("--check", root=tree)
    assert result.returncode == 1
    assert "[vendor.x]: 'summary' is missing" in result.stderr


@pytest.mark.parametrize("name", sorted(vendor_table.vendors(ROOT)))
def test_every_vendor_doc_exists_and_its_tests_use_its_marker(name: str):
    entry = vendor_table.vendors(ROOT)[name]
    assert (ROOT / entry["doc"]).is_file(), f"{entry['doc']} is missing"
    tests = ROOT / entry["path"] / "tests"
    marked = [p for p in tests.glob("test_*.py") if f"pytest.mark.{name}" in p.read_text()]
    assert marked, f"no test module in {tests} carries pytest.mark.{name}"


# The skeleton every vendor package shares, so the next vendor starts from a known shape.
SKELETON = ("vendor.py", "flaggems.py", "routing/generate.py", "routing/gaps.json")


@pytest.mark.parametrize("name", sorted(vendor_table.vendors(ROOT)))
def test_every_vendor_package_has_the_skeleton(name: str):
    entry = vendor_table.vendors(ROOT)[name]
    src = ROOT / entry["path"] / "src" / f"torch_fl_{name}"
    missing = [rel for rel in SKELETON if not (src / rel).is_file()]
    assert not missing, f"{src} lacks {missing}"
    conf = list((src / "routes").glob(f"{name}*.conf"))
    assert conf, f"{src}/routes has no {name}.conf"
    assert re.search(r"\bvendor\b", (src / "vendor.py").read_text())
