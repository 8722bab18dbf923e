"""The muDNN kernel generator: an object API (class + mode, or a run method) checked against the
methods libmudnn.so exports, through core's generator driver with no special case for it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.musa

TOOLS = Path(__file__).resolve().parents[1] / "tools"


def _gen():
    spec = importlib.util.spec_from_file_location("musa_gen_kernels", TOOLS / "gen_kernels.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(TOOLS))
    spec.loader.exec_module(module)
    return module


def test_modes_and_methods_need_the_exported_methods():
    sdk = _gen().SDK
    assert sdk.exported("Binary::ADD") == ("Binary::SetMode", "Binary::Run")
    assert sdk.exported("MatMul::RunWithBiasAdd") == ("MatMul::RunWithBiasAdd",)
    assert sdk.exported("MatMul") == ("MatMul::Run",)
    assert (
        sdk.symbol.search(
            "0000000000012340 T musa::dnn::Binary::Run(musa::dnn::Handle&, musa::dnn::Tensor&, "
            "musa::dnn::Tensor const&, musa::dnn::Tensor const&) const"
        ).group(1)
        == "Binary::Run"
    )


def test_a_missing_method_skips_exactly_its_ops():
    import torch_fl.kit.kernel_generator as kg

    gen = _gen()
    every = {s for op in gen.mudnn_ops.OPS for s in gen.SDK.exported(op.function(""))}
    cpp, manifest = kg.generate(gen.SDK, gen.mudnn_ops.OPS, every - {"MatMul::RunWithBiasAdd"})
    assert "aten::addmm" in manifest["skipped"]
    assert "musa::dnn::MatMul::RunWithBiasAdd" in manifest["skipped"]["aten::addmm"]
    assert manifest["generated"]["aten::mm"] == "MatMul"
    assert 'musa::dnn::Binary::Mode::ADD, "Binary::ADD", dtypes' in cpp
    assert (
        "static const torch_fl::kit::DtypeSet dtypes{at::kFloat, at::kHalf, at::kBFloat16};" in cpp
    )


def test_the_build_read_the_sdk_it_was_built_against(musa):
    from torch_fl_musa import kernels_manifest, sdk_info

    manifest = kernels_manifest()
    assert Path(manifest["mudnn"]).name == "libmudnn.so"
    assert sdk_info()["emulator"] in ("TRUE", "FALSE")
    proc = subprocess.run(
        [sys.executable, "-m", "torch_fl_musa"], capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, proc.stderr
    assert "muDNN" in proc.stdout
