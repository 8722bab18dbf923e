"""The ascend vendor as a user meets it: the toolkit found at run time (or one clear error), a
relocatable wheel, ``python -m torch_fl_ascend``, torch_npu refused, and which collective library
flagos groups use (``FLAGOS_LOG=dist``)."""

from __future__ import annotations

import datetime
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from torch_fl_ascend import library_dir

pytestmark = pytest.mark.ascend

LIBRARIES = ("libtorch_fl_ascend_runtime.so", "libtorch_fl_ascend_kernels.so")
TOUCH = "import torch; torch.zeros(1, device='flagos')"
TOOLKIT_VARS = ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME")


def _installed(name: str) -> Path:
    path = library_dir() / name
    if not path.is_file():
        pytest.fail(f"{path} is missing: torch-fl-ascend is not built/installed")
    return path


def _dynamic(path: Path) -> dict[str, list[str]]:
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf (binutils) is not installed: the libraries' rpaths cannot be read")
    out = subprocess.run(
        [readelf, "-d", "-W", str(path)], capture_output=True, text=True, check=True
    ).stdout
    found: dict[str, list[str]] = {"NEEDED": [], "RPATH": [], "RUNPATH": []}
    for tag, value in re.findall(r"\((NEEDED|RPATH|RUNPATH)\)\s+[^\[]*\[([^\]]*)\]", out):
        found[tag] += [value] if tag == "NEEDED" else value.split(":")
    return found


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", *TOOLKIT_VARS)}
    env.update({"FLAGOS_VENDOR": "ascend", **extra})
    return env


def _run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )


@pytest.fixture
def toolkit_lib(emu) -> Path:
    from torch_fl_ascend import sdk

    return Path(sdk.load().paths["libascendcl.so"]).parent


@pytest.mark.parametrize("name", LIBRARIES)
def test_the_libraries_carry_only_origin_relative_search_paths(name):
    dyn = _dynamic(_installed(name))
    entries = dyn["RPATH"] + dyn["RUNPATH"]
    absolute = [e for e in entries if not re.match(r"\$(ORIGIN|\{ORIGIN\})(/|$)", e)]
    assert not absolute, f"{name} has search paths that are not $ORIGIN-relative: {absolute}"
    assert "libascendcl.so" in dyn["NEEDED"], dyn["NEEDED"]


def test_a_missing_toolkit_is_one_error_naming_the_library_the_places_and_the_fix(tmp_path):
    _installed(LIBRARIES[0])
    home = tmp_path / "no-toolkit"
    home.mkdir()
    env = _env(tmp_path, ASCEND_TOOLKIT_HOME=str(home))
    if _run("import ctypes; ctypes.CDLL('libascendcl.so')", env).returncode == 0:
        pytest.skip("a CANN toolkit is on this machine's loader path: it cannot be missing")
    proc = _run(TOUCH, env)
    assert proc.returncode != 0, proc.stdout
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError: flagos: no device found. The vendor 'ascend'"), last
    assert (
        f"the CANN toolkit library libascendcl.so was not found: looked in {home}/lib64 and "
        f"{home}/lib (ASCEND_TOOLKIT_HOME={home})"
    ) in last, last
    assert "export ASCEND_TOOLKIT_HOME=" in last
    assert "cannot open shared object file" not in proc.stderr


def test_ascend_home_is_the_second_place_and_the_toolkit_can_move(toolkit_lib, tmp_path):
    moved = tmp_path / "cann" / "lib64"
    moved.mkdir(parents=True)
    for lib in toolkit_lib.glob("*.so*"):
        shutil.copy2(lib, moved / lib.name)
    env = _env(tmp_path, ASCEND_HOME=str(moved.parent))
    code = (
        f"{TOUCH}; import torch_fl_ascend.sdk as s; x = torch.ones(3, device='flagos');"
        f"assert (x + x).cpu().tolist() == [2.0] * 3; l = s.loaded();"
        f"print(l.paths['libascendcl.so']); print(l.source)"
    )
    proc = _run(code, env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == [
        str(moved / "libascendcl.so"),
        f"ASCEND_HOME={moved.parent}",
    ]


def test_python_m_torch_fl_ascend_reports_the_build(toolkit_lib):
    proc = subprocess.run(
        [sys.executable, "-m", "torch_fl_ascend"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "ASCEND_TOOLKIT_HOME": str(toolkit_lib.parent)},
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "CANN toolkit loaded:" in out and "libopapi.so" in out, out
    match = re.search(r"ACLNN kernels: (\d+) aten overloads using (\d+) aclnn functions", out)
    assert match and int(match[1]) > 100 and int(match[2]) > 50, out
    assert "FlagGems backend: inactive" in out or "FlagGems backend: active" in out


def test_torch_npu_is_refused_with_the_ascend_vendor(toolkit_lib, tmp_path):
    fake = tmp_path / "torch_npu"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        "import torch\ntorch.utils.rename_privateuse1_backend('npu')\n"
    )
    search = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH", "")) if p)
    env = _env(tmp_path, ASCEND_TOOLKIT_HOME=str(toolkit_lib.parent), PYTHONPATH=search)
    after = _run(
        "import torch\ntry:\n    import torch_npu\nexcept ImportError as e:\n    print(e)\n"
        "print((torch.ones(2, device='flagos') * 2).cpu().tolist())",
        env,
    )
    assert after.returncode == 0, after.stderr[-3000:]
    assert "torch_npu" in after.stdout and "PrivateUse1" in after.stdout
    assert after.stdout.strip().endswith("[2.0, 2.0]")
    before = _run("import torch_npu", env)
    assert before.returncode != 0
    assert "torch_npu was imported first" in before.stderr


def test_without_the_collective_library_groups_say_why_and_run_staged_gloo(
    ascend, monkeypatch, capsys
):
    import torch
    import torch.distributed as dist
    import torch_fl
    from torch_fl import distributed as fld

    monkeypatch.setenv("FLAGOS_LOG", "dist")
    vendor = torch_fl.vendor()
    library = vendor.library
    monkeypatch.setattr(
        vendor,
        "library",
        lambda role: library(role).with_name("gone.so") if role == "collective" else library(role),
    )
    choice = fld.choose()
    assert choice.name == "gloo-staged", choice.describe()
    assert choice.skipped["vendor"] == "hccl: this torch-fl-ascend has no gone.so", choice.skipped
    pg = fld.ProcessGroupFlagos(
        dist.HashStore(), 0, 1, datetime.timedelta(seconds=10), choice=choice
    )
    t = torch.arange(4.0, device="flagos")
    pg.allreduce([t]).wait()
    assert t.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
    err = capsys.readouterr().err
    assert "tier gloo-staged" in err and "skipped vendor: hccl: " in err, err
