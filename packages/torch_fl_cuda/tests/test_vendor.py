"""The cuda vendor object, FlagGems discovery and the route generator, on any machine."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch
import torch_fl_cuda
from torch_fl_cuda import flaggems
from torch_fl_cuda.routing import generate

pytestmark = pytest.mark.cuda


def test_entry_point_names_the_vendor():
    from importlib.metadata import entry_points

    eps = {ep.name: ep for ep in entry_points(group="torch_fl.vendors")}
    assert "cuda" in eps
    assert eps["cuda"].load() is torch_fl_cuda.vendor


def test_runtime_is_the_delegate_runtime():
    assert torch_fl_cuda.vendor.runtime_library() == "delegate:cuda"
    assert torch_fl_cuda.vendor.name == "cuda"
    # torch.profiler: CUPTI times the boxed CUDA kernels (test_profiler_cupti.py on a GPU).
    assert torch_fl_cuda.vendor.profiler_activity is torch.profiler.ProfilerActivity.CUDA


@pytest.mark.skipif(torch.version.cuda is not None, reason="checks the CPU-build explanation")
def test_absent_on_cpu_torch_with_a_reason():
    v = torch_fl_cuda.vendor
    assert v.is_present() is False
    assert "CPU-only build" in v.why_absent()


def test_cuda_vendor_chosen_without_device_reports_zero_devices_and_why():
    if torch.version.cuda is not None and torch.cuda.device_count() > 0:
        pytest.skip("this machine has a GPU")
    code = textwrap.dedent(
        """
        import torch
        print(torch.flagos.device_count())
        try:
            torch.empty(1, device="flagos")
        except Exception as e:
            print("ERR", str(e).splitlines()[0])
        """
    )
    env = {"FLAGOS_VENDOR": "cuda", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "0"
    assert "cuda" in lines[1] and "ERR" in lines[1]


@pytest.fixture
def fake_flag_gems(tmp_path, monkeypatch):
    """Writes a fake ``flag_gems`` package and hides the real one for the test; afterwards the real
    one (if this process had it, as on a GPU machine with FlagGems) is back and registered again,
    so later tests route to its kernels, not to the fake's."""
    from torch_fl.routing import flaggems as core

    real = {k: v for k, v in sys.modules.items() if k == "flag_gems" or k.startswith("flag_gems.")}
    was_on = flaggems.status().startswith("on:")
    for k in real:
        del sys.modules[k]
    monkeypatch.setattr(core, "_table", None)

    def write(body: str) -> None:
        pkg = tmp_path / "flag_gems"
        pkg.mkdir()
        (pkg / "__init__.py").write_text(textwrap.dedent(body))
        monkeypatch.syspath_prepend(str(tmp_path))

    yield write
    for k in [k for k in sys.modules if k == "flag_gems" or k.startswith("flag_gems.")]:
        del sys.modules[k]
    sys.modules.update(real)
    core._table = None
    monkeypatch.undo()  # the real package's path and environment first, then register it again
    if was_on:
        assert flaggems.register_backend() is True


def test_claimed_overloads_read_without_import(fake_flag_gems):
    fake_flag_gems(
        """
        raise RuntimeError("must not be imported")
        _FULL_CONFIG = (
            ("abs", abs),
            ("add.Tensor", abs),
            ("_to_copy", abs, lambda: True),
            ("abs", abs),
        )
        """
    )
    assert flaggems.claimed_overloads() == ["_to_copy", "abs", "add.Tensor"]


def test_register_sets_nvidia_and_cuda_views(fake_flag_gems, monkeypatch):
    # The mechanism is core's (packages/torch_fl_core/tests/test_flaggems_backend.py); here the
    # cuda vendor's specifics: GEMS_VENDOR=nvidia and CUDA-typed alias views.
    from torch_fl.routing import flaggems as core
    from torch_fl.routing import python_backends

    fake_flag_gems("_FULL_CONFIG = (('abs', abs),)\n")
    monkeypatch.delenv("GEMS_VENDOR", raising=False)
    monkeypatch.delenv("FLAGOS_FLAGGEMS", raising=False)
    assert flaggems.register_backend() is True
    import os

    assert os.environ["GEMS_VENDOR"] == "nvidia"
    assert flaggems.status().startswith("on: 1 of the 1")
    backend = python_backends()[core.BACKEND]
    assert backend.has_kernel("aten::abs")
    assert backend.core_views and backend.to_views is None  # core makes the CUDA views


def test_switch_off(monkeypatch):
    monkeypatch.setenv("FLAGOS_FLAGGEMS", "0")
    assert flaggems.register_backend() is False
    assert flaggems.status() == "off: FLAGOS_FLAGGEMS=0"


def test_flaggems_rules_per_dtype():
    survey = {
        "overloads": {
            "abs": {"verdict": "flaggems", "flaggems_dtypes": ["float32", "float16"]},
            "mm": {"verdict": "slower", "flaggems_dtypes": []},
            "neg": {"verdict": "wrong"},
        }
    }
    lines, counts = generate.flaggems_rules(survey)
    assert counts == {"flaggems": 1, "slower": 1, "wrong": 1}
    assert lines[0] == "abs = flaggems"
    rule = lines[1]
    assert rule.startswith("abs[") and rule.endswith("] = box:cuda")
    dtypes = rule[4 : rule.index("]")].split(",")
    assert "float32" not in dtypes and "float16" not in dtypes
    assert {"bfloat16", "int64", "bool", "float64"} <= set(dtypes)
    assert len(lines) == 2


def test_generator_check_on_this_machine():
    # Every file depends only on the survey and the derive rules, so all are checked on any torch.
    out = subprocess.run(
        [sys.executable, "-m", "torch_fl_cuda.routing.generate", "--check"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "cuda tables and gap set up to date" in out.stdout


def test_box_table_is_derived_from_this_torch():
    from torch_fl.routing import parse_file
    from torch_fl_cuda.routing import generate as gen

    table = parse_file(gen.TABLE)
    routed, _ = gen.generate_box()
    assert {r.op for r in table.rules} == set(routed)
    assert all(r.backend == "box:cuda" and not r.dtypes for r in table.rules)
    if torch.version.cuda is not None:  # a CUDA build: its CUDA kernels are routed
        assert "aten::mm.out" in set(routed) and "aten::linear" not in set(routed)


def test_gap_set_is_what_the_flaggems_rules_leave_on_box():
    survey = {
        "meta": {"dtypes": ["float32", "float16", "int64"], "noise": 0.05, "torch": "2.11.0+cu130"},
        "overloads": {
            "abs": {
                "verdict": "flaggems",
                "flaggems_dtypes": ["float32"],
                "ok_profiles": ["float32/2d", "float16/2d"],
                "timing_us": {"float16/2d": {"ratio": 1.5}, "float32/2d": {"ratio": 0.5}},
            },
            "mm": {"verdict": "slower", "timing_us": {"float32/2d": {"ratio": 2.0}}},
            "neg": {
                "verdict": "wrong",
                "profiles": {"int64/1d": {"box": "ok", "flaggems": "Tensor-likes are not equal!"}},
            },
            "zero_": {"verdict": "timeout", "reason": "no result within 150 s"},
        },
    }
    doc = generate.gaps(survey)
    gaps = doc["gaps"]
    assert sorted(gaps) == ["abs", "mm", "neg", "zero_"]
    lines, _ = generate.flaggems_rules(survey)
    assert lines[1] == f"abs[{','.join(gaps['abs']['dtypes'])}] = box:cuda"
    assert gaps["abs"]["family"] == "partial" and "slower x1.50: float16" in gaps["abs"]["reason"]
    assert "not surveyed: bfloat16, float64" in gaps["abs"]["reason"]
    assert "no profile: int64" in gaps["abs"]["reason"]
    assert gaps["mm"] == {
        "dtypes": "all",
        "family": "slower",
        "reason": "FlagGems/box:cuda time, worst profile per correct dtype: float32 x2.00",
        "source": {"document": "data/flaggems_survey.json", "section": "overloads.mm"},
    }
    assert gaps["neg"]["family"] == "wrong" and "int64/1d" in gaps["neg"]["reason"]
    assert gaps["zero_"]["reason"] == "no result within 150 s"
    assert doc["measured"]["torch"] == "2.11"
    assert generate.gaps(survey) == doc  # deterministic


def test_checked_in_gap_set_matches_the_flaggems_table():
    from torch_fl.routing.route_table import parse_file, short_op_name

    doc = json.loads(generate.GAPS.read_text())
    surveyed = json.loads(generate.SURVEY.read_text())["overloads"]
    assert set(doc["gaps"]) <= set(surveyed)
    rules = parse_file(generate.FLAGGEMS_TABLE).rules
    routed = {short_op_name(r.op) for r in rules if r.backend == "flaggems"}
    for op in surveyed:
        entry = doc["gaps"][op]
        assert (entry["dtypes"] != "all") == (op in routed), op
        assert entry["family"] in doc["families"] and entry["reason"], op


def test_check_fails_on_a_stale_gap_set(tmp_path):
    import shutil

    pkg = tmp_path / "pkg"
    for sub in ("routes", "data"):
        shutil.copytree(generate.HERE / sub, pkg / sub)
    (pkg / "routing").mkdir()
    gaps = pkg / "routing" / "gaps.json"
    gaps.write_text(generate.GAPS.read_text().replace('"family": "slower"', '"family": "x"', 1))
    assert generate.main(["--check", "--dir", str(pkg)]) == 1
    assert generate.main(["--dir", str(pkg)]) == 0
    assert gaps.read_text() == generate.GAPS.read_text()
    assert generate.main(["--check", "--dir", str(pkg)]) == 0


def test_checked_in_tables_parse():
    from torch_fl.routing.route_table import parse_file

    for path in (generate.TABLE, generate.FLAGGEMS_TABLE):
        if not path.exists():
            pytest.fail(f"{path} is missing: generate it on a GPU machine")
        table = parse_file(path)
        assert len(table.rules) > 0 or path == generate.FLAGGEMS_TABLE


def test_survey_json_well_formed():
    path = generate.SURVEY
    if not path.exists():
        pytest.fail(f"{path} is missing: run python -m torch_fl_cuda.survey on a GPU")
    doc = json.loads(path.read_text())
    assert doc["meta"]["flag_gems"]
    verdicts = {e["verdict"] for e in doc["overloads"].values()}
    assert verdicts <= {
        "flaggems",
        "slower",
        "wrong",
        "error",
        "timeout",
        "no-profile",
        "unsurveyed",
    }
    for op, e in doc["overloads"].items():
        if e["verdict"] == "flaggems":
            assert e["flaggems_dtypes"], op
