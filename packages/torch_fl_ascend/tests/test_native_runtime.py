"""The aclrt runtime under the flagos device: core's shared native-runtime tests (those of
``torch_fl.native_runtime_tests`` that gcu and musa run too) in aclrt's dialect: device-scoped
pointers, peer copies, errors naming call, NPU and status. Left out: the naive cross-device
``aclrtMemcpy`` check, whose four-argument call does not fit aclrtMemcpy's destMax
(test_runtime.py checks that the runtime's copies across NPUs go through peer access)."""

from __future__ import annotations

import pytest
from torch_fl.native_runtime_tests import (  # noqa: F401  (the shared tests, collected here)
    Dialect,
    native,
    test_allocations_are_freed_on_their_own_device,
    test_device_0_to_device_1_copy_moves_the_bytes,
    test_events_time_and_streams_are_per_device,
    test_failed_sdk_call_is_an_error_naming_call_device_and_status,
    test_free_inside_an_allocation_is_an_invalid_pointer,
    test_more_devices_than_pytorch_can_number_is_a_clear_error,
    test_op_on_device_1_while_device_0_is_current,
    test_out_of_memory_is_torch_out_of_memory,
    test_probe_and_native_stream_are_in_the_table,
    test_runtime_name_and_capabilities,
    test_the_vendor_says_it_runs_on_the_emulator,
    test_view_as_real_and_complex_are_aliases,
)

pytestmark = pytest.mark.ascend


@pytest.fixture(scope="session")
def dialect() -> Dialect:
    return Dialect(
        vendor="ascend",
        runtime="aclrt",
        device="Ascend NPU",
        # aclnn ops and other kernels on one aclrtStream run in stream order; NPU memory is
        # device-scoped. CAP_GRAPHS too (test_runtime.py): not among the shared suite's names.
        capabilities=frozenset({"CAP_PEER_COPY", "CAP_EVENT_TIMING", "CAP_PINNED_HOST_MEMORY"}),
        memcpy="aclrtMemcpy",
        cross_device_status=100000,  # ACL_ERROR_INVALID_PARAM (its test is left out, above)
        peer_copy="aclrtMemcpyAsync",
        # x.cpu() copies into pageable memory, which aclrtMemcpyAsync may not touch: the runtime
        # copies it with aclrtMemcpy once the stream drained.
        async_copy="aclrtMemcpy",
        illegal_address="ACL_ERROR_RT_INTERNAL_ERROR",  # a fault status the emulator names
        malloc="aclrtMalloc",
        emulator="CANN emulator",
        device_count_env="ASCEND_EMU_DEVICES",
    )
