"""A new vendor is its package plus one entry in packages/vendors.toml.

A copy of the repository's tooling gets a copy of the gcu package under a made-up name (``mlu``)
and one table entry, and nothing else is edited by hand: tools/vendor_table.py writes the
generated blocks and its ``--check`` then passes, the release workflows follow, the noxfile
gives the vendor its sessions, and core, once the package is installed, knows its name as a
backend for route loading and validation.
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch_fl  # noqa: F401  (sets up flagos)
from test_nox_sessions import RecordingSession, load_noxfile
from torch_fl.routing import validation
from torch_fl.routing.route_table import parse_text
from torch_fl.vendors import discovery

pytestmark = pytest.mark.tooling

ROOT = Path(__file__).resolve().parents[3]
TOOLS = ROOT / "tools"
sys.path.insert(0, str(TOOLS))
import vendor_table  # noqa: E402

TEMPLATE = "gcu"
NEW = "mlu"
ENTRY = f"""
[vendor.{NEW}]
path = "packages/torch_fl_{NEW}"
tag = "{NEW}-v"
compiled = true
sdk_env = "MLU_HOME"
emulator = "emulator"
contracts = "ci"
doc = "docs/{NEW}.md"
summary = "Made-up GPUs (`torch-fl-{NEW}`): a copy of torch-fl-{TEMPLATE} under another name"
"""
#: Never copied: build output, the emulator's install, caches.
SKIP = shutil.ignore_patterns("build", "prefix", "__pycache__", "*.so", "*.pyc")


def _rename(text: str) -> str:
    return (
        text.replace(TEMPLATE, NEW)
        .replace(TEMPLATE.upper(), NEW.upper())
        .replace(TEMPLATE.capitalize(), NEW.capitalize())
    )


def _copy_package(src: Path, dest: Path) -> None:
    """The template package under the new name: paths and contents renamed."""
    staging = dest.parent / f".{dest.name}.staging"
    shutil.copytree(src, staging, ignore=SKIP)
    for path in sorted(staging.rglob("*")):
        target = dest / _rename(str(path.relative_to(staging)))
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            target.write_text(_rename(path.read_text(encoding="utf-8")), encoding="utf-8")
        except UnicodeDecodeError:
            shutil.copy2(path, target)
    shutil.rmtree(staging)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """The repository's tooling and generated-block files, the vendor packages' table-facing
    files, the new package, and the table with one more entry."""
    root = tmp_path_factory.mktemp("repo")
    table = vendor_table.vendors(ROOT)
    files = [
        "noxfile.py",
        "packages/vendors.toml",
        "tools/vendor_table.py",
        "tools/release_workflows.py",
        *vendor_table.blocks(ROOT),
    ]
    for entry in [{"path": "packages/torch_fl_core"}, *table.values()]:
        files += [f"{entry['path']}/pyproject.toml", f"{entry['path']}/environment.md"]
    files += [str(p.relative_to(ROOT)) for p in (ROOT / ".github" / "workflows").glob("*.yml")]
    for rel in files:
        if (ROOT / rel).is_file():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, root / rel)
    _copy_package(ROOT / table[TEMPLATE]["path"], root / "packages" / f"torch_fl_{NEW}")
    with (root / "packages" / "vendors.toml").open("a", encoding="utf-8") as out:
        out.write(ENTRY)
    return root


def _tool(root: Path, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(root / "tools" / tool), "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_tools_write_its_rows_and_then_check_clean(repo: Path):
    stale = _tool(repo, "vendor_table.py", "--check")
    assert stale.returncode == 1 and "README.md: stale" in stale.stderr, stale.stderr
    assert _tool(repo, "vendor_table.py").returncode == 0
    check = _tool(repo, "vendor_table.py", "--check")
    assert check.returncode == 0, check.stderr
    assert f"| `packages/torch_fl_{NEW}/` |" in (repo / "README.md").read_text()
    assert (
        f"| {NEW} | its package tests, then the contract suites"
        in (repo / "docs" / "contracts.md").read_text()
    )
    # The copied package's environment rows are in docs/environment.md's vendor block.
    rows = (repo / f"packages/torch_fl_{NEW}/environment.md").read_text().splitlines()
    env_doc = (repo / "docs" / "environment.md").read_text()
    assert all(row in env_doc for row in rows if row.startswith("|"))
    validation_py = repo / "packages/torch_fl_core/src/torch_fl/routing/validation.py"
    assert re.search(rf'VENDOR_BACKENDS = \([^)]*"{NEW}"', validation_py.read_text())

    assert _tool(repo, "release_workflows.py").returncode == 0
    check = _tool(repo, "release_workflows.py", "--check")
    assert check.returncode == 0, check.stderr
    assert (repo / ".github" / "workflows" / f"release-{NEW}.yml").is_file()


def test_the_noxfile_gives_it_its_sessions(repo: Path, monkeypatch):
    noxfile = load_noxfile(repo / "noxfile.py", monkeypatch)
    assert {f"build-{NEW}", f"test-{NEW}"} <= set(noxfile.SESSIONS)
    assert noxfile.VENDORS[NEW]["path"] == f"packages/torch_fl_{NEW}"
    assert noxfile._key_paths(NEW)[0] == f"packages/torch_fl_{NEW}"
    session = RecordingSession()
    session.posargs = [NEW]
    assert noxfile._named(session) == [NEW]


@pytest.fixture
def installed(repo: Path, tmp_path: Path, monkeypatch):
    """The new package installed the way pip would leave it: its sources importable and its
    distribution's entry point in the ``torch_fl.vendors`` group."""
    package = repo / "packages" / f"torch_fl_{NEW}"
    site = tmp_path / "site"
    info = site / f"torch_fl_{NEW}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: torch-fl-{NEW}\nVersion: 0.1.0\n", encoding="utf-8"
    )
    project = (package / "pyproject.toml").read_text()
    entry = re.search(rf'^{NEW} = "([^"]+)"', project, re.M)
    assert entry, f"the copied pyproject.toml declares no {NEW} entry point"
    (info / "entry_points.txt").write_text(
        f"[{discovery.ENTRY_POINT_GROUP}]\n{NEW} = {entry.group(1)}\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(package / "src"))
    importlib.invalidate_caches()
    validation.installed_vendor_names.cache_clear()
    yield package
    validation.installed_vendor_names.cache_clear()
    for name in [
        m for m in sys.modules if m == f"torch_fl_{NEW}" or m.startswith(f"torch_fl_{NEW}.")
    ]:
        del sys.modules[name]


class _Catalog(validation.Catalog):
    """This process's operators; the new vendor registered (a kernel for every overload)."""

    def core_native_ops(self) -> frozenset[str]:
        return frozenset()

    def backends(self) -> list[str]:
        return ["composite", "cpu", NEW]

    def has_kernel(self, backend: str, op: str) -> bool:
        return True


def test_core_knows_it_once_installed(installed: Path):
    assert NEW in validation.installed_vendor_names()
    assert validation.possible_backend(NEW)
    # Absent here (not the active vendor): a preference list passes over it, named as a vendor.
    catalog = validation.RuntimeCatalog()
    rule = parse_text(f"abs = {NEW}, cpu\n").rules[0]
    resolved, problem = validation.resolve_rule(rule, catalog)
    assert problem is None and resolved.backend == "cpu"
    assert f"vendor '{NEW}' is not the active one" in resolved.skipped_choices[0][1]
    # Its route table (the copy's) loads where it is registered.
    conf = installed / "src" / f"torch_fl_{NEW}" / "routes" / f"{NEW}.conf"
    table = validation.validate(parse_text(conf.read_text(), path=conf), _Catalog())
    assert any(r.backend == NEW for r in table.rules)
    # The vendor object loads through discovery, under its entry-point name.
    found = discovery.installed()[NEW]
    assert found.load_error == "" and found.vendor.name == NEW
