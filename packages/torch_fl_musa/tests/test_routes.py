"""musa.conf: generated, checked, FlagGems-first over the muDNN kernels, by the dtypes each serves."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.musa

PACKAGE = Path(__file__).resolve().parents[1]  # packages/torch_fl_musa (source tree)


def test_route_table_is_up_to_date(musa):
    proc = subprocess.run(
        [sys.executable, "-m", "torch_fl_musa.routing.generate", "--check"],
        capture_output=True,
        text=True,
        env={**os.environ, "FLAGOS_VENDOR": "musa"},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_installed_table_is_the_source_table(musa):
    import torch_fl_musa.vendor

    source = PACKAGE / "src" / "torch_fl_musa" / "routes" / "musa.conf"
    if not source.is_file():
        pytest.skip("not run from the source tree")
    assert torch_fl_musa.vendor.vendor.route_table().read_text() == source.read_text()


def _rules(text: str) -> dict[str, str]:
    """op or op[dtypes] -> right-hand side (comments dropped)."""
    out = {}
    for ln in text.splitlines():
        ln = ln.split("#")[0].strip()
        if " = " in ln:
            lhs, rhs = ln.split(" = ", 1)
            out[lhs] = rhs
    return out


def test_rules_follow_the_kernels_and_their_dtypes(musa):
    from torch_fl.routing.flaggems_first import package_served_table
    from torch_fl_musa.routing import generate

    text, _ = package_served_table(generate.MUSA, "torch_fl_musa")
    rules = _rules(text)
    # A FlagGems overload with a muDNN kernel: FlagGems, then muDNN, then the CPU.
    assert rules["abs"] == "flaggems, musa, cpu"
    # The dtypes the mode's kernel lacks skip musa: no float64 anywhere, no int64 for floor.
    assert rules["abs[float64, int16, int8, uint8, bool, complex64, complex128]"] == "flaggems, cpu"
    assert rules["mm[float64, int64, int32, int16, int8, uint8, bool, complex64, complex128]"] == (
        "flaggems, cpu"
    )
    # No gap set is measured on MUSA: nothing is taken off flaggems.
    assert "flaggems-measured" not in text
    assert "of 0 gap entries" in text
