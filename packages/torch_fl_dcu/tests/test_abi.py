"""The ABI shim generator, the manifest, the ABI check and the staging tool, over fabricated
official-core / DTK-core library pairs and a fake DTK tree (no DTK here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FUSE, build_lib, make_device_libs, make_shim, run_python, torch_base_version
from torch_fl_dcu.tools import abi_check, nm
from torch_fl_dcu.tools.manifest import (
    DEFAULT_MANIFEST,
    ManifestError,
    ShimSymbol,
    read_manifest,
    write_manifest,
)
from torch_fl_dcu.tools.shim import shim_source

pytestmark = pytest.mark.dcu

TABLE = "dtk_only_table"


@pytest.fixture(scope="module")
def cores(tmp_path_factory) -> dict[str, Path]:
    """official/libc10.so exports common_fn; dtk/libc10.so also exports FUSE and a 24-byte table;
    consumer.so imports common_fn, FUSE and the table."""
    root = tmp_path_factory.mktemp("cores")
    official = build_lib(root / "official" / "libc10.so", "void common_fn(void) {}\n")
    dtk = build_lib(
        root / "dtk" / "libc10.so",
        f"void common_fn(void) {{}}\nvoid {FUSE}(void) {{}}\nlong {TABLE}[3] = {{1, 2, 3}};\n"
        "void dtk_unused(void) {}\n",
    )
    consumer = build_lib(
        root / "consumer" / "libtorch_hip.so",
        f"void common_fn(void); void {FUSE}(void); extern long {TABLE}[3];\n"
        f"long use(void) {{ common_fn(); {FUSE}(); return {TABLE}[1]; }}\n",
        needed=[dtk],
    )
    return {"official": official, "dtk": dtk, "consumer": consumer, "root": root}


def _check(cores, manifest, shim=None):
    return abi_check.check([cores["consumer"]], [cores["dtk"]], [cores["official"]], manifest, shim)


def test_gap_is_dtk_only_imports_with_kinds(cores):
    report = _check(cores, [])
    assert set(report.gap) == {FUSE, TABLE}
    assert report.gap[FUSE].kind == "func"
    assert report.gap[TABLE] == ShimSymbol(TABLE, "object", 24)
    assert "dtk_unused" not in report.gap and "common_fn" not in report.gap


def test_check_passes_when_manifest_covers_the_gap(cores):
    report = _check(cores, [ShimSymbol(FUSE), ShimSymbol(TABLE, "object", 24)])
    assert report.ok
    assert "2 DTK-core-only imports are covered" in report.message()


def test_check_fails_naming_the_symbol_missing_from_the_manifest(cores):
    report = _check(cores, [ShimSymbol(FUSE)])
    assert not report.ok and report.not_in_manifest == [TABLE]
    assert f"    {TABLE}" in report.message()
    assert "missing from the shim manifest" in report.message()


def test_check_fails_when_the_built_shim_lacks_a_symbol(cores, tmp_path):
    shim = make_shim(tmp_path, [FUSE])  # built from an older manifest
    report = _check(cores, [ShimSymbol(FUSE), ShimSymbol(TABLE, "object", 24)], shim)
    assert report.not_in_shim == [TABLE]
    assert "not exported by the built shim" in report.message()


def test_cli_exit_codes(cores, tmp_path):
    manifest = tmp_path / "m.txt"
    write_manifest(manifest, [ShimSymbol(FUSE)], "test manifest")
    args = [sys.executable, "-m", "torch_fl_dcu.tools.abi_check", str(cores["consumer"]),
            "--vendor-core", str(cores["dtk"].parent), "--official-core", str(cores["official"].parent),
            "--manifest", str(manifest)]  # fmt: skip
    bad = subprocess.run(args, capture_output=True, text=True)
    assert bad.returncode == 1 and TABLE in bad.stderr
    write_manifest(manifest, [ShimSymbol(FUSE), ShimSymbol(TABLE, "object", 24)], "test manifest")
    good = subprocess.run(args, capture_output=True, text=True)
    assert good.returncode == 0, good.stderr


def test_shim_exports_every_manifest_symbol_and_throws_when_called(tmp_path):
    symbols = [ShimSymbol(FUSE), ShimSymbol(TABLE, "object", 24)]
    shim = make_shim_from(symbols, tmp_path)
    exported = nm.defined(shim)
    assert exported[FUSE][0] in nm.FUNCTION_TYPES
    assert exported[TABLE][1] == 24
    code = f"import ctypes; ctypes.CDLL({str(shim)!r}).{FUSE}()"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode != 0  # std::runtime_error through ctypes' C frames terminates
    assert "torch-fl-dcu: at::_ops::native_fuse_test_dummy::call() was called" in done.stderr


def make_shim_from(symbols, out):
    from torch_fl_dcu.tools.shim import build_shim

    return build_shim(out, symbols)


def test_checked_in_manifest_parses_and_its_shim_compiles(tmp_path):
    symbols = read_manifest(DEFAULT_MANIFEST)
    assert all(s.kind in ("func", "object") for s in symbols)
    make_shim_from(symbols, tmp_path)  # an empty manifest still yields a loadable library
    assert "GENERATED" in shim_source(symbols)


def test_manifest_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "m.txt"
    bad.write_text("# header\n_Zok func\n_Zbad object x\n")
    with pytest.raises(ManifestError, match=r"m.txt:3: expected"):
        read_manifest(bad)
    bad.write_text("_Za func\n_Za func\n")
    with pytest.raises(ManifestError, match=r"m.txt:2: _Za is listed twice"):
        read_manifest(bad)


def _fake_dtk(root: Path, version: str) -> Path:
    """ROCM_PATH with DTK's torch: its forked core (exporting FUSE) and its device libraries."""
    torch = root / "lib" / "python3.11" / "site-packages" / "torch"
    lib = torch / "lib"
    build_lib(lib / "libc10.so", f"void {FUSE}(void) {{}}\n")
    build_lib(lib / "libtorch_cpu.so", "void dtk_cpu(void) {}\n")
    build_lib(lib / "libtorch.so", "void dtk_torch(void) {}\n")
    make_device_libs(lib, lib)
    # A third-party library only DTK's torch/lib has, which libtorch_hip needs: it must be bundled
    # and loaded before libtorch_hip.
    gflags = build_lib(lib / "libgflags-0abc.so", "int tfl_fake_gflags(void) { return 3; }\n")
    build_lib(
        lib / "libtorch_hip.so",
        f"void {FUSE}(void);\nint tfl_fake_torch_hip_loaded = 1;\n"
        f"void tfl_fake_torch_hip_uses_shim(void) {{ {FUSE}(); }}\n",
        needed=[lib / "libc10_hip.so", lib / "libc10.so", gflags],
    )
    (torch / "version.py").write_text(f"__version__ = '{version}+das.test'\nhip = '6.3.12345'\n")
    return root


def _stage(rocm: Path, dest: Path, manifest: Path, *extra: str) -> subprocess.CompletedProcess:
    # FLAGOS_DCU_PRELOAD=0: the tool itself must run whatever bundle is (or is not) installed.
    env = {**os.environ, "FLAGOS_DCU_PRELOAD": "0"}
    args = [sys.executable, "-m", "torch_fl_dcu.tools.stage", "--rocm-path", str(rocm),
            "--dest", str(dest), "--manifest", str(manifest), *extra]  # fmt: skip
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)


def test_stage_checks_abi_records_manifest_and_writes_a_loadable_bundle(tmp_path):
    rocm = _fake_dtk(tmp_path / "dtk", torch_base_version())
    dest = tmp_path / "staged"
    manifest = tmp_path / "shim_symbols.txt"
    manifest.write_text("# empty, as checked in\n")

    first = _stage(rocm, dest, manifest)
    assert first.returncode == 1
    assert "DCU core ABI check FAILED" in first.stderr and FUSE in first.stderr
    assert not (dest / "bundle.json").exists()  # never a loadable half-staged bundle

    second = _stage(rocm, dest, manifest, "--update-manifest")
    assert second.returncode == 0, second.stderr
    assert [s.name for s in read_manifest(manifest)] == [FUSE]
    assert manifest.read_text().startswith("# empty, as checked in")
    data = json.loads((dest / "bundle.json").read_text())
    assert data["libraries"] == [
        "libtorch_fl_dcu_abi_shim.so",
        "libc10_hip.so",
        "libmagma.so",
        "libgflags-0abc.so",
        "libtorch_hip.so",
    ]
    assert data["torch_version"] == torch_base_version() and data["hip_version"] == "6.3.12345"
    assert not (dest / "lib" / "libc10.so").exists()  # the official core is never bundled

    loaded = run_python(
        "import torch_fl_dcu, ctypes\nprint('STATUS', torch_fl_dcu.state().status)\n"
        "print('G', hasattr(ctypes.CDLL(None), 'tfl_fake_gflags'))",
        dest,
    )
    assert loaded.returncode == 0, loaded.stderr
    assert "STATUS loaded" in loaded.stdout and "G True" in loaded.stdout

    verify = _stage(rocm, dest, manifest, "--verify")
    assert verify.returncode == 0, verify.stderr


def test_stage_refuses_a_different_official_torch(tmp_path):
    rocm = _fake_dtk(tmp_path / "dtk", "2.9.1")
    manifest = tmp_path / "m.txt"
    manifest.write_text("")
    done = _stage(rocm, tmp_path / "staged", manifest)
    assert done.returncode == 1
    assert f"the official torch here is {torch_base_version()}" in done.stderr
    assert "DTK's torch is 2.9.1+das.test" in done.stderr


def test_stage_without_dtk_says_where_it_looked(tmp_path):
    manifest = tmp_path / "m.txt"
    manifest.write_text("")
    done = _stage(tmp_path / "nothing", tmp_path / "staged", manifest)
    assert done.returncode == 1
    assert "no DTK torch" in done.stderr and "ROCM_PATH=" in done.stderr
