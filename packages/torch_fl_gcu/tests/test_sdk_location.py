"""The installed package is relocatable: its libraries carry only ``$ORIGIN``-relative rpaths, and
the TopsRider SDK is found at run time (``$TOPS_HOME/lib``, else ``/opt/tops/lib``, else the loader
path), with one clear error when it is nowhere."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from torch_fl_gcu import library_dir

LIBRARIES = ("libtorch_fl_gcu_runtime.so", "libtorch_fl_gcu_kernels.so")
TOUCH = "import torch; torch.zeros(1, device='flagos')"


def _dynamic(path: Path) -> dict[str, list[str]]:
    """NEEDED, RPATH and RUNPATH of ``path`` (``readelf -d``); search paths split on ``:``."""
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


def _installed(name: str) -> Path:
    path = library_dir() / name
    if not path.is_file():
        pytest.fail(f"{path} is missing: torch-fl-gcu is not built/installed")
    return path


@pytest.mark.parametrize("name", LIBRARIES)
def test_the_libraries_carry_only_origin_relative_search_paths(name):
    dyn = _dynamic(_installed(name))
    entries = dyn["RPATH"] + dyn["RUNPATH"]
    absolute = [e for e in entries if not re.match(r"\$(ORIGIN|\{ORIGIN\})(/|$)", e)]
    assert not absolute, f"{name} has search paths that are not $ORIGIN-relative: {absolute}"
    assert not [n for n in dyn["NEEDED"] if "/" in n], f"{name} needs a library by path"


def test_the_kernels_find_the_runtime_beside_them_and_torch_in_site_packages():
    dyn = _dynamic(_installed("libtorch_fl_gcu_kernels.so"))
    assert "libtorch_fl_gcu_runtime.so" in dyn["NEEDED"]
    assert "$ORIGIN" in dyn["RUNPATH"] + dyn["RPATH"]
    torch_lib = [e for e in dyn["RUNPATH"] + dyn["RPATH"] if e.endswith("/torch/lib")]
    assert torch_lib, dyn
    resolved = Path(torch_lib[0].replace("$ORIGIN", str(library_dir())))
    assert (resolved / "libc10.so").is_file(), f"{torch_lib[0]} does not reach torch's libraries"


def _env_without_sdk(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env.update({"FLAGOS_VENDOR": "gcu", "TOPS_HOME": str(tmp_path / "no-sdk"), **extra})
    (tmp_path / "no-sdk").mkdir(exist_ok=True)
    return env


def _run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )


def _require_sdk_off_the_loader_path(env: dict[str, str]) -> None:
    probe = _run("import ctypes; ctypes.CDLL('libtopsrt.so')", env)
    if probe.returncode == 0:
        pytest.skip("a TopsRider SDK is on this machine's loader path: the SDK cannot be missing")


def test_a_missing_sdk_is_one_error_naming_the_library_the_places_and_the_fix(tmp_path):
    _installed("libtorch_fl_gcu_runtime.so")
    env = _env_without_sdk(tmp_path)
    _require_sdk_off_the_loader_path(env)
    home = env["TOPS_HOME"]
    proc = _run(TOUCH, env)
    assert proc.returncode != 0, proc.stdout
    err = proc.stderr
    last = err.strip().splitlines()[-1]
    assert last.startswith("RuntimeError: flagos: no device found. The vendor 'gcu'"), err
    expected = (
        f"the TopsRider SDK library libtopsrt.so was not found: looked in {home}/lib and "
        f"{home}/lib64 (TOPS_HOME={home}) and on the dynamic loader path (LD_LIBRARY_PATH unset, "
        f"the ldconfig cache). Set TOPS_HOME to the TopsRider SDK install whose lib/ or lib64/ "
        f"holds libtopsrt.so: export TOPS_HOME=/path/to/tops"
    )
    assert expected in last, err
    # One error, not a dlopen trace or a chain of them.
    assert "cannot open shared object file" not in err, err
    assert "During handling of the above exception" not in err, err
    assert err.count("Error:") == 1, err


def test_without_tops_home_the_default_location_is_named(tmp_path):
    if (
        Path("/opt/tops/lib/libtopsrt.so").is_file()
        or Path("/opt/tops/lib64/libtopsrt.so").is_file()
    ):
        pytest.skip("a TopsRider SDK is installed in /opt/tops")
    _installed("libtorch_fl_gcu_runtime.so")
    env = _env_without_sdk(tmp_path)
    del env["TOPS_HOME"]
    _require_sdk_off_the_loader_path(env)
    proc = _run(TOUCH, env)
    assert proc.returncode != 0, proc.stdout
    assert (
        "looked in /opt/tops/lib and /opt/tops/lib64 (TOPS_HOME is unset, so the TopsRider SDK's "
        "default install location /opt/tops)"
    ) in proc.stderr, proc.stderr
    assert "Set TOPS_HOME to the TopsRider SDK install" in proc.stderr
    # A wheel built against the emulator, which is on this machine: the export that selects it.
    from torch_fl_gcu import sdk_info

    built = sdk_info().get("tops_home") or ""
    if sdk_info().get("emulator", "").upper() == "TRUE" and Path(built).is_dir():
        assert f"; to use it: export TOPS_HOME={built}" in proc.stderr, proc.stderr


@pytest.fixture
def emulator_lib(emu) -> Path:
    from torch_fl_gcu import sdk

    return Path(sdk.load().runtime).parent


def test_tops_home_is_where_the_sdk_is_loaded_from(emulator_lib, tmp_path):
    env = _env_without_sdk(tmp_path, TOPS_HOME=str(emulator_lib.parent))
    code = (
        f"{TOUCH}; import torch_fl_gcu.sdk as s; x = torch.ones(3, device='flagos');"
        f"assert (x + x).cpu().tolist() == [2.0] * 3; print(s.loaded().runtime, s.loaded().source)"
    )
    proc = _run(code, env)
    assert proc.returncode == 0, proc.stderr
    home = emulator_lib.parent
    assert proc.stdout.split() == [str(home / "lib" / "libtopsrt.so"), f"TOPS_HOME={home}"]


def test_an_sdk_moved_elsewhere_is_found_there(emulator_lib, tmp_path):
    """A copy of the SDK in another home (lib64 layout) is used once TOPS_HOME names it."""
    moved = tmp_path / "tops" / "lib64"
    moved.mkdir(parents=True)
    for name in ("libtopsrt.so", "libtopsaten.so"):
        shutil.copy2(emulator_lib / name, moved / name)
    env = _env_without_sdk(tmp_path, TOPS_HOME=str(moved.parent))
    proc = _run(f"{TOUCH}; import torch_fl_gcu.sdk as s; print(s.loaded().runtime)", env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(moved / "libtopsrt.so")


def test_the_loader_path_is_the_last_place_looked(emulator_lib, tmp_path):
    env = _env_without_sdk(tmp_path, LD_LIBRARY_PATH=str(emulator_lib))
    proc = _run(f"{TOUCH}; import torch_fl_gcu.sdk as s; print(s.loaded().source)", env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "the dynamic loader path"
