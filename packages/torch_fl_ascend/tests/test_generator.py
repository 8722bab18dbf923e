"""tools/gen_kernels.py: ops the toolkit lacks are skipped with a warning, output is deterministic,
and an emulator built without an op (ASCEND_EMU_OMIT) yields a build without that kernel."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

pytestmark = pytest.mark.ascend

PACKAGE = Path(__file__).resolve().parents[1]  # packages/torch_fl_ascend (source tree)
TOOLS = PACKAGE / "tools"


@pytest.fixture(scope="module")
def gen():
    sys.path.insert(0, str(TOOLS))
    try:
        import aclnn_ops
        import gen_kernels
        import kernel_generator

        driver = functools.partial(kernel_generator.generate, gen_kernels.SDK, aclnn_ops.OPS)
        yield types.SimpleNamespace(generate=driver), aclnn_ops
    finally:
        sys.path.remove(str(TOOLS))


def _symbol(op) -> str:
    return op.function("aclnn")


def _all_symbols(ops) -> set[str]:
    out = set()
    for op in ops.OPS:
        out |= {_symbol(op), _symbol(op) + "GetWorkspaceSize"}
    for needs, _ in ops.HANDWRITTEN.values():
        for fn in needs:
            out |= {fn, fn + "GetWorkspaceSize"}
    return out


def test_every_table_entry_names_a_real_overload_and_header(gen):
    g, ops = gen
    cpp, manifest = g.generate(_all_symbols(ops))
    assert manifest["warnings"] == []
    # Only overloads that decompose in this torch (no kernel could be routed) are left out.
    assert all(why.startswith("CompositeImplicitAutograd") for why in manifest["skipped"].values())
    headers = PACKAGE / "emulator" / "include" / "aclnnop"
    for op in ops.OPS:
        text = (headers / op.header).read_text()
        assert f"{_symbol(op)}GetWorkspaceSize(" in text, (op.name, op.header)
        assert set(op.dtypes) <= set(ops.ALL_DTYPES), op.name
    assert cpp == g.generate(_all_symbols(ops))[0]  # deterministic


def test_the_table_is_in_cores_format(gen):
    import kernel_ops

    _, ops = gen
    assert all(type(op) is kernel_ops.Op for op in ops.OPS)
    assert all(op.dtypes is not None and op.header for op in ops.OPS)  # ACLNN needs both


def test_either_missing_phase_skips_the_op(gen):
    g, ops = gen
    symbols = _all_symbols(ops) - {"aclnnExp", "aclnnMmGetWorkspaceSize"}
    cpp, manifest = g.generate(symbols)
    assert "aten::exp" not in manifest["generated"]
    assert manifest["skipped"]["aten::exp"] == "libopapi.so does not define aclnnExp"
    assert "aclnnMmGetWorkspaceSize" in manifest["skipped"]["aten::mm.out"]
    assert "k_exp(" not in cpp and "k_mm(" not in cpp and "k_neg(" in cpp
    assert any(w.startswith("libopapi.so does not define aclnnExp: skipping exp, exp.out, exp_")
               for w in manifest["warnings"])  # fmt: skip
    # Handwritten kernels need every function they call.
    _, manifest = g.generate(symbols - {"aclnnAmpUpdateScale"})
    assert "aten::_amp_update_scale_" in manifest["skipped"]


def test_dtypes_reach_the_manifest_and_the_kernels(gen):
    g, ops = gen
    cpp, manifest = g.generate(_all_symbols(ops))
    assert manifest["dtypes"]["aten::mm"] == ["float32", "float16", "bfloat16"]
    assert "float64" not in manifest["dtypes"]["aten::add.Tensor"]
    assert "float64" in manifest["dtypes"]["aten::fill_.Scalar"]
    assert (
        "static const torch_fl::kit::DtypeSet dtypes{at::kFloat, at::kHalf, at::kBFloat16};" in cpp
    )
    # Schemas with string defaults are valid C++ literals.
    assert 'm.def("gelu(Tensor self, *, str approximate=\\"none\\") -> Tensor");' in cpp


def _cmake() -> str | None:
    local = Path(sys.executable).parent / "cmake"
    return str(local) if local.is_file() else shutil.which("cmake")


@pytest.mark.timeout(900)
def test_emulator_without_an_op_loses_that_kernel(tmp_path):
    """Build libopapi.so with ASCEND_EMU_OMIT=aclnnAbs: the generator warns, skips abs (all three
    spellings) and keeps neg; the route generator then gives abs no ascend route."""
    emulator = PACKAGE / "emulator"
    cmake = _cmake()
    if not (emulator / "opapi.cmake").is_file() or cmake is None:
        pytest.skip("needs the source tree's emulator and cmake")
    build = tmp_path / "emu"
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    subprocess.run(
        [cmake, "-S", str(emulator), "-B", str(build), *gen, "-DASCEND_EMU_OMIT=aclnnAbs",
         f"-DPython_EXECUTABLE={sys.executable}"],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    subprocess.run(
        [cmake, "--build", str(build), "--target", "opapi", "-j", "2"],
        check=True, capture_output=True, timeout=840,
    )  # fmt: skip
    lib = next(build.rglob("libopapi.so"))
    out = tmp_path / "gen"
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    proc = subprocess.run(
        [sys.executable, str(TOOLS / "gen_kernels.py"), "--opapi", str(lib), "--out", str(out)],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (
        "gen_kernels: warning: libopapi.so does not define aclnnAbsGetWorkspaceSize and aclnnAbs"
        in proc.stderr
    ), proc.stderr
    manifest = json.loads((out / "kernels.json").read_text())
    for op in ("aten::abs", "aten::abs.out", "aten::abs_"):
        assert op not in manifest["generated"] and op in manifest["skipped"], op
    assert manifest["generated"]["aten::neg"] == "aclnnNeg"
    assert "k_abs(" not in (out / "aclnn_kernels.cpp").read_text()

    sys.path.insert(0, str(PACKAGE / "src"))
    try:
        from torch_fl_ascend.routing.generate import ASCEND
    finally:
        sys.path.remove(str(PACKAGE / "src"))
    from torch_fl.routing import flaggems_first

    gaps = flaggems_first.load_gaps(PACKAGE / "src" / "torch_fl_ascend" / "routing" / "gaps.json")
    text, warnings = flaggems_first.served_table(
        ASCEND, native_ops=manifest["generated"], dtypes=manifest["dtypes"],
        skipped=manifest["skipped"], flaggems_ops=["abs", "neg"], flaggems_why="test", gaps=gaps,
        torch_minor="2.13",
    )  # fmt: skip
    lines = text.splitlines()
    assert "abs = flaggems, cpu" in lines and "abs.out = ascend" not in lines
    assert "neg = flaggems, ascend, cpu" in lines
    assert any(w.startswith("no ascend route for abs:") for w in warnings), warnings
