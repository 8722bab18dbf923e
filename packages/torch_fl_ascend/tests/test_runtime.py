"""The aclrt runtime (libtorch_fl_ascend_runtime.so) through its C ABI, against the CANN emulator.

No torch here: the table is reached with ctypes through tfl_runtime_get(1), with the ctypes mirror
of tfl_runtime_v1 from core's runtime tests, so these tests pin down what the runtime does with
CANN (device-scoped pointers, peer access, stream / event status polarity, host callbacks,
errors carrying the aclError and the call) independently of the torch glue. Cases that need a
different emulated machine (device count, memory, no device) run in a subprocess, because the
toolkit reads its environment once per process.

The toolkit is ``$ASCEND_TOOLKIT_HOME/lib64/libascendcl.so`` (conftest points it at the in-tree
emulator prefix), loaded before the runtime library as torch_fl_ascend.sdk does. Set
TORCH_FL_ASCEND_RUNTIME_LIBRARY to test a runtime library outside the installed package.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from ctypes import POINTER, byref, c_char_p, c_float, c_int, c_int32, c_uint32, c_void_p
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = [pytest.mark.ascend, pytest.mark.runtime]

RUNTIME_ENV = "TORCH_FL_ASCEND_RUNTIME_LIBRARY"
EMULATOR_PREFIX = Path(__file__).resolve().parents[1] / "emulator" / "prefix"


def _core_runtime_mirror() -> ModuleType:
    """core's tests/test_sim_runtime.py, loaded by path for its ctypes mirror of the table
    (RuntimeV1, the Runtime helpers, Gate and the status constants): one mirror of runtime.h."""
    path = Path(__file__).resolve().parents[2] / "torch_fl_core" / "tests" / "test_sim_runtime.py"
    spec = importlib.util.spec_from_file_location("_tfl_runtime_mirror", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_m = _core_runtime_mirror()
RuntimeV1, Runtime, Gate, HOST_FN = _m.RuntimeV1, _m.Runtime, _m.Gate, _m.HOST_FN
OK, INVALID_VALUE, INVALID_DEVICE = _m.OK, _m.INVALID_VALUE, _m.INVALID_DEVICE
OUT_OF_MEMORY, INVALID_POINTER, INVALID_MEMCPY_KIND = (
    _m.OUT_OF_MEMORY,
    _m.INVALID_POINTER,
    _m.INVALID_MEMCPY_KIND,
)
NOT_READY, INVALID_HANDLE, DEVICE_ERROR = _m.NOT_READY, _m.INVALID_HANDLE, _m.DEVICE_ERROR
CAPTURE = _m.CAPTURE
MODE_GLOBAL, MODE_THREAD_LOCAL, MODE_RELAXED = _m.MODE_GLOBAL, _m.MODE_THREAD_LOCAL, _m.MODE_RELAXED
CAPTURE_NONE, CAPTURE_ACTIVE, CAPTURE_INVALIDATED = (
    _m.CAPTURE_NONE,
    _m.CAPTURE_ACTIVE,
    _m.CAPTURE_INVALIDATED,
)
H2H, H2D, D2H, D2D = _m.H2H, _m.H2D, _m.D2H, _m.D2D
POINTER_UNKNOWN, POINTER_DEVICE, POINTER_HOST = (
    _m.POINTER_UNKNOWN,
    _m.POINTER_DEVICE,
    _m.POINTER_HOST,
)
EVENT_DISABLE_TIMING = _m.EVENT_DISABLE_TIMING
CAP = {
    name: getattr(_m, name)
    for name in (
        "CAP_HOST_ADDRESSABLE_MEMORY",
        "CAP_PEER_COPY",
        "CAP_EVENT_TIMING",
        "CAP_UNORDERED_PRODUCERS",
        "CAP_PINNED_HOST_MEMORY",
        "CAP_GRAPHS",
    )
}

# aclError values (acl/acl_base.h, acl/error_codes/rt_error_codes.h).
ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_RT_MEMORY_ALLOCATION = 207001
ACL_ERROR_RT_INTERNAL_ERROR = 507000
ACL_ERROR_RT_AICORE_EXCEPTION = 507015


# ---- locating the libraries (without importing torch) ---------------------------


def toolkit_library() -> str:
    for var in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME"):
        home = os.environ.get(var, "").strip()
        if home:
            return str(Path(home) / "lib64" / "libascendcl.so")
    return str(EMULATOR_PREFIX / "lib64" / "libascendcl.so")


def runtime_library() -> str:
    if os.environ.get(RUNTIME_ENV, "").strip():
        return os.environ[RUNTIME_ENV]
    try:
        from torch_fl_ascend import library_dir  # imports neither torch nor torch_fl
    except ImportError:
        pytest.skip(f"torch-fl-ascend is not installed and {RUNTIME_ENV} is unset")
    return str(library_dir() / "libtorch_fl_ascend_runtime.so")


def _load() -> tuple[ctypes.CDLL, ctypes.CDLL]:
    acl_path, rt_path = toolkit_library(), runtime_library()
    for path in (acl_path, rt_path):
        if not Path(path).is_file():
            pytest.skip(f"{path} is missing (emulator or package not built)")
    acl = ctypes.CDLL(acl_path, mode=ctypes.RTLD_GLOBAL)  # before the runtime needs it
    lib = ctypes.CDLL(rt_path)
    lib.tfl_runtime_get.argtypes = [c_uint32]
    lib.tfl_runtime_get.restype = POINTER(RuntimeV1)
    return acl, lib


class Emulator:
    """ascend_emulator.h through ctypes: faults by toolkit function name, call counts."""

    def __init__(self, acl: ctypes.CDLL) -> None:
        self.acl = acl
        acl.aclEmuInjectFault.argtypes = [c_char_p, c_int, c_int]
        acl.aclEmuCallCount.argtypes = [c_char_p]
        acl.aclEmuCallCount.restype = ctypes.c_uint64
        acl.aclEmuLiveAllocations.argtypes = [c_int32]
        acl.aclEmuLiveAllocations.restype = ctypes.c_uint64
        acl.aclEmuViolationCount.restype = ctypes.c_uint64

    def fault(self, name: str, status: int, nth: int = 1) -> None:
        assert self.acl.aclEmuInjectFault(name.encode(), nth, status) == 0

    def calls(self, name: str) -> int:
        return int(self.acl.aclEmuCallCount(name.encode()))

    def live(self, device: int) -> int:
        return int(self.acl.aclEmuLiveAllocations(device))

    def clear_faults(self) -> None:
        self.acl.aclEmuReset()


@pytest.fixture(scope="module")
def libs() -> tuple[ctypes.CDLL, ctypes.CDLL]:
    return _load()


@pytest.fixture(scope="module")
def rt(libs) -> Iterator[Runtime]:
    runtime = Runtime(libs[1].tfl_runtime_get(1).contents)
    runtime.check(runtime.t.init())
    runtime.check(runtime.t.set_device(0))
    yield runtime


@pytest.fixture(scope="module")
def emu(libs) -> Emulator:
    if not hasattr(libs[0], "aclEmuInjectFault"):
        pytest.skip("the toolkit is a real CANN, not the emulator")
    return Emulator(libs[0])


@pytest.fixture
def two(rt: Runtime) -> Runtime:
    if rt.device_count() < 2:
        pytest.skip("needs two NPUs (ASCEND_EMU_DEVICES >= 2)")
    return rt


@pytest.fixture(autouse=True)
def _device_0_and_no_faults(request) -> Iterator[None]:
    yield
    if "rt" in request.fixturenames:
        request.getfixturevalue("rt").t.set_device(0)
    if "emu" in request.fixturenames:
        request.getfixturevalue("emu").clear_faults()


def on_device(rt: Runtime, device: int, fn):
    rt.check(rt.t.set_device(device))
    try:
        return fn()
    finally:
        rt.check(rt.t.set_device(0))


# ---- table, devices -------------------------------------------------------------------


def test_table_header_capabilities_and_ipc_left_out(rt: Runtime, libs) -> None:
    t = rt.t
    assert t.abi_version == 1
    assert t.struct_size == ctypes.sizeof(RuntimeV1)
    assert t.name == b"aclrt"
    assert t.capabilities == (
        CAP["CAP_PEER_COPY"]
        | CAP["CAP_EVENT_TIMING"]
        | CAP["CAP_PINNED_HOST_MEMORY"]
        | CAP["CAP_GRAPHS"]
    ), "NPU memory is device-scoped; aclnn ops and kernels on one stream are ordered"
    assert not libs[1].tfl_runtime_get(2), "an unknown ABI version gives NULL"
    for field in ("ipc_get_handle", "ipc_open_handle", "ipc_close_handle"):
        assert not ctypes.cast(getattr(t, field), c_void_p).value, field
    errors = []
    threads = [threading.Thread(target=lambda: errors.append(t.init())) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == [OK] * 4, "init is idempotent from several threads"
    for name, code in _m.sim.STATUS.items():  # runtime.h's enum spellings
        assert t.status_name(code).decode() == name


def test_probe_counts_npus(libs, rt: Runtime) -> None:
    count, msg = c_int(-1), ctypes.create_string_buffer(256)
    assert rt.t.probe(byref(count), msg, 256) == OK  # the table's (runtime ABI v1.2)
    assert count.value == rt.device_count() >= 1
    assert msg.value == b""
    for symbol in ("tfl_ascend_probe", "tfl_ascend_acl_stream", "tfl_ascend_last_error"):
        assert not hasattr(libs[1], symbol), f"{symbol} left the ABI for the table"


def test_devices_names_and_per_thread_current_device(two: Runtime, emu: Emulator) -> None:
    rt = two
    buf = ctypes.create_string_buffer(64)
    rt.check(rt.t.device_name(1, buf, 64))
    assert buf.value == b"Ascend910B2 (NPU 1)"  # aclrtGetSocName + the index
    assert rt.t.device_name(rt.device_count(), buf, 64) == INVALID_DEVICE
    assert rt.t.set_device(rt.device_count()) == INVALID_DEVICE
    assert f"no Ascend NPU {rt.device_count()}" in rt.error()
    assert rt.t.set_device(-1) == INVALID_DEVICE

    rt.check(rt.t.set_device(1))
    seen: list[int] = []
    worker = threading.Thread(target=lambda: seen.append(rt.get_device()))
    worker.start()
    worker.join()
    assert seen == [0], "a thread that never chose a device is on NPU 0"
    assert rt.get_device() == 1
    # Only "no device chosen yet" means NPU 0: a failing aclrtGetDevice is an error, and the
    # thread stays on its device.
    emu.fault("aclrtGetDevice", ACL_ERROR_RT_INTERNAL_ERROR)
    d = c_int(-7)
    assert rt.t.get_device(byref(d)) == DEVICE_ERROR and d.value == -7
    assert "aclrtGetDevice failed: ACL_ERROR_RT_INTERNAL_ERROR (aclError 507000)" in rt.error()
    assert rt.get_device() == 1


def test_mem_get_info_is_the_current_devices_hbm(two: Runtime, emu: Emulator) -> None:
    rt = two
    free0, total0 = rt.mem_get_info()
    p = on_device(rt, 1, lambda: rt.malloc(1 << 20))
    assert rt.mem_get_info() == (free0, total0), "device 1's allocation is not device 0's"
    free1, total1 = on_device(rt, 1, rt.mem_get_info)
    assert total1 == total0 and free1 <= total1 - (1 << 20)
    if "ASCEND_EMU_MEMORY_MB" not in os.environ:
        assert total0 == 4096 << 20
    rt.check(rt.t.free(p))
    assert on_device(rt, 1, rt.mem_get_info)[0] == free1 + (1 << 20)


# ---- memory -----------------------------------------------------------------------


def test_malloc_free_pointer_info_interior_pointers(rt: Runtime, emu: Emulator) -> None:
    live = emu.live(0)
    p = rt.malloc(1000)
    assert emu.live(0) == live + 1
    assert rt.pointer_info(p) == (POINTER_DEVICE, 0)
    assert rt.pointer_info(p + 999) == (POINTER_DEVICE, 0), "interior pointers find their block"
    assert rt.pointer_info(p + 1000)[0] == POINTER_UNKNOWN
    local = ctypes.create_string_buffer(8)
    assert rt.pointer_info(ctypes.addressof(local)) == (POINTER_UNKNOWN, -1)
    assert rt.pointer_info(None) == (POINTER_UNKNOWN, -1)

    h = rt.host_malloc(100)
    assert rt.pointer_info(h + 50) == (POINTER_HOST, -1)
    assert rt.t.free(h) == INVALID_POINTER, "pinned memory is not freed by free()"
    assert rt.t.host_free(p) == INVALID_POINTER
    rt.check(rt.t.host_free(h))
    assert rt.pointer_info(h)[0] == POINTER_UNKNOWN

    assert rt.t.free(p + 8) == INVALID_POINTER
    assert "not its start" in rt.error()
    rt.check(rt.t.free(p))
    assert rt.t.free(p) == INVALID_POINTER, "double free"
    assert "which no Ascend NPU allocated" in rt.error()
    rt.check(rt.t.free(None))
    assert emu.live(0) == live

    zero = c_void_p(1234)
    calls = emu.calls("aclrtMalloc")
    rt.check(rt.t.malloc(byref(zero), 0))
    assert zero.value is None, "malloc(0) gives NULL"
    assert emu.calls("aclrtMalloc") == calls, "and asks the toolkit for nothing (CANN refuses 0)"


def test_free_runs_on_the_owning_device(two: Runtime, emu: Emulator) -> None:
    rt = two
    live1 = emu.live(1)
    p = on_device(rt, 1, lambda: rt.malloc(256))
    assert rt.pointer_info(p) == (POINTER_DEVICE, 1)
    assert emu.live(1) == live1 + 1
    # What the runtime avoids: CANN refuses aclrtFree of device 1's memory with device 0 current.
    acl = emu.acl
    acl.aclrtFree.argtypes = [c_void_p]
    assert rt.get_device() == 0
    assert acl.aclrtFree(c_void_p(p)) == ACL_ERROR_INVALID_PARAM
    assert emu.live(1) == live1 + 1
    rt.check(rt.t.free(p))  # device 0 current: freed with device 1 current
    assert emu.live(1) == live1
    assert rt.get_device() == 0, "the caller's device is restored"


def test_concurrent_malloc_free_is_thread_safe(rt: Runtime, emu: Emulator) -> None:
    live = emu.live(0)
    errors: list[str] = []

    def churn() -> None:
        for i in range(100):
            p = c_void_p()
            if rt.t.malloc(byref(p), 64 + i) != OK or rt.t.free(p) != OK:
                errors.append(rt.error())

    threads = [threading.Thread(target=churn) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert emu.live(0) == live


# ---- errors --------------------------------------------------------------------------


def test_errors_carry_the_acl_status_the_call_and_canns_message(rt: Runtime, emu: Emulator) -> None:
    emu.fault("aclrtMalloc", ACL_ERROR_RT_MEMORY_ALLOCATION)
    p = c_void_p()
    assert rt.t.malloc(byref(p), 4096) == OUT_OF_MEMORY
    assert p.value is None, "out-parameters are only written on success"
    msg = rt.error()
    for part in (
        "aclrtMalloc on Ascend NPU 0 failed",
        "ACL_ERROR_RT_MEMORY_ALLOCATION (aclError 207001)",
        "4096 bytes",
        "CANN: aclrtMalloc: injected fault",  # aclGetRecentErrMsg's text
    ):
        assert part in msg, msg

    d = rt.malloc(8)
    src = ctypes.create_string_buffer(b"abcdefgh", 8)
    emu.fault("aclrtMemcpy", ACL_ERROR_RT_INTERNAL_ERROR)
    assert rt.t.memcpy(d, ctypes.addressof(src), 8, H2D) == DEVICE_ERROR
    assert "aclrtMemcpy on Ascend NPU 0 failed: ACL_ERROR_RT_INTERNAL_ERROR (aclError 507000)" in (
        rt.error()
    )
    assert "HostToDevice, 8 bytes" in rt.error()
    rt.write(d, b"12345678")  # usable afterwards
    assert rt.read(d, 8) == b"12345678"

    # last_error is per thread.
    other: list[str] = []
    th = threading.Thread(target=lambda: other.append(rt.error()))
    th.start()
    th.join()
    assert other == [""]
    rt.check(rt.t.free(d))


def test_asynchronous_failure_surfaces_at_the_next_sync(rt: Runtime, emu: Emulator) -> None:
    """Memory freed while queued work still uses it: the emulator fails that work, and the
    stream's next synchronize reports it with CANN's message."""
    s = rt.stream()
    d = rt.malloc(64)
    gate = Gate()
    gate.launch(rt, s)
    rt.check(rt.t.memset_async(d, 1, 64, s))
    violations = emu.acl.aclEmuViolationCount()
    rt.check(rt.t.free(d))  # free waits for nothing (runtime.h): a misuse, on purpose
    assert emu.acl.aclEmuViolationCount() == violations + 1
    gate.opened.set()
    assert rt.t.stream_synchronize(s) == DEVICE_ERROR
    msg = rt.error()
    assert "aclrtSynchronizeStream on Ascend NPU 0 failed" in msg, msg
    assert f"(aclError {ACL_ERROR_RT_AICORE_EXCEPTION})" in msg and "CANN: " in msg, msg
    rt.check(rt.t.stream_destroy(s))


# ---- copies --------------------------------------------------------------------------


def test_memcpy_round_trips_and_kinds(rt: Runtime) -> None:
    d = rt.malloc(16)
    rt.write(d, bytes(range(16)))
    assert rt.read(d, 16) == bytes(range(16))
    d2 = rt.malloc(16)
    rt.check(rt.t.memcpy(d2, d, 16, D2D))
    assert rt.read(d2, 16) == bytes(range(16))
    a, b = ctypes.create_string_buffer(b"abcd", 4), ctypes.create_string_buffer(4)
    rt.check(rt.t.memcpy(ctypes.addressof(b), ctypes.addressof(a), 4, H2H))
    assert b.raw == b"abcd"
    rt.check(rt.t.memcpy(None, None, 0, H2D))  # n == 0 is a no-op
    for p in (d, d2):
        rt.check(rt.t.free(p))


def test_wrong_kind_and_overrun_rejected_destination_untouched(rt: Runtime) -> None:
    d = rt.malloc(8)
    rt.write(d, b"DEVICE!!")
    host = ctypes.create_string_buffer(b"host....", 8)
    addr = ctypes.addressof(host)
    assert rt.t.memcpy(addr, d, 8, H2D) == INVALID_MEMCPY_KIND
    assert "HostToDevice does not match" in rt.error() and "Ascend NPU 0" in rt.error()
    assert rt.t.memcpy(d, addr, 8, D2H) == INVALID_MEMCPY_KIND
    assert rt.t.memcpy(addr, addr, 8, D2D) == INVALID_MEMCPY_KIND
    assert rt.t.memcpy_async(addr, d, 8, H2H, None) == INVALID_MEMCPY_KIND
    assert rt.t.memcpy(d, addr, 8, 7) == INVALID_VALUE
    assert host.raw == b"host...."

    src = ctypes.create_string_buffer(b"x" * 16, 16)
    assert rt.t.memcpy(d + 4, ctypes.addressof(src), 8, H2D) == INVALID_VALUE
    assert "overrun its allocation of 8 bytes" in rt.error()
    assert rt.t.memset_async(d, 0, 9, None) == INVALID_VALUE
    rt.check(rt.t.memcpy(d + 4, ctypes.addressof(src), 4, H2D))  # interior, in bounds
    assert rt.read(d, 8) == b"DEVIxxxx"
    rt.check(rt.t.free(d))


def test_async_copies_run_in_stream_order(rt: Runtime, emu: Emulator) -> None:
    s = rt.stream()
    n, hops = 64, 30
    bufs = [rt.malloc(n) for _ in range(hops)]
    pinned = rt.host_malloc(n)
    staging = rt.host_malloc(n)
    ctypes.memmove(staging, bytes(range(n)), n)
    ctypes.memset(pinned, 0, n)
    gate = Gate()
    gate.launch(rt, s)  # nothing below may run before the gate opens
    async_calls = emu.calls("aclrtMemcpyAsync")
    rt.check(rt.t.memcpy_async(bufs[0], staging, n, H2D, s))
    for src, dst in zip(bufs[:-1], bufs[1:], strict=True):
        rt.check(rt.t.memcpy_async(dst, src, n, D2D, s))
    for value in range(1, 40):  # later memsets overwrite earlier ones only in order
        rt.check(rt.t.memset_async(bufs[0], value, n, s))
    rt.check(rt.t.memcpy_async(pinned, bufs[-1], n, D2H, s))
    assert emu.calls("aclrtMemcpyAsync") == async_calls + hops + 1, "pinned copies stay async"
    assert rt.t.stream_query(s) == NOT_READY
    time.sleep(0.05)
    assert ctypes.string_at(pinned, n) == b"\0" * n, "queued behind the gate, not run yet"
    gate.opened.set()
    rt.check(rt.t.stream_synchronize(s))
    assert rt.t.stream_query(s) == OK
    assert ctypes.string_at(pinned, n) == bytes(range(n))
    assert rt.read(bufs[0], n) == bytes([39]) * n
    for p in bufs:
        rt.check(rt.t.free(p))
    for h in (pinned, staging):
        rt.check(rt.t.host_free(h))
    rt.check(rt.t.stream_destroy(s))


def test_pageable_host_memory_is_copied_after_the_streams_work(rt: Runtime, emu: Emulator) -> None:
    """CANN's async copies may only touch aclrtMallocHost memory: with pageable memory the bytes
    move before memcpy_async returns, after the stream's earlier work."""
    s = rt.stream()
    d = rt.malloc(4)
    rt.check(rt.t.memset_async(d, 0x11, 4, s))
    src = ctypes.create_string_buffer(b"old!", 4)
    async_calls = emu.calls("aclrtMemcpyAsync")
    rt.check(rt.t.memcpy_async(d + 2, ctypes.addressof(src), 2, H2D, s))
    ctypes.memmove(src, b"new!", 4)  # pageable memory may be reused at once
    out = ctypes.create_string_buffer(4)
    rt.check(rt.t.memcpy_async(ctypes.addressof(out), d, 4, D2H, s))
    assert out.raw == b"\x11\x11ol", "the D2H into pageable memory is done on return"
    assert emu.calls("aclrtMemcpyAsync") == async_calls
    rt.check(rt.t.free(d))
    rt.check(rt.t.stream_destroy(s))


def test_sync_memcpy_waits_for_the_default_stream(rt: Runtime) -> None:
    d = rt.malloc(4)
    rt.write(d, b"\0" * 4)
    gate = Gate()
    gate.launch(rt, None)
    rt.check(rt.t.memset_async(d, 7, 4, None))
    timer = gate.open_later()
    assert rt.read(d, 4) == b"\x07" * 4  # blocks until the gate opened and the memset ran
    timer.join()
    rt.check(rt.t.free(d))


@pytest.mark.multidevice
def test_peer_copies_between_npus_0_and_1(two: Runtime, emu: Emulator) -> None:
    rt = two
    a = rt.malloc(32)
    rt.write(a, b"\0" * 32)
    b, s1 = on_device(rt, 1, lambda: (rt.malloc(32), rt.stream()))
    on_device(rt, 1, lambda: rt.write(b, b"peer" * 8))
    enables = emu.calls("aclrtDeviceEnablePeerAccess")

    # NULL stream: device 0's default stream, not the source's: ordered both ways around a
    # copy on NPU 1's stream.
    rt.check(rt.t.memcpy_peer_async(a, 0, b, 1, 32, None))
    rt.check(rt.t.stream_synchronize(None))
    assert rt.read(a, 32) == b"peer" * 8
    after_first = emu.calls("aclrtDeviceEnablePeerAccess")
    assert after_first - enables in (0, 2), "both directions, once per pair"

    # A stream of the source device, the other way.
    on_device(rt, 0, lambda: rt.write(a, b"back" * 8))
    rt.check(rt.t.set_device(1))
    rt.check(rt.t.memcpy_peer_async(b, 1, a, 0, 32, None))  # device 1 current: its stream
    rt.check(rt.t.stream_synchronize(None))
    rt.check(rt.t.set_device(0))
    assert on_device(rt, 1, lambda: rt.read(b, 32)) == b"back" * 8
    rt.write(a, b"strm" * 8)
    s0 = rt.stream()
    rt.check(rt.t.memcpy_peer_async(b, 1, a, 0, 32, s0))  # the source's own stream
    rt.check(rt.t.stream_synchronize(s0))
    assert on_device(rt, 1, lambda: rt.read(b, 32)) == b"strm" * 8

    # Synchronous D2D across devices, and memcpy_async D2D across devices.
    rt.write(a, b"sync" * 8)
    rt.check(rt.t.memcpy(b, a, 32, D2D))
    assert on_device(rt, 1, lambda: rt.read(b, 32)) == b"sync" * 8
    on_device(rt, 1, lambda: rt.write(b, b"asyn" * 8))
    rt.check(rt.t.memcpy_async(a, b, 32, D2D, None))
    rt.check(rt.t.stream_synchronize(None))
    assert rt.read(a, 32) == b"asyn" * 8
    assert emu.calls("aclrtDeviceEnablePeerAccess") == after_first, "enabled once"

    assert rt.t.memcpy_peer_async(a, 1, b, 1, 32, None) == INVALID_POINTER  # a is on NPU 0
    assert "expected Ascend NPU 1" in rt.error()
    assert rt.t.memcpy_peer_async(a, 0, b, 1, 33, None) == INVALID_VALUE
    assert rt.read(a, 32) == b"asyn" * 8

    rt.check(rt.t.stream_destroy(s0))
    on_device(rt, 1, lambda: rt.check(rt.t.stream_destroy(s1)))
    rt.check(rt.t.free(a))
    rt.check(rt.t.free(b))


@pytest.mark.multidevice
def test_device_pointer_on_a_stream_of_another_device_is_refused(two: Runtime) -> None:
    rt = two
    b = on_device(rt, 1, lambda: rt.malloc(8))
    assert rt.t.memset_async(b, 0, 8, None) == INVALID_VALUE  # NULL: device 0's stream
    assert "Ascend NPU 1 pointer on a stream of Ascend NPU 0" in rt.error()
    host = rt.host_malloc(8)
    assert rt.t.memcpy_async(host, b, 8, D2H, None) == INVALID_VALUE
    rt.check(rt.t.memcpy(host, b, 8, D2H))  # synchronous copies pick the owner's device
    rt.check(rt.t.host_free(host))
    rt.check(rt.t.free(b))


# ---- streams, host functions -----------------------------------------------------------


def test_host_functions_run_in_stream_order_and_hold_later_work(rt: Runtime) -> None:
    s = rt.stream()
    d = rt.malloc(1)
    pinned = rt.host_malloc(1)
    seen: list[int] = []
    fn = HOST_FN(lambda _data: seen.append(ctypes.string_at(pinned, 1)[0]))
    for value in (1, 2, 3):
        rt.check(rt.t.memset_async(d, value, 1, s))
        rt.check(rt.t.memcpy_async(pinned, d, 1, D2H, s))
        rt.check(rt.t.launch_host_func(s, fn, None))  # sees the copy before it
    gate = Gate()
    gate.launch(rt, s)
    rt.check(rt.t.memset_async(d, 9, 1, s))
    rt.check(rt.t.memcpy_async(pinned, d, 1, D2H, s))
    assert gate.started.wait(5)
    time.sleep(0.05)
    assert rt.t.stream_query(s) == NOT_READY
    assert ctypes.string_at(pinned, 1) == b"\x03", "work after a running host function waits"
    gate.opened.set()
    rt.check(rt.t.stream_synchronize(s))
    assert seen == [1, 2, 3]
    assert ctypes.string_at(pinned, 1) == b"\x09"
    assert rt.t.launch_host_func(s, ctypes.cast(None, HOST_FN), None) == INVALID_VALUE
    rt.check(rt.t.free(d))
    rt.check(rt.t.host_free(pinned))
    rt.check(rt.t.stream_destroy(s))


@pytest.mark.multidevice
def test_host_functions_on_every_device_and_default_stream(two: Runtime) -> None:
    rt = two
    seen: list[int] = []
    fns = [HOST_FN(lambda _d, i=i: seen.append(i)) for i in range(2)]
    rt.check(rt.t.launch_host_func(None, fns[0], None))
    rt.check(rt.t.stream_synchronize(None))
    on_device(rt, 1, lambda: rt.check(rt.t.launch_host_func(None, fns[1], None)))
    on_device(rt, 1, lambda: rt.check(rt.t.stream_synchronize(None)))
    assert seen == [0, 1]


def test_device_synchronize_and_stream_destroy_drain(rt: Runtime, emu: Emulator) -> None:
    s = rt.stream()
    d = rt.malloc(4)
    gate = Gate()
    gate.launch(rt, s)
    rt.check(rt.t.memset_async(d, 1, 4, s))
    timer = gate.open_later()
    rt.check(rt.t.device_synchronize())
    timer.join()
    assert rt.t.stream_query(s) == OK
    assert rt.read(d, 4) == b"\x01" * 4

    gate2 = Gate()
    gate2.launch(rt, s)
    rt.check(rt.t.memset_async(d, 2, 4, s))
    timer = gate2.open_later()
    unsubscribed = emu.calls("aclrtUnSubscribeReport")
    rt.check(rt.t.stream_destroy(s))  # drains (CANN's rule) and unsubscribes its host functions
    timer.join()
    assert rt.read(d, 4) == b"\x02" * 4
    assert emu.calls("aclrtUnSubscribeReport") == unsubscribed + 1
    assert rt.t.stream_destroy(None) == INVALID_HANDLE
    rt.check(rt.t.free(d))


def test_stream_priority_is_accepted_and_acl_stream_is_exposed(rt: Runtime) -> None:
    for priority in (-1, 0, 5):
        s = c_void_p()
        rt.check(rt.t.stream_create(byref(s), priority))
        acl_stream = c_void_p()
        assert rt.t.native_stream(s, 0, byref(acl_stream)) == OK
        assert acl_stream.value
        rt.check(rt.t.stream_destroy(s))
    default = c_void_p()
    assert rt.t.native_stream(None, 0, byref(default)) == OK
    assert default.value, "the runtime's default stream is a created aclrtStream, not NULL"
    again = c_void_p()
    assert rt.t.native_stream(None, 0, byref(again)) == OK and again.value == default.value
    assert rt.t.native_stream(None, rt.device_count(), byref(again)) == INVALID_DEVICE
    assert rt.t.native_stream(None, 0, None) == INVALID_VALUE


# ---- events -------------------------------------------------------------------------------


def test_stream_and_event_status_polarity(rt: Runtime) -> None:
    """aclrtStreamQuery says COMPLETE=0 / NOT_READY=1, aclrtQueryEventStatus NOT_READY=0 /
    COMPLETE=1: both must come out as TFL_OK when done and TFL_ERROR_NOT_READY when pending."""
    s = rt.stream()
    e = rt.event(EVENT_DISABLE_TIMING)
    assert rt.t.stream_query(s) == OK
    assert rt.t.event_query(e) == OK, "a never-recorded event has nothing pending"
    rt.check(rt.t.event_synchronize(e))
    gate = Gate()
    gate.launch(rt, s)
    rt.check(rt.t.event_record(e, s))
    assert rt.t.stream_query(s) == NOT_READY
    assert rt.t.event_query(e) == NOT_READY
    gate.opened.set()
    rt.check(rt.t.event_synchronize(e))
    assert rt.t.event_query(e) == OK
    rt.check(rt.t.stream_synchronize(s))
    assert rt.t.stream_query(s) == OK
    rt.check(rt.t.event_destroy(e))
    rt.check(rt.t.stream_destroy(s))


def test_stream_wait_event_orders_across_streams(rt: Runtime) -> None:
    producer, consumer = rt.stream(), rt.stream()
    x, y = rt.malloc(8), rt.malloc(8)
    rt.write(x, b"\0" * 8)
    rt.write(y, b"\0" * 8)
    e = rt.event(EVENT_DISABLE_TIMING)
    rt.check(rt.t.stream_wait_event(consumer, e))  # never recorded: no wait
    assert rt.t.stream_query(consumer) == OK
    gate = Gate()
    gate.launch(rt, producer)
    rt.check(rt.t.memset_async(x, 9, 8, producer))
    rt.check(rt.t.event_record(e, producer))
    rt.check(rt.t.stream_wait_event(consumer, e))
    rt.check(rt.t.memcpy_async(y, x, 8, D2D, consumer))
    time.sleep(0.05)
    assert rt.t.stream_query(consumer) == NOT_READY, "the consumer waits for the producer"
    gate.opened.set()
    rt.check(rt.t.stream_synchronize(consumer))
    assert rt.read(y, 8) == b"\x09" * 8
    for p in (x, y):
        rt.check(rt.t.free(p))
    rt.check(rt.t.event_destroy(e))
    for s in (producer, consumer):
        rt.check(rt.t.stream_destroy(s))


@pytest.mark.multidevice
def test_events_recorded_on_another_devices_stream(two: Runtime) -> None:
    rt = two
    e = rt.event()  # created with NPU 0 current
    s1 = on_device(rt, 1, rt.stream)
    b = on_device(rt, 1, lambda: rt.malloc(4))
    gate = Gate()
    gate.launch(rt, s1)
    on_device(rt, 1, lambda: rt.check(rt.t.memset_async(b, 5, 4, s1)))
    rt.check(rt.t.event_record(e, s1))  # moves to NPU 1's context
    assert rt.t.event_query(e) == NOT_READY
    s0 = rt.stream()
    a = rt.malloc(4)
    rt.check(rt.t.stream_wait_event(s0, e))  # NPU 0's stream waits for NPU 1's work
    rt.check(rt.t.memcpy_peer_async(a, 0, b, 1, 4, s0))
    gate.opened.set()
    rt.check(rt.t.stream_synchronize(s0))
    assert rt.read(a, 4) == b"\x05" * 4
    rt.check(rt.t.event_destroy(e))
    rt.check(rt.t.stream_destroy(s0))
    on_device(rt, 1, lambda: rt.check(rt.t.stream_destroy(s1)))
    rt.check(rt.t.free(a))
    rt.check(rt.t.free(b))


def test_event_elapsed_time(rt: Runtime) -> None:
    start, end = rt.event(), rt.event()
    ms = c_float(-1)
    assert rt.t.event_elapsed_ms(byref(ms), start, end) == INVALID_VALUE
    assert "never recorded" in rt.error()
    gate = Gate()
    rt.check(rt.t.event_record(start, None))
    gate.launch(rt, None)
    rt.check(rt.t.event_record(end, None))
    assert rt.t.event_elapsed_ms(byref(ms), start, end) == NOT_READY
    assert "has not completed" in rt.error()
    assert ms.value == -1, "out-params are only written on success"
    time.sleep(0.02)
    gate.opened.set()
    rt.check(rt.t.event_synchronize(end))
    rt.check(rt.t.event_elapsed_ms(byref(ms), start, end))
    assert ms.value >= 15.0, "the gate held the stream between the two records"

    untimed = rt.event(EVENT_DISABLE_TIMING)
    rt.check(rt.t.event_record(untimed, None))
    rt.check(rt.t.event_synchronize(untimed))
    assert rt.t.event_elapsed_ms(byref(ms), start, untimed) == INVALID_VALUE
    assert "without timing" in rt.error()
    for e in (start, end, untimed):
        rt.check(rt.t.event_destroy(e))
    assert rt.t.event_create(byref(c_void_p()), 0x80) == INVALID_VALUE


# ---- device graphs (v1.3): CANN's stream capture ----------------------------------------------


class Counter:
    """A host function counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

        def _hit(_user_data: object) -> None:
            self.calls += 1

        self.fn = HOST_FN(_hit)  # kept alive while a graph may call it


@pytest.fixture
def capturing(rt: Runtime) -> Iterator[tuple[Runtime, int]]:
    """A created stream; a capture a test leaves open is ended, so a failed test never leaves a
    GLOBAL capture refusing the next test's calls."""
    s = rt.stream()
    yield rt, s
    rt.t.set_device(0)
    status = c_int(-1)
    if rt.t.stream_capture_status(s, byref(status)) == OK and status.value != CAPTURE_NONE:
        st, g = rt.capture_end(s)
        if st == OK:
            rt.t.graph_destroy(g)
    rt.check(rt.t.stream_destroy(s))


def test_graph_records_on_capture_and_replays_per_launch(capturing, emu: Emulator) -> None:
    rt, s = capturing
    d = rt.malloc(8)
    rt.write(d, b"\0" * 8)
    pinned = rt.host_malloc(8)  # before the capture: host_malloc is refused during it
    ctypes.memset(pinned, 0, 8)
    counter = Counter()
    begins = emu.calls("aclmdlRICaptureBegin")

    rt.check(rt.t.graph_capture_begin(s, MODE_GLOBAL))
    assert emu.calls("aclmdlRICaptureBegin") == begins + 1, "CANN's capture records it"
    assert rt.capture_status(s) == CAPTURE_ACTIVE
    rt.check(rt.t.memset_async(d, 7, 8, s))
    rt.check(rt.t.memcpy_async(pinned, d, 8, D2H, s))
    rt.check(rt.t.launch_host_func(s, counter.fn, None))
    scratch = rt.malloc(16)  # malloc and free stay allowed
    rt.check(rt.t.free(scratch))
    st, g = rt.capture_end(s)
    rt.check(st)
    assert g and rt.capture_status(s) == CAPTURE_NONE
    rt.check(rt.t.stream_synchronize(s))
    assert rt.read(d, 8) == b"\0" * 8 and ctypes.string_at(pinned, 8) == b"\0" * 8
    assert counter.calls == 0, "recorded, not run"

    rt.check(rt.t.graph_instantiate(g))
    rt.check(rt.t.graph_instantiate(g))  # idempotent
    rt.check(rt.t.graph_launch(g, s))
    rt.check(rt.t.stream_synchronize(s))
    assert ctypes.string_at(pinned, 8) == b"\x07" * 8 and counter.calls == 1
    rt.write(d, b"\0" * 8)
    ctypes.memset(pinned, 0, 8)
    rt.check(rt.t.graph_launch(g, None))  # the default stream of the graph's NPU
    rt.check(rt.t.stream_synchronize(None))
    assert ctypes.string_at(pinned, 8) == b"\x07" * 8 and counter.calls == 2
    executions = emu.calls("aclmdlRIExecuteAsync")
    assert executions >= 2
    rt.check(rt.t.graph_destroy(g))
    for call in ("graph_instantiate", "graph_destroy"):
        assert getattr(rt.t, call)(g) == INVALID_HANDLE, call
        assert "unknown or destroyed graph" in rt.error()
    assert rt.t.graph_launch(g, s) == INVALID_HANDLE
    assert emu.calls("aclmdlRIExecuteAsync") == executions, "a dead handle never reaches CANN"
    rt.check(rt.t.host_free(pinned))
    rt.check(rt.t.free(d))


FORBIDDEN_WHILE_CAPTURING = {
    # table call: (the CANN call that refuses it, its status)
    "device_synchronize": ("aclrtSynchronizeDevice", "ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT"),
    "memcpy": ("aclrtMemcpy", "ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT"),
    "host_malloc": ("aclrtMallocHost", "ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT"),
    "stream_synchronize": ("aclrtSynchronizeStream", "ACL_ERROR_RT_STREAM_CAPTURED"),
    "stream_query": ("aclrtStreamQuery", "ACL_ERROR_RT_STREAM_CAPTURED"),
    "stream_destroy": ("aclrtSynchronizeStream", "ACL_ERROR_RT_STREAM_CAPTURED"),
    "event_synchronize": ("aclrtSynchronizeEvent", "ACL_ERROR_RT_EVENT_CAPTURED"),
    "event_query": ("aclrtQueryEventStatus", "ACL_ERROR_RT_EVENT_CAPTURED"),
}


@pytest.mark.parametrize("call", list(FORBIDDEN_WHILE_CAPTURING))
def test_forbidden_call_fails_and_invalidates_the_capture(capturing, call: str) -> None:
    rt, s = capturing
    d = rt.malloc(4)
    rt.write(d, b"\0" * 4)
    e = rt.event()
    buf = ctypes.create_string_buffer(4)
    calls = {
        "device_synchronize": lambda: rt.t.device_synchronize(),
        "memcpy": lambda: rt.t.memcpy(ctypes.addressof(buf), d, 4, D2H),
        "host_malloc": lambda: rt.t.host_malloc(byref(c_void_p()), 64),
        "stream_synchronize": lambda: rt.t.stream_synchronize(s),
        "stream_query": lambda: rt.t.stream_query(s),
        "stream_destroy": lambda: rt.t.stream_destroy(s),
        "event_synchronize": lambda: rt.t.event_synchronize(e),
        "event_query": lambda: rt.t.event_query(e),
    }
    acl_call, acl_status = FORBIDDEN_WHILE_CAPTURING[call]
    rt.check(rt.t.graph_capture_begin(s, MODE_GLOBAL))
    rt.check(rt.t.memset_async(d, 1, 4, s))
    rt.check(rt.t.event_record(e, s))  # an event recorded by the capture
    assert calls[call]() == CAPTURE
    message = rt.error()
    assert acl_call in message and acl_status in message, message
    assert "the capture is now invalidated" in message, message
    assert rt.capture_status(s) == CAPTURE_INVALIDATED
    # Work given to the invalidated capture fails too, saying why.
    assert rt.t.memset_async(d, 2, 4, s) == CAPTURE
    assert "ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED" in rt.error()
    st, g = rt.capture_end(s)
    assert st == CAPTURE and g is None
    assert "aclmdlRICaptureEnd" in (message := rt.error()) and acl_call in message, message
    assert rt.capture_status(s) == CAPTURE_NONE, "the capture ended all the same"
    # Nothing recorded ran; the stream works again.
    rt.check(rt.t.stream_synchronize(s))
    assert rt.read(d, 4) == b"\0" * 4
    rt.check(rt.t.memset_async(d, 3, 4, s))
    rt.check(rt.t.stream_synchronize(s))
    assert rt.read(d, 4) == b"\x03" * 4
    rt.check(rt.t.event_destroy(e))
    rt.check(rt.t.free(d))


def _on_thread(fn):
    out: list = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


def test_capture_modes_and_the_capturing_thread(capturing) -> None:
    rt, s = capturing
    # THREAD_LOCAL: another thread may synchronize the device, the capturing one may not.
    rt.check(rt.t.graph_capture_begin(s, MODE_THREAD_LOCAL))
    assert _on_thread(rt.t.device_synchronize) == OK
    assert rt.t.device_synchronize() == CAPTURE
    assert rt.capture_end(s)[0] == CAPTURE
    # GLOBAL: every thread is refused.
    rt.check(rt.t.graph_capture_begin(s, MODE_GLOBAL))
    assert _on_thread(lambda: rt.t.host_malloc(byref(c_void_p()), 8)) == CAPTURE
    assert rt.capture_status(s) == CAPTURE_INVALIDATED
    assert rt.capture_end(s)[0] == CAPTURE
    # RELAXED: allowed anywhere; the capturing stream itself still cannot be synchronized.
    rt.check(rt.t.graph_capture_begin(s, MODE_RELAXED))
    rt.check(rt.t.device_synchronize())
    rt.check(rt.t.host_free(rt.host_malloc(8)))
    assert rt.t.stream_synchronize(s) == CAPTURE
    assert rt.capture_end(s)[0] == CAPTURE
    # A capture ends in the thread that began it unless RELAXED; elsewhere it ends, refused.
    rt.check(rt.t.graph_capture_begin(s, MODE_GLOBAL))
    st, message = _on_thread(lambda: (rt.capture_end(s)[0], rt.error()))
    assert st == CAPTURE and "ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD" in message, message
    assert rt.capture_status(s) == CAPTURE_NONE
    rt.check(rt.t.graph_capture_begin(s, MODE_RELAXED))
    st, g = _on_thread(lambda: rt.capture_end(s))
    rt.check(st)
    rt.check(rt.t.graph_destroy(g))


def test_capture_misuse_and_status(capturing) -> None:
    rt, s = capturing
    assert rt.t.graph_capture_begin(None, MODE_GLOBAL) == INVALID_VALUE
    assert "default stream" in rt.error()
    assert rt.t.graph_capture_begin(s, 3) == INVALID_VALUE and "mode 3" in rt.error()
    assert rt.capture_end(s)[0] == INVALID_VALUE
    assert "ACL_ERROR_RT_STREAM_NOT_CAPTURED" in rt.error()
    assert rt.capture_end(None)[0] == INVALID_VALUE
    assert rt.capture_status(s) == CAPTURE_NONE
    assert rt.capture_status(None) == CAPTURE_NONE, "the default stream never captures"
    assert rt.t.stream_capture_status(s, None) == INVALID_VALUE
    rt.check(rt.t.graph_capture_begin(s, MODE_GLOBAL))
    assert rt.t.graph_capture_begin(s, MODE_GLOBAL) == CAPTURE
    assert "ACL_ERROR_RT_STREAM_CAPTURED" in rt.error()
    assert rt.capture_end(s)[0] == CAPTURE
    rt.check(rt.t.graph_capture_begin(s, MODE_GLOBAL))
    assert rt.t.graph_capture_end(s, None) == INVALID_VALUE
    assert rt.capture_status(s) == CAPTURE_NONE, "a NULL out-parameter ends it too"


def test_graph_launches_only_on_streams_of_its_npu(two: Runtime) -> None:
    rt = two
    s = rt.stream()
    d = rt.malloc(4)
    rt.check(rt.t.graph_capture_begin(s, MODE_GLOBAL))
    rt.check(rt.t.memset_async(d, 9, 4, s))
    st, g = rt.capture_end(s)
    rt.check(st)
    other = on_device(rt, 1, rt.stream)
    assert rt.t.graph_launch(g, other) == INVALID_HANDLE
    assert "captured on Ascend NPU 0" in rt.error() and "NPU 1" in rt.error()
    rt.check(rt.t.graph_launch(g, s))
    rt.check(rt.t.stream_synchronize(s))
    assert rt.read(d, 4) == b"\x09" * 4
    rt.check(rt.t.graph_destroy(g))
    on_device(rt, 1, lambda: rt.check(rt.t.stream_destroy(other)))
    rt.check(rt.t.stream_destroy(s))
    rt.check(rt.t.free(d))


def test_capture_and_other_streams_events_and_pageable_copies(capturing) -> None:
    rt, s = capturing
    other = rt.stream()
    inside, outside = rt.event(), rt.event()
    rt.check(rt.t.event_record(outside, other))
    rt.check(rt.t.event_synchronize(outside))
    # Another stream waiting on an event of the capture joins it (CANN's "event deduction"), and
    # its tasks are recorded; the capture ends once the origin waited on its last task.
    d = rt.malloc(8)
    rt.write(d, b"\0" * 8)
    back = rt.event()
    rt.check(rt.t.graph_capture_begin(s, MODE_GLOBAL))
    rt.check(rt.t.event_record(inside, s))
    rt.check(rt.t.stream_wait_event(other, inside))
    assert rt.capture_status(other) == CAPTURE_ACTIVE
    rt.check(rt.t.memset_async(d, 3, 8, other))
    rt.check(rt.t.event_record(back, other))
    rt.check(rt.t.stream_wait_event(s, back))
    st, joined = rt.capture_end(s)
    rt.check(st)
    assert rt.capture_status(other) == CAPTURE_NONE
    assert rt.read(d, 8) == b"\0" * 8, "recorded, not run"
    rt.check(rt.t.graph_launch(joined, s))
    rt.check(rt.t.stream_synchronize(s))
    assert rt.read(d, 8) == b"\x03" * 8
    rt.check(rt.t.graph_destroy(joined))
    # Ended before the origin waited on the joined stream's last task: a capture error (CUDA's
    # unjoined end), and the capture is over.
    rt.check(rt.t.graph_capture_begin(s, MODE_GLOBAL))
    rt.check(rt.t.event_record(inside, s))
    rt.check(rt.t.stream_wait_event(other, inside))
    rt.check(rt.t.memset_async(d, 4, 8, other))
    assert rt.capture_end(s)[0] == CAPTURE
    assert "ACL_ERROR_RT_STREAM_UNJOINED" in rt.error()
    assert rt.capture_status(s) == CAPTURE_NONE and rt.capture_status(other) == CAPTURE_NONE
    rt.check(rt.t.event_destroy(back))
    rt.check(rt.t.free(d))
    # The capturing stream waiting on an event recorded outside it.
    rt.check(rt.t.graph_capture_begin(s, MODE_GLOBAL))
    assert rt.t.stream_wait_event(s, outside) == CAPTURE
    assert "ACL_ERROR_RT_CAPTURE_DEPENDENCY" in rt.error()
    assert rt.capture_end(s)[0] == CAPTURE
    # A copy with pageable host memory waits for the stream first: CANN lists it among the
    # calls a capture forbids, so it is refused rather than recorded.
    d = rt.malloc(8)
    src = ctypes.create_string_buffer(8)
    rt.check(rt.t.graph_capture_begin(s, MODE_GLOBAL))
    assert rt.t.memcpy_async(d, ctypes.addressof(src), 8, H2D, s) == CAPTURE
    assert "pageable" in rt.error()
    assert rt.capture_end(s)[0] == CAPTURE
    # A graph launched on a capturing stream is recorded into that capture.
    rt.write(d, b"\0" * 8)
    rt.check(rt.t.graph_capture_begin(s, MODE_GLOBAL))
    rt.check(rt.t.memset_async(d, 4, 8, s))
    st, inner = rt.capture_end(s)
    rt.check(st)
    rt.check(rt.t.graph_capture_begin(s, MODE_GLOBAL))
    rt.check(rt.t.graph_launch(inner, s))
    st, outer = rt.capture_end(s)
    rt.check(st)
    rt.check(rt.t.graph_destroy(inner))
    assert rt.read(d, 8) == b"\0" * 8
    rt.check(rt.t.graph_launch(outer, s))
    rt.check(rt.t.stream_synchronize(s))
    assert rt.read(d, 8) == b"\x04" * 8
    rt.check(rt.t.graph_destroy(outer))
    for e in (inside, outside):
        rt.check(rt.t.event_destroy(e))
    rt.check(rt.t.stream_destroy(other))
    rt.check(rt.t.free(d))


# ---- other emulated machines, in a subprocess -------------------------------------------------


def _run_child(name: str, **env: str) -> dict:
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("ASCEND_EMU_")}
    child_env.update(env)
    child_env["ASCEND_TOOLKIT_HOME"] = str(Path(toolkit_library()).parents[1])
    child_env[RUNTIME_ENV] = runtime_library()
    proc = subprocess.run(
        [sys.executable, __file__, name], env=child_env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def child_three_small_npus() -> dict:
    acl, lib = _load()
    rt = Runtime(lib.tfl_runtime_get(1).contents)
    out: dict = {"count": rt.device_count()}  # no init() first: every call initialises
    rt.check(rt.t.set_device(2))
    out["total"] = rt.mem_get_info()[1]
    p = c_void_p()
    out["oom"] = rt.t.malloc(byref(p), 80 << 20)
    out["oom_error"] = rt.error()
    keep = [HOST_FN(lambda _d: None) for _ in range(3)]  # alive until the streams ran them
    for fn in keep:  # streams with host-function threads left alive must not hang exit
        rt.check(rt.t.launch_host_func(rt.stream(), fn, None))
    rt.check(rt.t.device_synchronize())
    return out


def child_no_npu() -> dict:
    acl, lib = _load()
    count, msg = c_int(-1), ctypes.create_string_buffer(256)
    rt = Runtime(lib.tfl_runtime_get(1).contents)
    rc = rt.t.probe(byref(count), msg, 256)
    p = c_void_p()
    return {
        "probe": rc,
        "probe_count": count.value,
        "probe_message": msg.value.decode(),
        "count": rt.device_count(),
        "set_device": rt.t.set_device(0),
        "malloc": rt.t.malloc(byref(p), 16),
        "malloc_error": rt.error(),
    }


def child_initialised_by_someone_else() -> dict:
    acl, lib = _load()
    acl.aclInit.argtypes = [c_char_p]
    first = acl.aclInit(None)
    rt = Runtime(lib.tfl_runtime_get(1).contents)
    return {"acl_init": first, "init": rt.t.init(), "count": rt.device_count()}


def child_init_fails() -> dict:
    acl, lib = _load()
    acl.aclEmuInjectFault(b"aclInit", 1, ACL_ERROR_RT_INTERNAL_ERROR)
    rt = Runtime(lib.tfl_runtime_get(1).contents)
    first = rt.t.init()
    first_error = rt.error()
    return {"init": first, "error": first_error, "retry": rt.t.init(), "count": rt.device_count()}


def child_fork_after_use() -> dict:
    """The parent allocates, runs a host function and copies across NPUs, then forks: the child
    starts afresh (CANN starts it uninitialised) and can use the NPUs itself."""
    acl, lib = _load()
    rt = Runtime(lib.tfl_runtime_get(1).contents)
    parent_ptr = rt.malloc(64)
    keep = HOST_FN(lambda _d: None)
    rt.check(rt.t.launch_host_func(None, keep, None))
    rt.check(rt.t.device_synchronize())
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        out: dict = {}
        try:
            out["pointer"] = list(rt.pointer_info(parent_ptr))
            out["count"] = rt.device_count()
            p = rt.malloc(64)
            rt.write(p, b"child!!!" * 8)
            seen: list[int] = []
            fn = HOST_FN(lambda _d: seen.append(1))
            rt.check(rt.t.launch_host_func(None, fn, None))
            rt.check(rt.t.stream_synchronize(None))
            out["host_fn"] = seen
            out["read"] = rt.read(p, 8).decode()
        except AssertionError as exc:
            out["error"] = str(exc)
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    child = json.loads(os.read(r, 4096).decode())
    os.waitpid(pid, 0)
    rt.check(rt.t.free(parent_ptr))
    return child


def test_a_forked_child_starts_afresh_in_subprocess(emu: Emulator) -> None:
    out = _run_child("child_fork_after_use")
    assert out == {
        "pointer": [POINTER_UNKNOWN, -1],
        "count": 2,
        "host_fn": [1],
        "read": "child!!!",
    }


def test_three_small_npus_in_subprocess(emu: Emulator) -> None:
    out = _run_child("child_three_small_npus", ASCEND_EMU_DEVICES="3", ASCEND_EMU_MEMORY_MB="64")
    assert out["count"] == 3
    assert out["total"] == 64 << 20
    assert out["oom"] == OUT_OF_MEMORY
    msg = out["oom_error"]
    assert "aclrtMalloc on Ascend NPU 2 failed" in msg and "aclError 207001" in msg, msg
    assert str(80 << 20) in msg and "CANN: aclrtMalloc: out of memory on device 2" in msg, msg


def test_no_npu_in_subprocess(emu: Emulator) -> None:
    out = _run_child("child_no_npu", ASCEND_EMU_DEVICES="0")
    assert out["probe"] == 0 and out["probe_count"] == 0
    assert out["probe_message"] == "aclrtGetDeviceCount reports no Ascend NPU"
    assert out["count"] == 0
    assert out["set_device"] == INVALID_DEVICE
    assert out["malloc"] != OK and "aclrtSetDevice" in out["malloc_error"]


def test_repeat_initialisation_is_accepted_in_subprocess(emu: Emulator) -> None:
    out = _run_child("child_initialised_by_someone_else")
    assert out == {"acl_init": 0, "init": OK, "count": 2}


def test_failed_aclinit_is_reported_and_retried_in_subprocess(emu: Emulator) -> None:
    out = _run_child("child_init_fails")
    assert out["init"] == DEVICE_ERROR
    assert "aclInit failed: ACL_ERROR_RT_INTERNAL_ERROR (aclError 507000)" in out["error"]
    assert out["retry"] == OK and out["count"] == 2


if __name__ == "__main__":
    print(json.dumps(globals()[sys.argv[1]]()))
