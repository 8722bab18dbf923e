"""The topsrt runtime under the flagos device: core's shared native-runtime tests in topsrt's
dialect (device-scoped pointers, peer copies, errors), and what is topsrt's own."""

from __future__ import annotations

import ctypes

import pytest
from torch_fl.native_runtime_tests import *  # noqa: F403  (the shared tests, collected here)
from torch_fl.native_runtime_tests import Dialect, _table_function

pytestmark = pytest.mark.gcu


@pytest.fixture(scope="session")
def dialect() -> Dialect:
    return Dialect(
        vendor="gcu",
        runtime="topsrt",
        device="GCU card",
        # Triton and topsaten kernels on one stream are not ordered by the hardware; GCU memory is
        # device-scoped.
        capabilities=frozenset(
            {
                "CAP_PEER_COPY",
                "CAP_EVENT_TIMING",
                "CAP_UNORDERED_PRODUCERS",
                "CAP_PINNED_HOST_MEMORY",
            }
        ),
        memcpy="topsMemcpy",
        cross_device_status=17,  # topsErrorInvalidDevicePointer
        peer_copy="topsMemcpyPeerAsync",
        async_copy="topsMemcpyAsync",
        illegal_address="topsErrorIllegalAddress",
        malloc="topsMalloc",
        emulator="TopsRider emulator",
        device_count_env="TOPS_EMU_DEVICE_COUNT",
    )


def test_the_tops_stream_export_left_for_the_table(gcu, dialect):
    lib, _ = _table_function(dialect, "native_stream", ctypes.c_int)
    assert not hasattr(lib, "tfl_gcu_tops_stream"), "tfl_gcu_tops_stream left the ABI (v1.2)"
