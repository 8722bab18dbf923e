"""gcu.conf: generated, checked, FlagGems-first with the measured gap set, and following the SDK."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gcu

PACKAGE = Path(__file__).resolve().parents[1]  # packages/torch_fl_gcu (source tree)


def _cmake() -> str | None:
    """The cmake of this environment (the build's, >= 3.26) before whatever PATH has."""
    local = Path(sys.executable).parent / "cmake"
    return str(local) if local.is_file() else shutil.which("cmake")


def _env() -> dict[str, str]:
    return {**os.environ, "FLAGOS_VENDOR": "gcu"}


def test_route_table_is_up_to_date(gcu):
    proc = subprocess.run(
        [sys.executable, "-m", "torch_fl_gcu.routing.generate", "--check"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_installed_table_is_the_source_table(gcu):
    import torch_fl_gcu.vendor

    source = PACKAGE / "src" / "torch_fl_gcu" / "routes" / "gcu.conf"
    if not source.is_file():
        pytest.skip("not run from the source tree")
    assert torch_fl_gcu.vendor.vendor.route_table().read_text() == source.read_text()


def test_generation_is_byte_identical(gcu):
    from torch_fl_gcu.routing import generate

    assert generate._current() == generate._current()


def test_banner_says_flaggems_routes_are_off_without_enflame_triton(gcu):
    from torch_fl_gcu import flaggems
    from torch_fl_gcu.vendor import vendor

    ok, why = flaggems.enflame_triton()
    text = vendor.route_table().read_text()
    if ok:
        assert "# FlagGems routes: on" in text
    else:
        assert f"# FlagGems routes: none -- {why}" in text
        assert "= flaggems" not in text


def test_every_gcu_route_sends_64_bit_dtypes_to_cpu(gcu):
    from torch_fl_gcu.vendor import vendor

    lines = [ln.split("#")[0].strip() for ln in vendor.route_table().read_text().splitlines()]
    gcu_ops = [ln.split(" = ")[0] for ln in lines if ln.endswith("= gcu")]
    assert len(gcu_ops) > 100
    for op in gcu_ops:
        assert f"{op}[int64, float64] = cpu" in lines, op


def test_flaggems_first_then_the_gap_set(gcu):
    from torch_fl_gcu.routing.generate import generate, load_gaps

    text, _ = generate(
        gcu_ops=["aten::abs", "aten::exp", "aten::_softmax", "aten::add.Tensor"],
        skipped={},
        flaggems_ops=["abs", "exp", "elu", "asin", "_softmax", "silu", "add.Tensor"],
        flaggems_why="test",
        gaps=load_gaps(),
        torch_minor="2.13",
    )
    routes = {
        ln.split(" = ")[0]: ln.split(" = ")[1].split()[0]
        for ln in text.splitlines()
        if " = " in ln and not ln.startswith("#") and "[" not in ln.split(" = ")[0]
    }
    assert routes["silu"] == "flaggems"  # no gap: FlagGems first
    assert routes["add.Tensor"] == "flaggems"
    assert routes["abs"] == "gcu"  # int64-only failure, topsaten has a kernel
    assert routes["_softmax"] == "gcu"  # launch-grid limit
    assert routes["elu"] == "cpu"  # wrong on float profiles, no topsaten kernel
    assert routes["asin"] == "cpu"  # crash
    assert "# gap: crash" in text and "# gap: wrong-float" in text


def test_gap_entries_have_reasons_and_name_real_overloads(gcu):
    import torch
    from torch_fl_gcu.routing.generate import load_gaps

    gaps = load_gaps()
    families = {e["family"] for e in gaps.values()}
    assert {"wrong-float", "int64-only", "crash", "launch-grid"} <= families
    for op, entry in gaps.items():
        assert entry["reason"].strip(), op
        name, _, overload = op.partition(".")
        torch._C._get_schema(f"aten::{name}", overload)  # raises for an unknown overload


@pytest.mark.timeout(600)
def test_removing_a_symbol_from_the_sdk_removes_its_route(gcu, tmp_path):
    """Build the emulator without topsatenAbs, regenerate: abs loses its gcu route, with warnings."""
    emulator = PACKAGE / "emulator"
    cmake = _cmake()
    if not (emulator / "CMakeLists.txt").is_file() or cmake is None:
        pytest.skip("needs the source tree's emulator and cmake")
    build = tmp_path / "emu"
    subprocess.run(
        [cmake, "-S", str(emulator), "-B", str(build), "-DTOPS_EMU_OMIT=topsatenAbs"],
        check=True,
        capture_output=True,
        timeout=300,
    )
    subprocess.run([cmake, "--build", str(build)], check=True, capture_output=True, timeout=600)
    lib = build / "libtopsaten.so"
    out = tmp_path / "gen"
    proc = subprocess.run(
        [
            sys.executable,
            str(PACKAGE / "tools" / "gen_kernels.py"),
            "--topsaten",
            str(lib),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(),
    )
    assert proc.returncode == 0, proc.stderr
    assert "topsaten::topsatenAbs is not exported by libtopsaten.so" in proc.stderr
    import json

    manifest = json.loads((out / "kernels.json").read_text())
    assert "aten::abs" not in manifest["generated"] and "aten::abs" in manifest["skipped"]
    assert "aten::neg" in manifest["generated"]
    assert "k_abs(" not in (out / "topsaten_kernels.cpp").read_text()

    from torch_fl_gcu.routing.generate import generate, load_gaps

    text, warnings = generate(
        gcu_ops=manifest["generated"],
        skipped=manifest["skipped"],
        flaggems_ops=None,
        flaggems_why="test",
        gaps=load_gaps(),
        torch_minor="2.13",
    )
    lines = text.splitlines()
    assert "abs = gcu" not in lines and "abs.out = gcu" not in lines and "abs_ = gcu" not in lines
    assert "neg = gcu" in lines
    assert any(w.startswith("no gcu route for abs:") for w in warnings), warnings


def test_missing_sdk_is_a_configure_error_that_says_what_to_do(tmp_path):
    cmake = _cmake()
    if cmake is None or not (PACKAGE / "CMakeLists.txt").is_file():
        pytest.skip("needs the source tree and cmake")
    proc = subprocess.run(
        [cmake, "-S", str(PACKAGE), "-B", str(tmp_path / "b"), f"-DTOPS_HOME={tmp_path / 'nope'}"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode != 0
    err = " ".join(proc.stderr.split())  # CMake wraps long messages
    assert "TopsRider SDK not found under TOPS_HOME=" in err, err
    assert "export TOPS_HOME" in err and "emulator" in err and "nox -s build-gcu" in err, err


def test_a_measured_sdk_defect_is_skipped_although_exported(gcu):
    """topsatenNativeLayerNormBackward returns SUCCESS and writes nothing on the S60 (and in the
    emulator): the generator skips it, so native_layer_norm_backward keeps its CPU route."""
    from torch_fl_gcu import kernels_manifest
    from torch_fl_gcu.vendor import vendor

    manifest = kernels_manifest()
    assert "writes nothing" in manifest["skipped"]["aten::native_layer_norm_backward"]
    assert "aten::native_layer_norm_backward" not in manifest["generated"]
    lines = vendor.route_table().read_text().splitlines()
    assert "native_layer_norm_backward = gcu" not in lines
    assert any(ln.startswith("#   native_layer_norm_backward: ") for ln in lines)
