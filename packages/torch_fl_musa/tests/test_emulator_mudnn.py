"""The MUSA emulator's muDNN (libmudnn.so) computes on strided views and enforces the SDK contract
(docs/musa.md), tested on the library itself: a C++ driver (emulator_mudnn_driver.cpp, no torch)
is built against the installed emulator prefix and runs one case per test, checking results it
computes itself.

The prefix is the one MUSA_HOME names when it is an emulator's, else the in-tree emulator/prefix;
the tests skip when neither is built.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.musa

HERE = Path(__file__).resolve().parent
EMULATOR = HERE.parent / "emulator"
DRIVER = HERE / "emulator_mudnn_driver.cpp"
NEEDED = ("include/mudnn.h", "include/musa_emulator.h", "lib/libmudnn.so", "lib/libmusart.so")


def _prefix() -> Path:
    home = os.environ.get("MUSA_HOME", "").strip()
    if home and (Path(home) / "include" / "musa_emulator.h").is_file():
        return Path(home).resolve()
    return EMULATOR / "prefix"


@pytest.fixture(scope="module")
def driver(tmp_path_factory) -> Path:
    prefix = _prefix()
    missing = [n for n in NEEDED if not (prefix / n).is_file()]
    if missing:
        pytest.skip(
            f"the MUSA emulator is not installed in {prefix} (missing {', '.join(missing)})"
        )
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("g++ is needed to build the muDNN driver")
    if prefix == EMULATOR / "prefix":
        sources = [*EMULATOR.glob("src/mudnn_*"), EMULATOR / "include" / "mudnn.h"]
        if max(p.stat().st_mtime for p in sources) > (prefix / "lib/libmudnn.so").stat().st_mtime:
            pytest.fail(f"{prefix} is older than the emulator's muDNN sources: reinstall it")
    exe = tmp_path_factory.mktemp("mudnn") / "driver"
    lib = prefix / "lib"
    cmd = [compiler, "-std=c++17", "-O1", "-Wall", "-Werror", f"-I{prefix / 'include'}"]
    cmd += [str(DRIVER), "-o", str(exe), f"-L{lib}", "-lmudnn", "-lmusart", f"-Wl,-rpath,{lib}"]
    built = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if built.returncode != 0:
        pytest.fail("building the muDNN driver failed:\n" + built.stdout + built.stderr)
    return exe


CASES = [
    "binary_add_strided",
    "unary",
    "ternary_select",
    "reduce",
    "matmul",
    "softmax",
    "half_bf16_rounding",
    "double_not_supported",
    "out_of_allocation",
    "wrong_device",
    "freed_before_sync",
    "injected_fault",
]


@pytest.mark.parametrize("case", CASES)
def test_mudnn(driver, case):
    env = {**os.environ, "MUSA_EMU_DEVICE_COUNT": "2"}
    env.pop("MUSA_EMU_MEMORY_MB", None)
    run = subprocess.run(
        [str(driver), case], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "DONE 0" in run.stdout, out


def test_every_case_is_run(driver):
    """The driver's cases and this file's agree (a new case is tested, not just written)."""
    usage = subprocess.run([str(driver)], capture_output=True, text=True, check=False).stdout
    assert usage.split("cases:")[1].split() == sorted(CASES)
