"""tools/gen_kernels.py on core's driver: ops libtopsaten.so lacks are skipped with a warning, a
measured defect skips an exported function, handwritten kernels need every function they call,
and the command line writes the same kernels and manifest as the driver."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

pytestmark = pytest.mark.gcu

PACKAGE = Path(__file__).resolve().parents[1]  # packages/torch_fl_gcu (source tree)
TOOLS = PACKAGE / "tools"


@pytest.fixture(scope="module")
def gen():
    sys.path.insert(0, str(TOOLS))
    try:
        import gen_kernels
        import kernel_generator
        import topsaten_ops

        driver = functools.partial(kernel_generator.generate, gen_kernels.SDK, topsaten_ops.OPS)
        yield types.SimpleNamespace(generate=driver), topsaten_ops
    finally:
        sys.path.remove(str(TOOLS))


def _all_symbols(ops) -> set[str]:
    out = {op.function("topsaten") for op in ops.OPS}
    for needs, _ in ops.HANDWRITTEN.values():
        out |= set(needs)
    return out


def test_the_table_is_in_cores_format(gen):
    import kernel_ops

    _, ops = gen
    assert all(type(op) is kernel_ops.Op for op in ops.OPS)
    assert ops.OPS[0].function("topsaten") == "topsatenAbs"  # derived from the aten name
    by_name = {op.name: op for op in ops.OPS}
    assert by_name["_softmax"].function("topsaten") == "topsatenSoftmaxForward"


def test_every_table_entry_names_a_real_overload(gen):
    g, ops = gen
    cpp, manifest = g.generate(_all_symbols(ops))
    # The one measured defect is the only warning; nothing else is skipped.
    assert manifest["warnings"] == [
        "topsaten::topsatenNativeLayerNormBackward is exported but skipped: returns "
        "TOPSATEN_STATUS_SUCCESS and writes nothing (measured on the S60)"
    ]
    assert list(manifest["skipped"]) == ["aten::native_layer_norm_backward"]
    assert "dtypes" not in manifest  # the topsaten table lists no dtypes: categories decide
    assert manifest["generated"]["aten::add_.Tensor"] == "topsatenAdd"
    assert "tfl_gcu::Call c(op, s, tfl_gcu::Form::Out);" in cpp
    assert 'tfl_gcu::binary_alpha(c, &topsaten::topsatenAdd, "topsatenAdd");' in cpp
    assert cpp == g.generate(_all_symbols(ops))[0]  # deterministic


def test_missing_functions_skip_their_ops(gen):
    g, ops = gen
    cpp, manifest = g.generate(_all_symbols(ops) - {"topsatenExp"})
    for op in ("aten::exp", "aten::exp.out", "aten::exp_"):
        assert manifest["skipped"][op] == "libtopsaten.so does not export topsaten::topsatenExp"
    assert "k_exp(" not in cpp and "k_neg(" in cpp
    assert (
        "topsaten::topsatenExp is not exported by libtopsaten.so: skipping exp, exp.out, exp_"
        in manifest["warnings"]
    )
    _, manifest = g.generate(_all_symbols(ops) - {"topsatenWhere", "topsatenZero"})
    assert manifest["skipped"]["aten::_amp_update_scale_"] == (
        "libtopsaten.so does not export topsaten::topsatenWhere, topsaten::topsatenZero"
    )
    assert "aten::_amp_foreach_non_finite_check_and_unscale_" in manifest["generated"]


def test_command_line_writes_what_the_driver_generates(gen, tmp_path):
    g, ops = gen
    lib = PACKAGE / "emulator" / "prefix" / "lib" / "libtopsaten.so"
    if not lib.is_file():
        pytest.skip("needs the source tree's emulator prefix")
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    proc = subprocess.run(
        [sys.executable, str(TOOLS / "gen_kernels.py"), "--topsaten", str(lib), "--out",
         str(tmp_path)],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "gen_kernels: warning: topsaten::topsatenNativeLayerNormBackward" in proc.stderr
    manifest = json.loads((tmp_path / "kernels.json").read_text())
    assert manifest.pop("topsaten") == str(lib.resolve())
    cpp, expected = g.generate(set(manifest["generated"].values()) | _all_symbols(ops))
    assert manifest == expected
    assert (tmp_path / "topsaten_kernels.cpp").read_text() == cpp
