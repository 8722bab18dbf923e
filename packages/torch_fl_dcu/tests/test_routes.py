"""dcu.conf / dcu-flaggems.conf: generated, checked, and the DCU gap set routed as gaps.json says."""

from __future__ import annotations

import pytest
import torch
from torch_fl.routing.route_table import parse_file, parse_text
from torch_fl.routing.validation import op_exists
from torch_fl_dcu import flaggems
from torch_fl_dcu.routing import generate
from torch_fl_dcu.routing.generate import BOX, FLAGGEMS_TABLE, TABLE, cuda_declared, load_gaps

pytestmark = pytest.mark.dcu

SEED_GAPS = {
    "silu_backward",
    "slice_backward",
    "_conj",
    "relu",
    "relu_",
    "mm",
    "bmm",
    "mse_loss",
    "transpose.int",
}


def test_generator_check_passes_here(capsys):
    assert generate.main(["--check"]) == 0
    assert "dcu tables up to date" in capsys.readouterr().out


def test_check_fails_on_a_stale_table(tmp_path):
    import shutil

    pkg = tmp_path / "pkg"
    shutil.copytree(TABLE.parent.parent / "routes", pkg / "routes")
    shutil.copytree(TABLE.parent.parent / "routing", pkg / "routing")
    table = pkg / "routes" / "dcu.conf"
    table.write_text(table.read_text().replace("derive box:cuda except composite-implicit\n", ""))
    assert generate.main(["--check", "--dir", str(pkg)]) == 1
    assert generate.main(["--dir", str(pkg)]) == 0
    assert generate.main(["--check", "--dir", str(pkg)]) == 0


def test_cuda_declarations_read_from_torchs_schema():
    declared = cuda_declared()
    # direct CUDA dispatch, structured delegates (functional and in-place forms), and not a view
    for op in (
        "aten::mm.out",
        "aten::mm",
        "aten::add.Tensor",
        "aten::add_.Tensor",
        "aten::_softmax",
    ):
        assert op in declared, op
    assert "aten::_conj" not in declared and "aten::transpose.int" not in declared


def test_box_base_routes_the_runtime_check_ops():
    from torch_fl.routing.derived import derived_rules

    table = parse_file(TABLE)
    assert [(r.op, r.dtypes, r.backend) for r in table.rules] == derived_rules(
        BOX, except_composite_implicit=True
    )
    assert all(r.backend == BOX and op_exists(r.op) for r in table.rules)
    if torch._C._dispatch_has_kernel_for_dispatch_key("aten::add.Tensor", "CUDA"):
        # CUDA-key kernels registered (DTK's torch, a bundle, or a CUDA build): they route, and
        # they are what torch declares.
        rules = {r.op for r in table.rules}
        for op in ("aten::mm", "aten::bmm", "aten::add.Tensor", "aten::_softmax"):
            assert op in rules, op
        assert rules <= cuda_declared() | {"aten::conj_physical_"}


def test_gap_set_is_the_seeds_and_each_names_a_real_overload_with_a_reason():
    gaps = load_gaps()
    assert set(gaps) == SEED_GAPS
    for op, entry in gaps.items():
        assert op_exists("aten::" + op), op
        assert entry["reason"] and entry["family"]


def test_gap_rules_in_the_checked_in_flaggems_table():
    table = parse_file(FLAGGEMS_TABLE)
    assert TABLE.resolve() in table.files  # it includes the box:cuda base
    routes = table.resolve()
    boxed = set(generate.generate_box()[0])
    text = FLAGGEMS_TABLE.read_text()
    for op in SEED_GAPS:
        full = "aten::" + op
        if full in boxed:
            assert routes[full].backend == BOX, op
        else:
            # _conj, transpose.int, slice_backward: no CUDA kernel of their own; silu_backward:
            # CompositeImplicitAutograd. They keep PyTorch's default on flagos (lazy views for
            # _conj and transpose.int), so FlagGems never serves them.
            assert full not in routes, op
            assert f"# {op}: not routed" in text
    assert {"aten::_conj", "aten::transpose.int", "aten::slice_backward"}.isdisjoint(routes)
    for op in ("mm", "bmm", "relu", "relu_", "mse_loss"):
        assert routes["aten::" + op].backend == BOX, op


def test_gaps_override_flaggems_claims():
    declared = {"aten::mm", "aten::abs", "aten::relu"}
    text = generate.flaggems_text(["abs", "mm", "relu", "_conj"], "test", declared)
    routes = parse_text(text.replace("include dcu.conf", "")).resolve()
    assert routes["aten::abs"].backend == "flaggems"
    assert routes["aten::mm"].backend == BOX and routes["aten::relu"].backend == BOX
    assert "aten::_conj" not in routes  # must stay core's lazy view, never FlagGems'


def _rules(text: str) -> dict[str, str]:
    out = {}
    for ln in text.splitlines():
        ln = ln.split("#")[0].strip()
        if " = " in ln and ln != "include dcu.conf":
            lhs, rhs = ln.split(" = ", 1)
            out[lhs] = rhs
    return out


def test_shipped_flaggems_table_is_flaggems_first_whatever_is_installed():
    """The lists come from flaggems_ops.txt and gaps.json, not from the Triton found here."""
    text = FLAGGEMS_TABLE.read_text()
    rules = _rules(text)
    firsts = [op for op, rhs in rules.items() if rhs.startswith("flaggems,")]
    assert len(firsts) > 300
    assert rules["silu"] == f"flaggems, {BOX}, cpu"
    assert rules["add.Tensor"] == f"flaggems, {BOX}, cpu"
    gaps = load_gaps()
    for op in gaps:
        assert "flaggems" not in rules.get(op, ""), op
    # One exclusion, its reason carried from dcu-installation.md into gaps.json and the table.
    mm = gaps["mm"]
    assert mm["dtypes"] == "all" and "#6227" in mm["reason"]
    assert mm["source"]["document"].startswith("dcu-installation.md")
    assert rules["mm"] == BOX and "mm = box:cuda  # upstream-bug: FlagGems#6227" in text
    assert "# flaggems-measured: flag_gems git:e7b4a865 on Hygon DCU, torch 2.10\n" in text
    (measured,) = parse_file(FLAGGEMS_TABLE).flaggems_measured.values()
    assert measured.spec == "git:e7b4a865"


def test_check_detects_a_hand_edited_flaggems_table(tmp_path):
    import shutil

    pkg = tmp_path / "pkg"
    shutil.copytree(TABLE.parent.parent / "routes", pkg / "routes")
    shutil.copytree(TABLE.parent.parent / "routing", pkg / "routing")
    table = pkg / "routes" / "dcu-flaggems.conf"
    text = table.read_text()
    assert generate.main(["--check", "--dir", str(pkg)]) == 0
    table.write_text(text.replace(f"silu = flaggems, {BOX}, cpu\n", f"silu = {BOX}\n"))
    assert generate.main(["--check", "--dir", str(pkg)]) == 1
    table.write_text(text.replace("mm = box:cuda  #", "mm = flaggems, box:cuda, cpu  #"))
    assert generate.main(["--check", "--dir", str(pkg)]) == 1


def test_a_dtype_gap_keeps_flaggems_first_for_the_other_dtypes(tmp_path):
    import json

    data = json.loads(generate.GAPS.read_text())
    data["gaps"]["abs"] = {
        "dtypes": ["int64"],
        "family": "test",
        "reason": "a measured int64 failure",
        "source": {"document": "test", "section": "test"},
    }
    gaps = tmp_path / "gaps.json"
    gaps.write_text(json.dumps(data))
    text = generate.flaggems_text(["abs", "mm"], "test", {"aten::abs", "aten::mm"}, gaps)
    rules = _rules(text)
    assert rules["abs"] == f"flaggems, {BOX}, cpu" and rules["abs[int64]"] == BOX
    assert rules["mm"] == BOX


def test_flaggems_backend_off_with_reason_and_gems_vendor_hygon(monkeypatch):
    monkeypatch.delenv("GEMS_VENDOR", raising=False)
    ok, why = flaggems.hcu_triton()
    if not ok:
        assert flaggems.register_backend() is False
        assert flaggems.status() == f"off: {why}"
    flaggems._prepare_environment()
    import os

    assert os.environ["GEMS_VENDOR"] == "hygon"
    monkeypatch.setenv("FLAGOS_FLAGGEMS", "0")
    assert flaggems.register_backend() is False and "FLAGOS_FLAGGEMS=0" in flaggems.status()


def test_tables_name_this_torch_minor():
    from torch_fl.routing.validation import torch_minor

    # dcu.conf is derived when read: the same on every minor; the FlagGems table is generated.
    assert "generated-for" not in TABLE.read_text()
    assert f"generated-for: torch {torch_minor()}" in FLAGGEMS_TABLE.read_text()
    assert torch.__version__.startswith(torch_minor())
