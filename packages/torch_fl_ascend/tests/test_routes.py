"""ascend.conf: generated and checked, FlagGems first under its runtime condition, native ACLNN
kernels next, the dtypes ACLNN lacks sent past them, and every ascend route backed by a kernel."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.ascend

PACKAGE = Path(__file__).resolve().parents[1]


def _rules(text: str) -> dict[str, str]:
    out = {}
    for ln in text.splitlines():
        ln = ln.split("#")[0].strip()
        if " = " in ln:
            lhs, rhs = ln.split(" = ", 1)
            out[lhs] = rhs
    return out


def test_route_table_is_up_to_date(ascend):
    proc = subprocess.run(
        [sys.executable, "-m", "torch_fl_ascend.routing.generate", "--check"],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "FLAGOS_VENDOR": "ascend"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_generation_is_byte_identical(ascend):
    from torch_fl.routing.flaggems_first import package_served_table
    from torch_fl_ascend.routing import generate

    assert package_served_table(generate.ASCEND, "torch_fl_ascend") == package_served_table(
        generate.ASCEND, "torch_fl_ascend"
    )


def test_check_detects_a_hand_edited_table(ascend, tmp_path):
    from torch_fl_ascend.routing import generate
    from torch_fl_ascend.vendor import vendor

    copy = tmp_path / "ascend.conf"
    text = vendor.route_table().read_text()
    copy.write_text(text)
    assert generate.main(["--check", "--output", str(copy)]) == 0
    copy.write_text(text.replace("mm = flaggems, ascend, cpu\n", "mm = ascend\n"))
    assert generate.main(["--check", "--output", str(copy)]) == 1


def test_flaggems_first_then_ascend_then_cpu(ascend):
    from torch_fl_ascend.vendor import vendor

    rules = _rules(vendor.route_table().read_text())
    assert rules["mm"] == "flaggems, ascend, cpu"
    assert rules["add.Tensor"] == "flaggems, ascend, cpu"
    assert rules["bitwise_not"] == "flaggems, cpu"  # no ACLNN kernel in the table
    assert rules["add.out"] == "ascend"  # not a FlagGems overload
    # The dtypes ACLNN lacks skip ascend, FlagGems first still where it serves the op.
    complex_ = "complex64, complex128"
    assert rules[f"mm[float64, int64, int32, int16, int8, uint8, bool, {complex_}]"] == (
        "flaggems, cpu"
    )
    assert rules[f"add.out[float64, int16, bool, {complex_}]"] == "cpu"
    assert rules["fill_.Scalar"].endswith("ascend, cpu") or rules["fill_.Scalar"] == "ascend"
    # ACLNN fills every real dtype; complex ones go to the CPU up front.
    assert [k for k in rules if k.startswith("fill_.Scalar[")] == [f"fill_.Scalar[{complex_}]"]
    # Factories with a Device argument never get a cpu choice.
    assert all("cpu" not in rules.get(op, "") for op in ("randn", "ones", "zeros", "arange"))


def test_flaggems_condition_is_the_ascend_triton(ascend, monkeypatch):
    """The flaggems backend exists only with a Triton that has an Ascend backend and FlagGems."""
    import importlib.util

    from torch_fl_ascend.vendor import vendor

    ok, why = vendor.flaggems_available()
    if importlib.util.find_spec("triton") is None:
        assert not ok and "no Triton" in why
    import torch_fl

    backends = set(torch_fl._C.router_backends())
    assert ("flaggems" in backends) == ok, (why, backends)


def test_without_flaggems_the_lists_resolve_to_ascend(ascend):
    import torch_fl.routing.activation as activation
    from torch_fl_ascend.vendor import vendor

    if vendor.flaggems_available()[0]:
        pytest.skip("FlagGems on an Ascend Triton is importable here")
    active = activation.active_table()
    assert active is not None
    assert active.routes["aten::mm"].backend == "ascend"
    assert active.routes["aten::add.Tensor"].backend == "ascend"
    assert active.routes["aten::bitwise_not"].backend == "cpu"
    assert not [r for r, _ in active.skipped if r.file.endswith("ascend.conf")]


def test_every_ascend_route_names_an_existing_kernel(ascend):
    import torch
    from torch_fl_ascend import NAMESPACE, kernels_manifest
    from torch_fl_ascend.vendor import vendor

    generated = kernels_manifest()["generated"]
    rules = _rules(vendor.route_table().read_text())
    ascend_ops = {op.split("[")[0] for op, rhs in rules.items() if "ascend" in rhs.split(", ")}
    assert len(ascend_ops) > 150
    for op in ascend_ops:
        assert f"aten::{op}" in generated, op
        assert torch._C._dispatch_has_kernel_for_dispatch_key(
            f"{NAMESPACE}::{op}", "PrivateUse1"
        ), op
