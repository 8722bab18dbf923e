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


def _rules(text: str) -> dict[str, str]:
    """op or op[dtypes] -> right-hand side (comments dropped)."""
    out = {}
    for ln in text.splitlines():
        ln = ln.split("#")[0].strip()
        if " = " in ln:
            lhs, rhs = ln.split(" = ", 1)
            out[lhs] = rhs
    return out


def test_shipped_table_is_flaggems_first_for_the_measured_set(gcu):
    """Independent of the Triton here: the lists come from flaggems_ops.txt and gaps.json."""
    from torch_fl_gcu.routing.generate import load_gaps
    from torch_fl_gcu.vendor import vendor

    text = vendor.route_table().read_text()
    rules = _rules(text)
    firsts = [op for op, rhs in rules.items() if rhs.startswith("flaggems,")]
    assert len(firsts) > 300
    assert rules["silu"] == "flaggems, gcu, cpu"  # measured clean, topsaten kernel behind it
    assert rules["add.Tensor"] == "flaggems, gcu, cpu"
    assert rules["bitwise_not"] == "flaggems, cpu"  # no topsaten kernel
    gaps = load_gaps()
    for op, entry in gaps.items():
        if entry["dtypes"] == "all" and op in rules:
            assert "flaggems" not in rules[op], op
    # One exclusion, with its measured reason carried in gaps.json and named in the table.
    elu = gaps["elu"]
    assert elu["dtypes"] == "all" and elu["family"] == "wrong-float"
    assert "max_diff" in elu["reason"]
    assert elu["source"]["document"].startswith("gcu-flaggems-test-results.md")
    assert rules["elu"] == "cpu" and "elu = cpu  # gap: wrong-float" in text
    # A dtype exclusion: int64 only, flaggems first for the other dtypes.
    assert gaps["acosh"]["dtypes"] == ["int64"]
    assert "Pipeline run failed" in gaps["acosh"]["reason"]
    assert rules["acosh"] == "flaggems, cpu" and rules["acosh[int64]"] == "cpu"
    assert rules["abs"] == "flaggems, gcu, cpu" and rules["abs[int64, float64]"] == "cpu"
    # Factories with a Device argument never get a cpu choice (it would return a CPU tensor).
    assert all("cpu" not in rules.get(op, "") for op in ("randn", "ones", "zeros", "arange"))


def test_shipped_table_records_the_measured_flaggems(gcu):
    from torch_fl.routing.route_table import parse_file
    from torch_fl_gcu.vendor import vendor

    text = vendor.route_table().read_text()
    assert "# flaggems-measured: flag_gems git:3c6f7537d on Enflame S60, torch 2.10\n" in text
    (measured,) = parse_file(vendor.route_table()).flaggems_measured.values()
    assert (measured.spec, measured.device, measured.torch) == (
        "git:3c6f7537d",
        "Enflame S60",
        "2.10",
    )


def test_without_flaggems_the_lists_resolve_to_the_next_choice(gcu):
    import torch_fl.routing.activation as activation

    active = activation.active_table()
    assert active is not None
    assert active.routes["aten::silu"].backend == "gcu"
    assert active.routes["aten::bitwise_not"].backend == "cpu"
    assert not [r for r, _ in active.skipped if r.file.endswith("gcu.conf")]


def test_check_detects_a_hand_edited_table(gcu, tmp_path):
    from torch_fl_gcu.routing import generate
    from torch_fl_gcu.vendor import vendor

    copy = tmp_path / "gcu.conf"
    text = vendor.route_table().read_text()
    copy.write_text(text)
    assert generate.main(["--check", "--output", str(copy)]) == 0
    copy.write_text(text.replace("silu = flaggems, gcu, cpu\n", "silu = gcu\n"))
    assert generate.main(["--check", "--output", str(copy)]) == 1
    copy.write_text(text.replace("elu = cpu  # gap: wrong-float\n", "elu = flaggems, cpu\n"))
    assert generate.main(["--check", "--output", str(copy)]) == 1


def test_gap_entries_follow_the_schema(gcu):
    import json

    from torch_fl_gcu.routing.generate import GAPS_FILE

    data = json.loads(GAPS_FILE.read_text())
    assert data["measured"]["flag_gems"] == "git:3c6f7537d"
    for op, entry in data["gaps"].items():
        assert entry["dtypes"] == "all" or entry["dtypes"] == ["int64"], op
        assert entry["source"]["document"] and entry["source"]["section"], op


def test_every_gcu_route_sends_64_bit_dtypes_to_cpu(gcu):
    from torch_fl_gcu.vendor import vendor

    lines = [ln.split("#")[0].strip() for ln in vendor.route_table().read_text().splitlines()]
    gcu_ops = [
        ln.split(" = ")[0]
        for ln in lines
        if " = " in ln and "gcu" in ln.split(" = ")[1].split(", ") and "[" not in ln
    ]
    assert len(gcu_ops) > 150
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
    routes = _rules(text)
    assert routes["silu"] == "flaggems, cpu"  # no gap: FlagGems first
    assert routes["add.Tensor"] == "flaggems, gcu, cpu"
    assert routes["abs"] == "flaggems, gcu, cpu"  # int64-only: the 64-bit rule covers it
    assert routes["abs[int64, float64]"] == "cpu"
    assert routes["_softmax"] == "gcu"  # launch-grid limit
    assert routes["elu"] == "cpu"  # wrong on float profiles, no topsaten kernel
    assert routes["asin"] == "cpu"  # crash
    assert "# gap: crash" in text and "# gap: wrong-float" in text
    assert "# gap[int64]: int64-only" in text


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
    assert "abs = flaggems, cpu" in lines  # the int64 gap keeps flaggems first, now without gcu
    assert "neg = flaggems, gcu, cpu" in lines
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
    # One message, not a CMake list: the suggested commands are lines of their own, and the only
    # `;` is the one of "(missing: ...; looked for".
    message = err[err.index("TopsRider SDK not found") : err.index("Call Stack")]
    assert message.count(";") == 1, message
    for command in (
        "cmake --build packages/torch_fl_gcu/emulator/build && "
        "cmake --install packages/torch_fl_gcu/emulator/build",
        "export TOPS_HOME=$PWD/packages/torch_fl_gcu/emulator/prefix",
    ):
        assert f"    {command}" in proc.stderr.splitlines(), proc.stderr


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
