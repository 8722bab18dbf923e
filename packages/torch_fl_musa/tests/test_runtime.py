"""The MUSA runtime under the flagos device: core's shared native-runtime tests in the MUSA
runtime's dialect (device-scoped pointers, peer copies, errors naming call, GPU and status)."""

from __future__ import annotations

import pytest
import torch
from torch_fl.native_runtime_tests import *  # noqa: F403  (the shared tests, collected here)
from torch_fl.native_runtime_tests import Dialect

pytestmark = pytest.mark.musa


@pytest.fixture(scope="session")
def dialect() -> Dialect:
    return Dialect(
        vendor="musa",
        runtime="musart",
        device="MUSA GPU",
        # muDNN and Triton kernels launch through one runtime onto one stream: ordered, as on CUDA.
        # CAP_GRAPHS too (tests/test_graphs.py): not among the shared suite's names.
        capabilities=frozenset({"CAP_PEER_COPY", "CAP_EVENT_TIMING", "CAP_PINNED_HOST_MEMORY"}),
        memcpy="musaMemcpy",
        cross_device_status=1,  # musaErrorInvalidValue
        peer_copy="musaMemcpyPeerAsync",
        async_copy="musaMemcpyAsync",
        illegal_address="musaErrorIllegalAddress",
        malloc="musaMalloc",
        emulator="MUSA emulator",
        device_count_env="MUSA_EMU_DEVICE_COUNT",
    )


def test_work_queued_on_a_stream_really_runs_later(emu, musa):
    """The emulator's streams are asynchronous (a worker per stream), so stream order, not
    submission, is what makes results right: a chain of ops on a side stream, then the default
    stream waiting for it."""
    x = torch.arange(1 << 16, dtype=torch.float32, device="flagos:0")
    side = torch.flagos.Stream(device="flagos:0")
    side.wait_stream(torch.flagos.current_stream(0))
    with torch.flagos.stream(side):
        y = x
        for _ in range(20):
            y = y * 2 - x  # y stays x
    torch.flagos.current_stream(0).wait_stream(side)
    assert torch.equal((y - x).abs().sum().cpu(), torch.tensor(0.0))


def test_pinned_host_memory_round_trips_asynchronously(musa):
    x = torch.randn(4096).pin_memory()
    assert x.is_pinned()
    d = x.to("flagos:1", non_blocking=True)
    back = torch.empty_like(x).pin_memory()
    back.copy_(d, non_blocking=True)
    torch.flagos.synchronize(1)
    assert torch.equal(back, x)
