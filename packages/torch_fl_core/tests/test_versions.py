"""Version compatibility checked at import (torch_fl.versions): a torch minor other than the one
the wheel was built for, a vendor package needing a newer core, and a vendor written for a vendor
API level this core does not serve each end in one error naming both versions and the fix."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import torch_fl
from torch_fl import versions

pytestmark = pytest.mark.versions


@pytest.mark.parametrize(
    ("version", "spec", "ok"),
    [
        ("0.1.0", ">=0.1,<0.2", True),
        ("0.2.0", ">=0.1,<0.2", False),
        ("0.1.5", "~=0.1.2", True),
        ("0.2.0", "~=0.1.2", False),
        ("2.13.0+cpu", ">=2.13,<2.14", True),
        ("2.10.1", "==2.10.*", True),
        ("2.11.0", "==2.10.*", False),
        ("1.0", "!=1.0.0", False),
        ("3.0", "", True),
        ("0.1.0", "===0.1.0", True),  # PEP 440 arbitrary equality: the exact string
        ("0.1.0", "=== 0.1.0", True),
        ("0.1", "===0.1.0", False),
        ("0.1.0+local", "===0.1.0", False),
    ],
)
def test_specifiers(version, spec, ok):
    assert versions.satisfies(version, spec) is ok


def test_the_installed_core_records_its_torch_minor():
    from torch_fl import _torch_build

    running = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    assert _torch_build.TORCH_MINOR == running
    import importlib.metadata

    requires = [r.replace(" ", "") for r in importlib.metadata.requires("torch-fl-core") or []]
    major, minor = (int(p) for p in running.split("."))
    torch_req = [r for r in requires if r.startswith("torch") and not r.startswith("torch-")]
    assert len(torch_req) == 1, requires
    assert set(torch_req[0][len("torch") :].split(",")) == {f">={running}", f"<{major}.{minor + 1}"}


def _run(code: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    full = {**os.environ, **env}
    return subprocess.run(
        [sys.executable, "-c", code], env=full, cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_another_torch_minor_is_one_clear_error(tmp_path):
    """A core built for torch 2.9 under this torch: the message names both and the fix, before
    any extension loads (no undefined-symbol error)."""
    package = Path(torch_fl.__file__).parent
    copy = tmp_path / "site" / "torch_fl"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "_torch_build.py").write_text('TORCH_VERSION = "2.9.1"\nTORCH_MINOR = "2.9"\n')
    env = {"PYTHONPATH": str(tmp_path / "site"), "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    proc = _run("import torch_fl", env, tmp_path)
    assert proc.returncode != 0
    assert (
        f"torch-fl-core {torch_fl.__version__} was built for torch 2.9, but this interpreter runs torch "
        in (proc.stderr)
    ), proc.stderr
    assert torch.__version__ in proc.stderr and "--no-build-isolation" in proc.stderr
    assert "undefined symbol" not in proc.stderr
    # Through `import torch` (the backend autoload), uncaught: the message alone, short.
    proc = _run("import torch", {**env, "TORCH_DEVICE_BACKEND_AUTOLOAD": "1"}, tmp_path)
    assert proc.returncode != 0
    assert "was built for torch 2.9" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 6, proc.stderr


def _fake_vendor(root: Path, *, api_level: object, requires: str) -> Path:
    """An installed distribution 'fakevendor' whose vendor 'fake' has the given level and
    torch-fl-core requirement."""
    site = root / "site"
    info = site / "fakevendor-0.3.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: fakevendor\nVersion: 0.3.0\nRequires-Dist: {requires}\n"
    )
    (info / "entry_points.txt").write_text("[torch_fl.vendors]\nfake = fakevendor:vendor\n")
    (site / "fakevendor.py").write_text(
        textwrap.dedent(
            f"""
            from torch_fl.vendors import Vendor
            from torch_fl.vendors.sim import SimVendor

            class Fake(SimVendor):
                name = "fake"
                api_level = {api_level!r}

            vendor = Fake()
            """
        )
    )
    return site


@pytest.mark.parametrize(
    ("api_level", "requires", "expected"),
    [
        (
            99,
            "torch-fl-core>=0.1",
            [
                "fakevendor 0.3.0 is written for torch-fl vendor API level 99",
                f"provides level {versions.API_LEVEL}",
                "pip install -U torch-fl-core",
            ],
        ),
        (
            0,
            "torch-fl-core>=0.1",
            ["vendor API level 0, which torch-fl-core", "no longer serves", "pip install -U"],
        ),
        (
            1,
            "torch-fl-core>=9.0,<10",
            [
                "fakevendor 0.3.0 requires torch-fl-core>=9.0,<10, but torch-fl-core "
                f"{torch_fl.__version__} is installed",
                "pip install 'torch-fl-core>=9.0,<10'",
            ],
        ),
    ],
    ids=["api-too-new", "api-too-old", "core-too-old"],
)
def test_a_vendor_this_core_does_not_serve_is_refused(tmp_path, api_level, requires, expected):
    site = _fake_vendor(tmp_path, api_level=api_level, requires=requires)
    env = {"PYTHONPATH": str(site), "FLAGOS_VENDOR": "fake"}
    proc = _run("import torch; torch.zeros(1, device='flagos')", env, tmp_path)
    assert proc.returncode != 0
    for text in expected:
        assert text in proc.stderr, proc.stderr
    # Choosing another vendor gets by (a broken package matters only when it is chosen).
    proc = _run("import torch; print(torch.zeros(2, device='flagos').sum().item())",
                {**env, "FLAGOS_VENDOR": "sim"}, tmp_path)  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.strip() == "0.0", proc.stderr


def test_a_vendor_within_range_is_accepted(tmp_path):
    site = _fake_vendor(tmp_path, api_level=versions.API_LEVEL, requires="torch-fl-core>=0.1")
    proc = _run(
        "import torch, torch_fl; print(torch_fl.vendor().name)",
        {"PYTHONPATH": str(site), "FLAGOS_VENDOR": "fake"},
        tmp_path,
    )
    assert proc.returncode == 0 and proc.stdout.strip().endswith("fake"), proc.stderr


@pytest.mark.parametrize("api_level", ["one", None, 1.5, True])
def test_an_api_level_that_is_not_an_int_is_refused_by_name(tmp_path, api_level):
    site = _fake_vendor(tmp_path, api_level=api_level, requires="torch-fl-core>=0.1")
    env = {"PYTHONPATH": str(site), "FLAGOS_VENDOR": "fake"}
    proc = _run("import torch; torch.zeros(1, device='flagos')", env, tmp_path)
    assert proc.returncode != 0
    expected = (
        f"fakevendor 0.3.0: vendor 'fake' declares api_level = {api_level!r}, but api_level "
        f"must be an int (the torch-fl vendor API level it is written for, "
        f"{versions.MIN_API_LEVEL}..{versions.API_LEVEL} here)"
    )
    assert expected in proc.stderr, proc.stderr
    assert "int()" not in proc.stderr, proc.stderr


def test_arbitrary_equality_with_the_installed_core_is_accepted(tmp_path):
    site = _fake_vendor(
        tmp_path, api_level=versions.API_LEVEL, requires=f"torch-fl-core==={torch_fl.__version__}"
    )
    proc = _run(
        "import torch, torch_fl; print(torch_fl.vendor().name)",
        {"PYTHONPATH": str(site), "FLAGOS_VENDOR": "fake"},
        tmp_path,
    )
    assert proc.returncode == 0 and proc.stdout.strip().endswith("fake"), proc.stderr
