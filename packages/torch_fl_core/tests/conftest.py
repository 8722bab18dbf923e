"""Fixtures shared by core's unit tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="module")
def flagos():
    """``torch.flagos`` on the sim runtime: these tests read sim's allocator and controls, which
    other runtimes do not have (they skip there, naming the runtime)."""
    import torch_fl

    mod = getattr(torch, "flagos", None)
    if mod is None or not mod.is_available():
        pytest.skip("no flagos device")
    runtime = torch_fl._C.runtime_name()
    if runtime != "sim":
        pytest.skip(f"needs the sim runtime (its pool and test controls); runtime is {runtime!r}")
    return mod
