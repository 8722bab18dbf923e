"""tools/fuzz, the differential fuzzer: programs are reproducible from their seed, every
statement of the table builds, the comparison finds a difference when there is one, and the
command line runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from fuzz.cli import run_seed  # noqa: E402
from fuzz.comparison import EXPECTED, compare_program  # noqa: E402
from fuzz.generator import Gen, gen_program  # noqa: E402
from fuzz.statements import misc  # noqa: E402

pytestmark = pytest.mark.tooling


def test_a_seed_is_its_program():
    assert gen_program(7) == gen_program(7)
    assert gen_program(7)[0] != gen_program(8)[0]


def test_the_misc_table_is_whole():
    named = set(misc.TEMPLATES) | set(misc.CHOICES) | set(misc.BUILDERS)
    assert set(misc.ORDER) == named
    assert not set(misc.TEMPLATES) & set(misc.CHOICES)
    assert not (set(misc.TEMPLATES) | set(misc.CHOICES)) & set(misc.BUILDERS)


@pytest.mark.parametrize("name", misc.ORDER)
def test_every_misc_statement_builds_valid_python(name):
    built = 0
    for seed in range(6):
        g = Gen(seed)
        g.base()
        x = g.pick()
        c = misc.Context(g, x, g.fresh("r"), [x])
        line = misc.build(c, name)
        if line is None:  # the statement does not apply to this variable (a 0-dim one)
            continue
        compile(line, "<statement>", "exec")
        assert line.startswith(f"{c.name} = "), line
        assert set(c.uses) <= set(g.tags), (line, c.uses)
        built += 1
    assert built, f"{name} never built a statement"


def _program(*lines):
    meta = [{"uses": [], "op": "base"}] + [{"uses": ["b1"], "op": "probe"}] * (len(lines) - 1)
    return list(lines), meta, {"b1": "D0", "r2": "D0"}


def test_a_different_result_is_found():
    found = compare_program(
        *_program(
            "b1 = mk((3,), 'float32', 1, dev)",
            "r2 = b1 * (2 if b1.device.type == 'cpu' else 3)",
        )
    )
    assert found is not None and found["kind"] == "result" and found["line"] == 1, found


def test_a_missing_error_is_found():
    found = compare_program(
        *_program(
            "b1 = mk((3,), 'float32', 1, dev)",
            "r2 = b1.sum() if b1.device.type != 'cpu' else b1.no_such_method()",
        )
    )
    assert found is not None and found["kind"] == "error-presence", found


def test_programs_agree_with_cpu():
    from torch_fl import routing

    backends = {route.backend for route in routing.active_table().routes.values()}
    if not backends <= {"box:cpu", "cpu", "composite"}:
        # Bit-exact agreement holds where every routed kernel is CPU's. A native vendor's NaN
        # payloads and the order of its argument checks may differ: fuzz it by hand and read the
        # findings.
        pytest.skip(f"the fuzzer compares bit for bit; these routes run {sorted(backends)[:4]}")
    if torch.flagos.device_count() < 2:
        pytest.skip("needs two flagos devices (programs use flagos:0 and flagos:1)")
    verdicts = [run_seed(seed) for seed in range(25)]
    bad = [v for v in verdicts if v is not None and v["kind"] not in EXPECTED]
    assert not bad, json.dumps(bad, indent=1)[:3000]


def test_command_line(tmp_path):
    out = tmp_path / "found.jsonl"
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "differential_fuzz.py"), "--seed", "0", "--count", "3",
         "--out", str(out), "--show"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "seeds 0..2:" in done.stderr
    assert (tmp_path / "found.jsonl.progress").read_text() == "3"
