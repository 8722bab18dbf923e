"""tools/vendor_table.py: the vendor rows of docs/index.md and the vendors' pytest markers follow
packages/vendors.toml, and every vendor package has the common skeleton."""

from __future__ import annotations

import importlib.metadata
import inspect
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
    """The table and the files holding its blocks (with the vendors' environment rows)."""
    rows = [
        f"{e['path']}/{vendor_table.ENVIRONMENT_ROWS}" for e in vendor_table.vendors(ROOT).values()
    ]
    for rel in ("packages/vendors.toml", *vendor_table.blocks(ROOT), *rows):
        if (ROOT / rel).is_file():
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
        + '\n[vendor.mlu]\npath = "packages/torch_fl_mlu"\ntag = "mlu-v"\ncompiled = true\n'
        'doc = "docs/mlu.md"\nsummary = "Cambricon MLUs (`torch-fl-mlu`)"\n'
    )
    stale = run_tool("--check", root=tree)
    assert stale.returncode == 1
    assert "docs/index.md: stale" in stale.stderr and "pyproject.toml: stale" in stale.stderr
    assert run_tool(root=tree).returncode == 0
    assert (
        "| [mlu.md](mlu.md) | Cambricon MLUs (`torch-fl-mlu`) |"
        in (tree / "docs" / "index.md").read_text()
    )
    assert '"mlu: torch-fl-mlu package tests' in (tree / "pyproject.toml").read_text()
    assert "| `packages/torch_fl_mlu/` | Cambricon MLUs" in (tree / "README.md").read_text()
    assert "| mlu | its package tests, on sim" in (tree / "docs" / "contracts.md").read_text()
    validation = tree / vendor_table._core_path(ROOT) / vendor_table.VALIDATION
    assert '"musa", "mlu")' in validation.read_text()
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


# The skeleton every vendor package shares, so the next vendor starts from a known shape (a native
# vendor registers FlagGems through core's NativeVendor, so flaggems.py is not part of it).
SKELETON = ("vendor.py", "routing/generate.py", "routing/gaps.json")


@pytest.mark.parametrize("name", sorted(vendor_table.vendors(ROOT)))
def test_every_vendor_package_has_the_skeleton(name: str):
    entry = vendor_table.vendors(ROOT)[name]
    src = ROOT / entry["path"] / "src" / f"torch_fl_{name}"
    missing = [rel for rel in SKELETON if not (src / rel).is_file()]
    assert not missing, f"{src} lacks {missing}"
    conf = list((src / "routes").glob(f"{name}*.conf"))
    assert conf, f"{src}/routes has no {name}.conf"
    assert re.search(r"\bvendor\b", (src / "vendor.py").read_text())


def _vendor_rows(name: str) -> str:
    entry = vendor_table.vendors(ROOT)[name]
    rows = ROOT / entry["path"] / vendor_table.ENVIRONMENT_ROWS
    return rows.read_text(encoding="utf-8") if rows.is_file() else ""


@pytest.mark.parametrize("name", sorted(vendor_table.vendors(ROOT)))
def test_a_vendor_documents_its_variables_and_core_knows_them(name: str):
    """The ``FLAGOS_*`` variables of a vendor's environment rows are its ``FLAGOS_<NAME>_*`` family
    and its ``Vendor.environment`` (where the package is installed): so core does not warn about
    them, and warns about a misspelling of one."""
    from torch_fl.routing import environment
    from torch_fl.vendors import discovery

    first_cells = [row.split("|")[1] for row in _vendor_rows(name).splitlines() if row[:1] == "|"]
    documented = set(re.findall(r"`(FLAGOS_[A-Z0-9_]+?)(?:=[^`]*)?`", " ".join(first_cells)))
    family = f"FLAGOS_{name.upper()}_"
    assert all(v.startswith(family) for v in documented), (name, documented)
    eps = importlib.metadata.entry_points(group=discovery.ENTRY_POINT_GROUP)
    if not any(ep.name == name for ep in eps):
        pytest.skip(f"torch-fl-{name} is not installed here: its Vendor.environment is unknown")
    vendor = discovery.installed()[name].vendor
    assert vendor is not None
    installed = Path(inspect.getfile(type(vendor)))
    source = ROOT / vendor_table.vendors(ROOT)[name]["path"] / "src" / installed.parent.name
    if installed.read_bytes() != (source / installed.name).read_bytes():
        pytest.skip(f"the installed torch-fl-{name} is not this tree's (reinstall it to check)")
    assert set(vendor.environment) == documented, name
    assert all(v.startswith(family) for v in vendor.environment)
    env = {v: "1" for v in documented}
    assert environment.unknown_variables(env) == []
    if documented:
        one = sorted(documented)[0]
        misspelled = one[:-1] + ("X" if one[-1] != "X" else "Y")
        assert environment.unknown_variables({misspelled: "1"}) == [(misspelled, one)]
