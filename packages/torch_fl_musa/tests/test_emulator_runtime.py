"""The MUSA emulator's runtime (libmusart.so) enforces the SDK contract, tested on the library
itself through ctypes (no torch): device-scoped pointers, refused cross-device copies, peer
copies, worker streams whose queued work really runs later (and fails when its memory was freed
first), events, fault injection and the live-allocation counters; and stream capture as CUDA's:
work recorded, not run, and run again by each graph launch, the calls a capture forbids (by its
mode) refused with CUDA's statuses and invalidating it, streams joining a capture through its
events.

The prefix is the one MUSA_HOME names when it is an emulator's, else the in-tree emulator/prefix;
the tests skip when neither is built. Settings read at first use (device count, memory) are
tested in a fresh interpreter.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.musa

EMULATOR = Path(__file__).resolve().parents[1] / "emulator"

SUCCESS, INVALID_VALUE, MEMORY_ALLOCATION = 0, 1, 2
INVALID_DEVICE_POINTER, NO_DEVICE, INVALID_DEVICE = 17, 100, 101
INVALID_HANDLE, NOT_READY, ILLEGAL_ADDRESS = 400, 600, 700
H2D, D2H, D2D, DEFAULT = 1, 2, 3, 4
UNREGISTERED, HOST, DEVICE = 0, 1, 2
DISABLE_TIMING = 0x2
ILLEGAL_STATE, CAPTURE_UNSUPPORTED, CAPTURE_INVALIDATED = 401, 900, 901
CAPTURE_UNJOINED, CAPTURE_ISOLATION, CAPTURED_EVENT, CAPTURE_WRONG_THREAD = 904, 905, 907, 908
GLOBAL, THREAD_LOCAL, RELAXED = 0, 1, 2  # capture modes
NONE, ACTIVE, INVALIDATED = 0, 1, 2  # capture statuses
HOST_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _library() -> Path:
    home = os.environ.get("MUSA_HOME", "").strip()
    prefix = Path(home) if home and (Path(home) / "include/musa_emulator.h").is_file() else None
    lib = (prefix or EMULATOR / "prefix") / "lib" / "libmusart.so"
    if not lib.is_file():
        pytest.skip(f"the MUSA emulator is not installed ({lib} is missing)")
    if prefix is None:
        newest = max(p.stat().st_mtime for p in EMULATOR.glob("src/musa_*"))
        if newest > lib.stat().st_mtime:
            pytest.fail(f"{lib} is older than the emulator's runtime sources: reinstall it")
    return lib


class PointerAttributes(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("device", ctypes.c_int),
        ("devicePointer", ctypes.c_void_p),
        ("hostPointer", ctypes.c_void_p),
    ]


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    vp, sz, i, u = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_uint
    P = ctypes.POINTER
    for name, args in {
        "musaGetDeviceCount": [P(i)],
        "musaSetDevice": [i],
        "musaGetDevice": [P(i)],
        "musaDeviceSynchronize": [],
        "musaDeviceGetStreamPriorityRange": [P(i), P(i)],
        "musaMalloc": [P(vp), sz],
        "musaFree": [vp],
        "musaHostAlloc": [P(vp), sz, u],
        "musaFreeHost": [vp],
        "musaMemGetInfo": [P(sz), P(sz)],
        "musaMemcpy": [vp, vp, sz, i],
        "musaMemcpyAsync": [vp, vp, sz, i, vp],
        "musaMemcpyPeer": [vp, i, vp, i, sz],
        "musaMemcpyPeerAsync": [vp, i, vp, i, sz, vp],
        "musaMemset": [vp, i, sz],
        "musaMemsetAsync": [vp, i, sz, vp],
        "musaPointerGetAttributes": [P(PointerAttributes), vp],
        "musaStreamCreate": [P(vp)],
        "musaStreamCreateWithPriority": [P(vp), u, i],
        "musaStreamDestroy": [vp],
        "musaStreamQuery": [vp],
        "musaStreamSynchronize": [vp],
        "musaStreamWaitEvent": [vp, vp, u],
        "musaEventCreate": [P(vp)],
        "musaEventCreateWithFlags": [P(vp), u],
        "musaEventRecord": [vp, vp],
        "musaEventSynchronize": [vp],
        "musaEventQuery": [vp],
        "musaEventDestroy": [vp],
        "musaEventElapsedTime": [P(ctypes.c_float), vp, vp],
        "musaGetLastError": [],
        "musaLaunchHostFunc": [vp, HOST_FN, vp],
        "musaStreamBeginCapture": [vp, i],
        "musaStreamEndCapture": [vp, P(vp)],
        "musaStreamIsCapturing": [vp, P(i)],
        "musaThreadExchangeStreamCaptureMode": [P(i)],
        "musaGraphInstantiate": [P(vp), vp, ctypes.c_ulonglong],
        "musaGraphLaunch": [vp, vp],
        "musaGraphExecDestroy": [vp],
        "musaGraphDestroy": [vp],
        "musaEmuInjectFault": [ctypes.c_char_p, i, i],
        "musaEmuHoldStream": [vp],
        "musaEmuReleaseStream": [vp],
    }.items():
        getattr(lib, name).argtypes = args
        getattr(lib, name).restype = i
    lib.musaGetErrorString.argtypes = [i]
    lib.musaGetErrorString.restype = ctypes.c_char_p
    for name in ("musaEmuCallCount", "musaEmuLiveAllocations", "musaEmuLiveBytes"):
        getattr(lib, name).restype = ctypes.c_uint64
    lib.musaEmuCallCount.argtypes = [ctypes.c_char_p]
    lib.musaEmuLiveAllocations.argtypes = lib.musaEmuLiveBytes.argtypes = [i]
    lib.musaEmuViolationCount.restype = ctypes.c_uint64
    lib.musaEmuLastViolation.restype = ctypes.c_char_p
    lib.musaEmuReset.restype = lib.musaEmuClearFaults.restype = None
    return lib


@pytest.fixture(scope="module")
def rt():
    lib = _declare(ctypes.CDLL(str(_library())))
    count = ctypes.c_int()
    assert lib.musaGetDeviceCount(ctypes.byref(count)) == SUCCESS
    if count.value < 2:
        pytest.fail(f"these tests need 2 emulated GPUs, the emulator has {count.value}")
    return lib


def made(call, *args, kind=ctypes.c_void_p):
    """What an SDK call writes to its first argument (a pointer to it); the call must succeed."""
    value = kind()
    assert call(ctypes.byref(value), *args) == SUCCESS
    return value.value


class Gpus:
    """Device memory, pinned memory and streams, released at the end of the test."""

    def __init__(self, rt):
        self.rt = rt
        self.memory: list[tuple[int, int]] = []
        self.pinned: list[int] = []
        self.streams: list[tuple[int, int]] = []

    def malloc(self, device: int, n: int) -> int:
        self.rt.musaSetDevice(device)
        self.memory.append((device, made(self.rt.musaMalloc, n)))
        return self.memory[-1][1]

    def pinned_buffer(self, n: int) -> int:
        self.pinned.append(made(self.rt.musaHostAlloc, n, 0))
        return self.pinned[-1]

    def stream(self, device: int) -> int:
        self.rt.musaSetDevice(device)
        self.streams.append((device, made(self.rt.musaStreamCreate)))
        return self.streams[-1][1]

    def write(self, device: int, ptr: int, data: bytes) -> None:
        self.rt.musaSetDevice(device)
        assert self.rt.musaMemcpy(ptr, data, len(data), H2D) == SUCCESS

    def read(self, device: int, ptr: int, n: int) -> bytes:
        self.rt.musaSetDevice(device)
        buf = ctypes.create_string_buffer(n)
        assert self.rt.musaMemcpy(buf, ptr, n, D2H) == SUCCESS
        return buf.raw

    def release(self) -> None:
        for _, s in self.streams:  # a test that failed midway may have left a capture open
            graph = ctypes.c_void_p()
            if self.rt.musaStreamEndCapture(s, ctypes.byref(graph)) == SUCCESS:
                self.rt.musaGraphDestroy(graph)
        for device, s in self.streams:
            self.rt.musaSetDevice(device)
            self.rt.musaEmuReleaseStream(s)  # a test that failed midway may have held it
            self.rt.musaStreamDestroy(s)
        for device, p in self.memory:
            self.rt.musaSetDevice(device)
            self.rt.musaFree(p)
        for p in self.pinned:
            self.rt.musaFreeHost(p)
        for device in (0, 1):
            self.rt.musaSetDevice(device)
            self.rt.musaEmuReleaseStream(None)
            self.rt.musaDeviceSynchronize()
        self.rt.musaSetDevice(0)
        self.rt.musaEmuReset()
        self.rt.musaGetLastError()


@pytest.fixture
def gpus(rt):
    g = Gpus(rt)
    yield g
    g.release()


def test_pointers_are_device_scoped_and_not_host_addressable(rt, gpus):
    p0, p1 = gpus.malloc(0, 64), gpus.malloc(1, 64)
    # Each device hands out its own address range (1 TiB each, aligned), whatever was allocated
    # before in this process.
    assert p1 >> 40 == (p0 >> 40) + 1
    maps = Path("/proc/self/maps").read_text().splitlines()
    spans = [[int(x, 16) for x in line.split()[0].split("-")] for line in maps]
    assert not any(lo <= p <= hi for p in (p0, p1) for lo, hi in spans), "a mapped address"
    rt.musaSetDevice(0)
    assert rt.musaMemset(p1, 0, 64) == INVALID_DEVICE_POINTER  # device 1's, device 0 current
    assert rt.musaFree(p1) == INVALID_DEVICE_POINTER
    buf = ctypes.create_string_buffer(64)
    assert rt.musaMemcpy(buf, p1, 64, D2H) == INVALID_DEVICE_POINTER
    attrs = PointerAttributes()
    assert rt.musaPointerGetAttributes(ctypes.byref(attrs), p1) == INVALID_VALUE
    rt.musaSetDevice(1)
    assert rt.musaMemset(p1, 7, 64) == SUCCESS
    assert gpus.read(1, p1, 4) == b"\x07" * 4


def test_cross_device_memcpy_is_refused_and_moves_nothing(rt, gpus):
    src, dst = gpus.malloc(0, 16), gpus.malloc(1, 16)
    gpus.write(0, src, bytes(range(16)))
    gpus.write(1, dst, bytes(16))
    answers = set()
    for current, kind in ((0, D2D), (1, D2D), (0, DEFAULT), (1, DEFAULT)):
        rt.musaSetDevice(current)
        answers.add((rt.musaMemcpy(dst, src, 16, kind), rt.musaGetLastError()))
    assert answers == {(INVALID_VALUE, INVALID_VALUE)}
    assert rt.musaGetLastError() == SUCCESS  # read and cleared
    assert gpus.read(1, dst, 16) == bytes(16)


def test_peer_copies(rt, gpus):
    src, dst = gpus.malloc(0, 8), gpus.malloc(1, 8)
    gpus.write(0, src, b"peerpeer")
    rt.musaSetDevice(1)
    assert rt.musaMemcpyPeer(dst, 1, src, 0, 8) == SUCCESS
    assert gpus.read(1, dst, 8) == b"peerpeer"
    assert rt.musaMemcpyPeer(dst, 1, src, 1, 8) == INVALID_DEVICE_POINTER  # src is not device 1's
    gpus.write(0, src, b"12345678")
    s1 = gpus.stream(1)
    assert rt.musaMemcpyPeerAsync(dst, 1, src, 0, 8, s1) == INVALID_VALUE  # not the source's
    rt.musaSetDevice(0)
    assert rt.musaMemcpyPeerAsync(dst, 1, src, 0, 8, None) == SUCCESS
    assert rt.musaStreamSynchronize(None) == SUCCESS
    assert gpus.read(1, dst, 8) == b"12345678"


def test_queued_work_runs_later_on_the_stream(rt, gpus):
    p = gpus.malloc(0, 8)
    pinned = gpus.pinned_buffer(8)
    ctypes.memmove(pinned, b"pinned!!", 8)
    s = gpus.stream(0)
    assert rt.musaEmuHoldStream(s) == SUCCESS
    assert rt.musaMemcpyAsync(p, pinned, 8, H2D, s) == SUCCESS
    assert rt.musaStreamQuery(s) == NOT_READY
    assert gpus.read(0, p, 8) != b"pinned!!"  # the default stream does not wait for s
    assert rt.musaEmuReleaseStream(s) == SUCCESS
    assert rt.musaStreamSynchronize(s) == SUCCESS
    assert rt.musaStreamQuery(s) == SUCCESS
    assert gpus.read(0, p, 8) == b"pinned!!"
    # Pageable memory is read before the call returns (CUDA's staging), written before it returns.
    page = ctypes.create_string_buffer(b"pageable", 8)
    assert rt.musaEmuHoldStream(s) == SUCCESS
    assert rt.musaMemcpyAsync(p, page, 8, H2D, s) == SUCCESS
    ctypes.memmove(page, b"changed!", 8)
    assert rt.musaEmuReleaseStream(s) == SUCCESS
    out = ctypes.create_string_buffer(8)
    assert rt.musaMemcpyAsync(out, p, 8, D2H, s) == SUCCESS
    assert out.raw == b"pageable"


def test_memory_freed_while_queued_fails_the_stream(rt, gpus):
    s = gpus.stream(0)
    p = made(rt.musaMalloc, 64)
    assert rt.musaEmuHoldStream(s) == SUCCESS
    assert rt.musaMemsetAsync(p, 1, 64, s) == SUCCESS
    assert rt.musaFree(p) == SUCCESS  # CUDA cannot tell; the emulator records a violation
    assert rt.musaEmuViolationCount() == 1
    assert b"musaFree" in rt.musaEmuLastViolation()
    assert rt.musaEmuReleaseStream(s) == SUCCESS
    assert rt.musaStreamSynchronize(s) == ILLEGAL_ADDRESS
    assert rt.musaGetLastError() == ILLEGAL_ADDRESS
    assert rt.musaStreamSynchronize(s) == SUCCESS  # surfaced once
    # The same through an event recorded behind the failed work, and the device.
    p = made(rt.musaMalloc, 64)
    e = made(rt.musaEventCreate)
    assert rt.musaEmuHoldStream(s) == SUCCESS
    assert rt.musaMemsetAsync(p, 1, 64, s) == SUCCESS
    assert rt.musaEventRecord(e, s) == SUCCESS
    assert rt.musaFree(p) == SUCCESS
    assert rt.musaEmuReleaseStream(s) == SUCCESS
    assert rt.musaEventSynchronize(e) == ILLEGAL_ADDRESS
    assert rt.musaDeviceSynchronize() == ILLEGAL_ADDRESS
    assert rt.musaDeviceSynchronize() == SUCCESS
    assert rt.musaEventDestroy(e) == SUCCESS


def test_events_time_and_order_streams(rt, gpus):
    a, b = gpus.stream(0), gpus.stream(0)
    p, q = gpus.malloc(0, 4), gpus.malloc(0, 4)
    start, stop, ready = (made(rt.musaEventCreate) for _ in range(3))
    untimed = made(rt.musaEventCreateWithFlags, DISABLE_TIMING)
    assert rt.musaEventRecord(start, a) == SUCCESS
    assert rt.musaEmuHoldStream(a) == SUCCESS
    assert rt.musaMemsetAsync(p, 9, 4, a) == SUCCESS
    assert rt.musaEventRecord(ready, a) == SUCCESS
    assert rt.musaEventRecord(stop, a) == SUCCESS
    # b waits for `ready`: its copy sees a's memset.
    assert rt.musaStreamWaitEvent(b, ready, 0) == SUCCESS
    assert rt.musaMemcpyAsync(q, p, 4, D2D, b) == SUCCESS
    assert rt.musaEventQuery(stop) == NOT_READY
    assert rt.musaStreamQuery(b) == NOT_READY
    ms = ctypes.c_float()
    assert rt.musaEventElapsedTime(ctypes.byref(ms), start, stop) == NOT_READY
    time.sleep(0.02)
    assert rt.musaEmuReleaseStream(a) == SUCCESS
    assert rt.musaStreamSynchronize(b) == SUCCESS
    assert gpus.read(0, q, 4) == b"\x09" * 4
    assert rt.musaEventSynchronize(stop) == SUCCESS
    assert rt.musaEventQuery(stop) == SUCCESS
    assert rt.musaEventElapsedTime(ctypes.byref(ms), start, stop) == SUCCESS
    assert ms.value >= 15.0
    assert rt.musaEventRecord(untimed, a) == SUCCESS
    assert rt.musaEventSynchronize(untimed) == SUCCESS
    assert rt.musaEventElapsedTime(ctypes.byref(ms), start, untimed) == INVALID_HANDLE
    for e in (start, stop, ready, untimed):
        assert rt.musaEventDestroy(e) == SUCCESS
    assert rt.musaEventDestroy(start) == INVALID_HANDLE


def test_default_streams_are_per_device(rt, gpus):
    p1 = gpus.malloc(1, 4)
    s0 = gpus.stream(0)
    rt.musaSetDevice(1)
    assert rt.musaMemsetAsync(p1, 3, 4, s0) == INVALID_VALUE  # a stream of device 0
    assert rt.musaEmuHoldStream(None) == SUCCESS  # device 1's default stream
    assert rt.musaMemsetAsync(p1, 3, 4, None) == SUCCESS
    rt.musaSetDevice(0)
    assert rt.musaStreamQuery(None) == SUCCESS  # device 0's is idle
    rt.musaSetDevice(1)
    assert rt.musaStreamQuery(None) == NOT_READY
    assert rt.musaEmuReleaseStream(None) == SUCCESS
    assert rt.musaStreamSynchronize(None) == SUCCESS
    assert gpus.read(1, p1, 4) == b"\x03" * 4


def test_stream_priorities_are_clamped(rt, gpus):
    least, greatest = ctypes.c_int(), ctypes.c_int()
    assert rt.musaDeviceGetStreamPriorityRange(ctypes.byref(least), ctypes.byref(greatest)) == 0
    assert (least.value, greatest.value) == (0, -1)
    rt.musaSetDevice(0)
    for priority in (-5, 0, 3):
        assert rt.musaStreamDestroy(made(rt.musaStreamCreateWithPriority, 0, priority)) == SUCCESS
    assert rt.musaStreamDestroy(None) == INVALID_HANDLE  # the default stream is not destroyable


def test_pointer_attributes_and_pinned_memory(rt, gpus):
    p = gpus.malloc(1, 32)
    pinned = gpus.pinned_buffer(32)
    attrs = PointerAttributes()
    rt.musaSetDevice(1)
    assert rt.musaPointerGetAttributes(ctypes.byref(attrs), p + 8) == SUCCESS
    assert (attrs.type, attrs.device, attrs.devicePointer) == (DEVICE, 1, p + 8)
    assert rt.musaPointerGetAttributes(ctypes.byref(attrs), pinned) == SUCCESS
    assert (attrs.type, attrs.hostPointer) == (HOST, pinned)
    page = ctypes.create_string_buffer(16)
    assert rt.musaPointerGetAttributes(ctypes.byref(attrs), page) == SUCCESS  # as CUDA 11+
    assert attrs.type == UNREGISTERED
    other = made(rt.musaHostAlloc, 16, 0)
    assert rt.musaFreeHost(other) == SUCCESS
    assert rt.musaFreeHost(other) == INVALID_VALUE


def test_fault_injection_counts_and_live_allocations(rt, gpus):
    before = rt.musaEmuLiveAllocations(0)
    assert rt.musaEmuInjectFault(b"musaMalloc", 2, MEMORY_ALLOCATION) == 0
    gpus.malloc(0, 100)
    assert rt.musaEmuLiveAllocations(0) == before + 1
    assert rt.musaEmuLiveBytes(0) >= 100
    p = ctypes.c_void_p()
    assert rt.musaMalloc(ctypes.byref(p), 100) == MEMORY_ALLOCATION  # the injected one
    assert rt.musaEmuLiveAllocations(0) == before + 1
    assert rt.musaEmuCallCount(b"musaMalloc") == 2
    assert rt.musaEmuInjectFault(b"Binary::Run", 1, 1) == 0  # muDNN's operators count too
    assert rt.musaEmuInjectFault(b"cudaMalloc", 1, 2) == -1  # not a MUSA function
    assert rt.musaEmuInjectFault(b"musaMalloc", 0, 2) == -1
    rt.musaEmuClearFaults()
    rt.musaEmuReset()
    assert rt.musaEmuCallCount(b"musaMalloc") == 0
    assert rt.musaGetLastError() == MEMORY_ALLOCATION
    assert rt.musaGetErrorString(ILLEGAL_ADDRESS).startswith(b"musaErrorIllegalAddress: ")
    assert rt.musaGetErrorString(MEMORY_ALLOCATION).startswith(b"musaErrorMemoryAllocation: ")


def _fresh(code: str, **env: str) -> str:
    """Runs `code` in a fresh interpreter (with `rt`, the declared library) under `env`."""
    prelude = textwrap.dedent(f"""
        import ctypes, os, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_emulator_runtime import _declare, PointerAttributes
        rt = _declare(ctypes.CDLL({str(_library())!r}))
        """)
    run = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def test_device_count_and_memory_come_from_the_environment():
    out = _fresh(
        """
        n, free, total = ctypes.c_int(-1), ctypes.c_size_t(), ctypes.c_size_t()
        print(rt.musaGetDeviceCount(ctypes.byref(n)), n.value)
        print(rt.musaMemGetInfo(ctypes.byref(free), ctypes.byref(total)), free.value, total.value)
        p = ctypes.c_void_p()
        print(rt.musaMalloc(ctypes.byref(p), 1 << 20), rt.musaMalloc(ctypes.byref(p), 64 << 20))
        rt.musaMemGetInfo(ctypes.byref(free), ctypes.byref(total))
        print(free.value, rt.musaSetDevice(2), rt.musaSetDevice(3))
        """,
        MUSA_EMU_DEVICE_COUNT="3",
        MUSA_EMU_MEMORY_MB="64",
    )
    assert out.split() == [
        "0", "3", "0", str(64 << 20), str(64 << 20), "0", str(MEMORY_ALLOCATION),
        str(63 << 20), "0", str(INVALID_DEVICE),
    ]  # fmt: skip


def test_no_device():
    out = _fresh(
        """
        n, p = ctypes.c_int(-1), ctypes.c_void_p()
        print(rt.musaGetDeviceCount(ctypes.byref(n)), n.value, rt.musaMalloc(ctypes.byref(p), 8))
        """,
        MUSA_EMU_DEVICE_COUNT="0",
    )
    assert out.split() == [str(NO_DEVICE), "0", str(NO_DEVICE)]


def test_peer_copy_needs_one_of_the_two_devices_current():
    out = _fresh(
        """
        a, b = ctypes.c_void_p(), ctypes.c_void_p()
        rt.musaSetDevice(0); rt.musaMalloc(ctypes.byref(a), 8)
        rt.musaSetDevice(1); rt.musaMalloc(ctypes.byref(b), 8)
        rt.musaSetDevice(2)
        print(rt.musaMemcpyPeer(b, 1, a, 0, 8))
        """,
        MUSA_EMU_DEVICE_COUNT="3",
    )
    assert out.split() == [str(INVALID_DEVICE)]


def test_a_forked_child_starts_afresh():
    """The parent's stream threads do not survive a fork: the child's runtime is a new one."""
    out = _fresh(
        """
        p = ctypes.c_void_p()
        rt.musaSetDevice(1); rt.musaMalloc(ctypes.byref(p), 8); rt.musaMemsetAsync(p, 0, 8, None)
        pid = os.fork()
        if pid == 0:
            n = ctypes.c_int()
            ok = (rt.musaGetDeviceCount(ctypes.byref(n)) == 0 and rt.musaEmuLiveAllocations(1) == 0
                  and rt.musaStreamSynchronize(None) == 0)
            os._exit(0 if ok else 1)
        print(os.waitpid(pid, 0)[1], rt.musaEmuLiveAllocations(1))
        """
    )
    assert out.split() == ["0", "1"]


# ---- stream capture and graphs ----


def capture_status(rt, stream: int) -> int:
    status = ctypes.c_int(-1)
    assert rt.musaStreamIsCapturing(stream, ctypes.byref(status)) == SUCCESS
    return status.value


def end_capture(rt, stream: int) -> tuple[int, int | None]:
    graph = ctypes.c_void_p()
    return rt.musaStreamEndCapture(stream, ctypes.byref(graph)), graph.value


def in_thread(call):
    """call() in another thread: its result."""
    out = []
    t = threading.Thread(target=lambda: out.append(call()))
    t.start()
    t.join()
    return out[0]


def test_a_capture_records_work_and_each_launch_runs_it_again(rt, gpus):
    x, y = gpus.malloc(0, 8), gpus.malloc(0, 8)
    gpus.write(0, x, b"aaaaaaaa")
    gpus.write(0, y, b"--------")
    s = gpus.stream(0)
    ran = []
    host_fn = HOST_FN(lambda _: ran.append(1))
    assert rt.musaStreamBeginCapture(s, GLOBAL) == SUCCESS
    assert capture_status(rt, s) == ACTIVE
    assert rt.musaMemsetAsync(y, ord("z"), 4, s) == SUCCESS
    assert rt.musaMemcpyAsync(y + 4, x, 4, D2D, s) == SUCCESS
    assert rt.musaLaunchHostFunc(s, host_fn, None) == SUCCESS
    status, graph = end_capture(rt, s)
    assert status == SUCCESS and graph
    assert capture_status(rt, s) == NONE
    assert rt.musaStreamSynchronize(s) == SUCCESS
    assert gpus.read(0, y, 8) == b"--------" and not ran  # recorded, not run
    exe = made(rt.musaGraphInstantiate, graph, 0)
    other = gpus.stream(0)
    assert rt.musaGraphLaunch(exe, other) == SUCCESS
    assert rt.musaStreamSynchronize(other) == SUCCESS
    assert gpus.read(0, y, 8) == b"zzzzaaaa" and ran == [1]
    # The same addresses at every launch; the executable graph outlives the graph.
    gpus.write(0, x, b"bbbbbbbb")
    assert rt.musaGraphDestroy(graph) == SUCCESS
    assert rt.musaGraphLaunch(exe, s) == SUCCESS
    assert rt.musaStreamSynchronize(s) == SUCCESS
    assert gpus.read(0, y, 8) == b"zzzzbbbb" and ran == [1, 1]
    rt.musaSetDevice(1)
    assert rt.musaGraphLaunch(exe, None) == INVALID_VALUE  # a stream of another GPU
    assert rt.musaGraphExecDestroy(exe) == SUCCESS
    assert rt.musaGraphLaunch(exe, s) == INVALID_VALUE
    assert rt.musaGraphInstantiate(ctypes.byref(ctypes.c_void_p()), graph, 0) == INVALID_VALUE
    rt.musaGetLastError()


def test_calls_that_wait_for_recorded_work_invalidate_the_capture(rt, gpus):
    p = gpus.malloc(0, 8)
    s = gpus.stream(0)
    e = made(rt.musaEventCreate)
    page = ctypes.create_string_buffer(8)
    for call, status in [
        (lambda: rt.musaStreamSynchronize(s), CAPTURE_UNSUPPORTED),
        (lambda: rt.musaStreamQuery(s), CAPTURE_UNSUPPORTED),
        (lambda: rt.musaStreamDestroy(s), CAPTURE_UNSUPPORTED),
        (lambda: rt.musaDeviceSynchronize(), CAPTURE_UNSUPPORTED),
        (lambda: rt.musaEventQuery(e), CAPTURED_EVENT),
        (lambda: rt.musaEventSynchronize(e), CAPTURED_EVENT),
        # A graph would read pageable memory at replay: CUDA does not record such a copy.
        (lambda: rt.musaMemcpyAsync(p, page, 8, H2D, s), CAPTURE_UNSUPPORTED),
    ]:
        assert rt.musaStreamBeginCapture(s, RELAXED) == SUCCESS  # refused in every mode
        assert rt.musaMemsetAsync(p, 1, 8, s) == SUCCESS
        assert rt.musaEventRecord(e, s) == SUCCESS
        assert call() == status
        assert rt.musaGetLastError() == status
        assert capture_status(rt, s) == INVALIDATED
        assert rt.musaMemsetAsync(p, 0, 8, s) == CAPTURE_INVALIDATED  # later work too
        assert end_capture(rt, s) == (CAPTURE_INVALIDATED, None)
        assert capture_status(rt, s) == NONE
    assert rt.musaEventQuery(e) == SUCCESS  # a record in a capture that ended is no record
    assert rt.musaEventDestroy(e) == SUCCESS
    assert rt.musaStreamBeginCapture(None, GLOBAL) == CAPTURE_UNSUPPORTED  # the default stream
    assert end_capture(rt, s)[0] == ILLEGAL_STATE  # nothing to end
    rt.musaGetLastError()


def test_the_capture_mode_decides_which_threads_may_allocate(rt, gpus):
    s = gpus.stream(0)
    p, q = ctypes.c_void_p(), ctypes.c_void_p()
    # Global: allocation is forbidden in every thread whose own mode is not relaxed.
    assert rt.musaStreamBeginCapture(s, GLOBAL) == SUCCESS
    mode = ctypes.c_int(RELAXED)
    assert rt.musaThreadExchangeStreamCaptureMode(ctypes.byref(mode)) == SUCCESS
    assert mode.value == GLOBAL
    assert rt.musaMalloc(ctypes.byref(p), 8) == SUCCESS  # as a caching allocator does
    assert rt.musaFree(p) == SUCCESS
    assert rt.musaThreadExchangeStreamCaptureMode(ctypes.byref(mode)) == SUCCESS
    assert mode.value == RELAXED
    assert capture_status(rt, s) == ACTIVE
    assert in_thread(lambda: rt.musaHostAlloc(ctypes.byref(q), 8, 0)) == CAPTURE_UNSUPPORTED
    assert end_capture(rt, s) == (CAPTURE_INVALIDATED, None)
    # Thread-local: only the capturing thread is held to it.
    assert rt.musaStreamBeginCapture(s, THREAD_LOCAL) == SUCCESS
    assert in_thread(lambda: rt.musaMalloc(ctypes.byref(q), 8)) == SUCCESS
    assert rt.musaFree(q) == CAPTURE_UNSUPPORTED
    assert in_thread(lambda: rt.musaFree(q)) == SUCCESS
    assert end_capture(rt, s) == (CAPTURE_INVALIDATED, None)
    page = ctypes.create_string_buffer(8)
    buf = gpus.malloc(0, 8)
    assert rt.musaStreamBeginCapture(s, THREAD_LOCAL) == SUCCESS
    assert rt.musaMemcpy(buf, page, 8, H2D) == CAPTURE_UNSUPPORTED  # synchronous
    assert end_capture(rt, s) == (CAPTURE_INVALIDATED, None)
    # Relaxed: nothing is forbidden for allocation.
    assert rt.musaStreamBeginCapture(s, RELAXED) == SUCCESS
    assert rt.musaMalloc(ctypes.byref(p), 8) == SUCCESS
    assert rt.musaFree(p) == SUCCESS
    status, graph = end_capture(rt, s)
    assert status == SUCCESS
    assert rt.musaGraphDestroy(graph) == SUCCESS
    rt.musaGetLastError()


def test_a_capture_ends_in_the_thread_that_began_it_unless_relaxed(rt, gpus):
    s = gpus.stream(0)
    assert rt.musaStreamBeginCapture(s, THREAD_LOCAL) == SUCCESS
    assert in_thread(lambda: end_capture(rt, s)) == (CAPTURE_WRONG_THREAD, None)
    assert capture_status(rt, s) == NONE  # it ended, without a graph
    assert rt.musaStreamBeginCapture(s, RELAXED) == SUCCESS
    status, graph = in_thread(lambda: end_capture(rt, s))
    assert status == SUCCESS
    assert rt.musaGraphDestroy(graph) == SUCCESS
    assert rt.musaGraphDestroy(graph) == INVALID_VALUE
    rt.musaGetLastError()


def test_streams_join_a_capture_through_its_events(rt, gpus):
    x = gpus.malloc(0, 8)
    gpus.write(0, x, b"--------")
    s, t = gpus.stream(0), gpus.stream(0)
    fork, join, outside = (made(rt.musaEventCreate) for _ in range(3))
    # A stream that waits on an event recorded in the capture joins it; the origin must wait
    # for its work before the capture ends.
    assert rt.musaStreamBeginCapture(s, GLOBAL) == SUCCESS
    assert rt.musaEventRecord(fork, s) == SUCCESS
    assert rt.musaStreamWaitEvent(t, fork, 0) == SUCCESS
    assert capture_status(rt, t) == ACTIVE
    assert rt.musaMemsetAsync(x + 4, ord("b"), 4, t) == SUCCESS
    assert rt.musaStreamSynchronize(t) == CAPTURE_UNSUPPORTED
    assert end_capture(rt, t)[0] == 903  # only the origin ends it (musaErrorStreamCaptureUnmatched)
    assert end_capture(rt, s) == (CAPTURE_INVALIDATED, None)
    assert capture_status(rt, t) == NONE
    assert rt.musaStreamBeginCapture(s, GLOBAL) == SUCCESS
    assert rt.musaEventRecord(fork, s) == SUCCESS
    assert rt.musaStreamWaitEvent(t, fork, 0) == SUCCESS
    assert rt.musaMemsetAsync(x + 4, ord("b"), 4, t) == SUCCESS
    assert end_capture(rt, s) == (CAPTURE_UNJOINED, None)
    assert rt.musaStreamBeginCapture(s, GLOBAL) == SUCCESS
    assert rt.musaEventRecord(fork, s) == SUCCESS
    assert rt.musaStreamWaitEvent(t, fork, 0) == SUCCESS
    assert rt.musaMemsetAsync(x + 4, ord("b"), 4, t) == SUCCESS
    assert rt.musaEventRecord(join, t) == SUCCESS
    assert rt.musaStreamWaitEvent(s, join, 0) == SUCCESS
    assert rt.musaMemsetAsync(x, ord("a"), 4, s) == SUCCESS
    status, graph = end_capture(rt, s)
    assert status == SUCCESS and capture_status(rt, t) == NONE
    assert gpus.read(0, x, 8) == b"--------"
    exe = made(rt.musaGraphInstantiate, graph, 0)
    assert rt.musaGraphLaunch(exe, s) == SUCCESS  # both streams' work, on one stream
    assert rt.musaStreamSynchronize(s) == SUCCESS
    assert gpus.read(0, x, 8) == b"aaaabbbb"
    # Waiting on work outside the capture would make the graph depend on it.
    assert rt.musaEventRecord(outside, t) == SUCCESS
    assert rt.musaStreamBeginCapture(s, GLOBAL) == SUCCESS
    assert rt.musaStreamWaitEvent(s, outside, 0) == CAPTURE_ISOLATION
    assert end_capture(rt, s) == (CAPTURE_INVALIDATED, None)
    for handle in (exe,):
        assert rt.musaGraphExecDestroy(handle) == SUCCESS
    assert rt.musaGraphDestroy(graph) == SUCCESS
    for e in (fork, join, outside):
        assert rt.musaEventDestroy(e) == SUCCESS
    rt.musaGetLastError()


def test_a_launch_of_a_graph_whose_memory_was_freed_fails(rt, gpus):
    s = gpus.stream(0)
    p = made(rt.musaMalloc, 64)
    assert rt.musaStreamBeginCapture(s, GLOBAL) == SUCCESS
    assert rt.musaMemsetAsync(p, 1, 64, s) == SUCCESS
    status, graph = end_capture(rt, s)
    assert status == SUCCESS
    exe = made(rt.musaGraphInstantiate, graph, 0)
    assert rt.musaFree(p) == SUCCESS
    assert rt.musaGraphLaunch(exe, s) == SUCCESS
    assert rt.musaStreamSynchronize(s) == ILLEGAL_ADDRESS
    assert rt.musaGraphExecDestroy(exe) == SUCCESS
    assert rt.musaGraphDestroy(graph) == SUCCESS
    rt.musaGetLastError()
