"""The MUSA emulator's MCCL (libmccl.so) enforces MCCL's contract: core's shared suite of emulated
NCCL-style libraries (torch_fl.nccl_style_emulator_tests), with MCCL's reach (64-bit reductions,
groups mixing kinds of operation), and what the worker streams add: an operation is queued behind
its stream's earlier work and returns before it ran, and a group runs on one stream.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from torch_fl.nccl_style_emulator_tests import *  # noqa: F403  (the shared tests, collected here)
from torch_fl.nccl_style_emulator_tests import INVALID_USAGE, SUCCESS, CclDialect, run_ranks

pytestmark = pytest.mark.musa

NOT_READY = 600


@pytest.fixture(scope="session")
def ccl():
    prefix = Path(__file__).resolve().parents[1] / "emulator" / "prefix"
    return CclDialect(
        prefix,
        "musa",
        runtime="musa",
        library="mccl",
        device="MUSA GPU",
        reduces_64bit=True,
        mixed_groups=True,
    )


def test_an_operation_waits_for_its_streams_earlier_work(ccl, tmp_path):
    for out in run_ranks(ccl, tmp_path, "held_stream", 2):
        assert out["call"] == SUCCESS and out["queued"] == NOT_READY, out
        assert out["before"] == [out["rank"] + 1.0] * 2, out
        assert out["async"] == 0 and out["values"] == [[3.0, 3.0]], out


def test_a_group_runs_on_one_stream(ccl, tmp_path):
    (out,) = run_ranks(ccl, tmp_path, "two_streams_group", 1)
    assert out["call"] == INVALID_USAGE, out
    assert "the emulator runs a group on one stream" in out["msg"], out
