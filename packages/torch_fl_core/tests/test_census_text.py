"""The census's text summary: a reason a preference list passed a choice over is said once, with
the operators it applies to, however many operators share it."""

from __future__ import annotations

import pytest
import torch_fl  # noqa: F401  (sets up flagos)
from torch_fl import census

WHY = "not registered in this process: FlagGems is off: no Triton is installed"


def _resolved(ops: list[str], **extra: dict) -> dict[str, dict]:
    out = {
        op: {
            "winner": "gcu",
            "choices": ["flaggems", "gcu", "cpu"],
            "skipped": {"flaggems": WHY},
            "rule": "gcu.conf:1",
        }
        for op in ops
    }
    out.update(extra)
    return out


@pytest.fixture
def fake_lists(monkeypatch):
    def install(resolved: dict[str, dict]) -> dict[str, dict[str, int]]:
        monkeypatch.setattr(census, "resolutions", lambda ops: resolved)
        return {op: {"gcu": 1} for op in resolved}

    return install


def test_a_reason_shared_by_many_operators_is_said_once(fake_lists):
    ops = [f"aten::op{i:02d}" for i in range(31)]
    text = census.summary(fake_lists(_resolved(ops)))
    assert text.count(WHY) == 1, text
    assert "  op00 = flaggems, gcu, cpu -> gcu\n" in text + "\n", text
    line = next(ln for ln in text.splitlines() if WHY in ln)
    assert line.startswith("  skipped flaggems for 31 operators (op00, op01, "), line
    assert "and 23 more): " + WHY in line, line


def test_a_reason_of_one_operator_stays_on_its_line(fake_lists):
    other = {
        "winner": "cpu",
        "choices": ["box:mps", "cpu"],
        "skipped": {"box:mps": "not registered in this process"},
        "rule": "t.conf:2",
    }
    text = census.summary(
        fake_lists(_resolved(["aten::mm", "aten::addmm"], **{"aten::abs": other}))
    )
    assert "  abs = box:mps, cpu -> cpu; skipped box:mps: not registered in this process" in text
    assert f"  skipped flaggems for 2 operators (addmm, mm): {WHY}" in text, text
    assert text.count(WHY) == 1, text
