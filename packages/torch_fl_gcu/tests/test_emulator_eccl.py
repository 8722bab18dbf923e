"""The TopsRider emulator's ECCL (libeccl.so) enforces ECCL's contract: core's shared suite of
emulated NCCL-style libraries (torch_fl.nccl_style_emulator_tests), with ECCL's documented limits
(64-bit types in ecclBroadcast and ecclAllGather only, one kind of operation per group).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from torch_fl.nccl_style_emulator_tests import *  # noqa: F403  (the shared tests, collected here)
from torch_fl.nccl_style_emulator_tests import CclDialect

pytestmark = pytest.mark.gcu


@pytest.fixture(scope="session")
def ccl():
    prefix = Path(__file__).resolve().parents[1] / "emulator" / "prefix"
    return CclDialect(
        prefix,
        "gcu",
        runtime="tops",
        library="eccl",
        device="GCU",
        reduces_64bit=False,
        mixed_groups=False,
    )
