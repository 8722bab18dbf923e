"""Unit tests of the built-in sim runtime (libtorch_fl_sim.so) through its C ABI.

No torch here: the table is reached with ctypes through tfl_runtime_get(1), so
these tests pin down the runtime's own contract (runtime.h) independently of
the torch glue. Environment-dependent cases (device count, capacity, faults
from FLAGOS_SIM_FAULTS) run in a subprocess, because the library reads the
environment once per process.

Set TORCH_FL_SIM_LIBRARY to test a library outside the installed package.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    byref,
    c_char_p,
    c_float,
    c_int,
    c_size_t,
    c_uint32,
    c_uint64,
    c_void_p,
)
from pathlib import Path
from types import ModuleType

import pytest

# ---- locating the library and its control module (without importing torch) --


def _load_sim_control() -> ModuleType:
    """torch_fl/runtimes/sim.py, loaded by path: importing torch_fl would import torch."""
    candidates = []
    spec = importlib.util.find_spec("torch_fl")  # does not run torch_fl/__init__.py
    if spec is not None and spec.submodule_search_locations:
        candidates += [Path(p) / "runtimes" / "sim.py" for p in spec.submodule_search_locations]
    candidates.append(
        Path(__file__).resolve().parents[1] / "src" / "torch_fl" / "runtimes" / "sim.py"
    )
    for path in candidates:
        if path.is_file():
            module_spec = importlib.util.spec_from_file_location("_torch_fl_sim_control", path)
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
            return module
    raise FileNotFoundError(f"torch_fl/runtimes/sim.py not found in {candidates}")


sim = _load_sim_control()

# The runtime's own C ABI, no torch; fault injection needs the sim controls.
pytestmark = [pytest.mark.runtime, pytest.mark.sim_only]

# ---- a ctypes mirror of tfl_runtime_v1 (include/torch_fl/runtime.h) ----------

S = c_int  # tfl_status
OK = 0
INVALID_VALUE = 1
INVALID_DEVICE = 2
OUT_OF_MEMORY = 3
INVALID_POINTER = 4
INVALID_MEMCPY_KIND = 5
NOT_READY = 6
NOT_SUPPORTED = 7
INVALID_HANDLE = 8
NOT_INITIALIZED = 9
DEVICE_ERROR = 10
INJECTED = 11
CAPTURE = 12

H2H, H2D, D2H, D2D = 0, 1, 2, 3
POINTER_UNKNOWN, POINTER_DEVICE, POINTER_HOST = 0, 1, 2
EVENT_DISABLE_TIMING = 1
CAP_HOST_ADDRESSABLE_MEMORY = 1 << 0
CAP_PEER_COPY = 1 << 1
CAP_EVENT_TIMING = 1 << 2
CAP_UNORDERED_PRODUCERS = 1 << 3
CAP_PINNED_HOST_MEMORY = 1 << 4
CAP_GRAPHS = 1 << 5
MODE_GLOBAL, MODE_THREAD_LOCAL, MODE_RELAXED = 0, 1, 2
CAPTURE_NONE, CAPTURE_ACTIVE, CAPTURE_INVALIDATED = 0, 1, 2

HOST_FN = CFUNCTYPE(None, c_void_p)
IPC_HANDLE = ctypes.c_uint8 * 64  # tfl_ipc_handle


class RuntimeV1(Structure):
    _fields_ = [
        ("abi_version", c_uint32),
        ("struct_size", c_uint32),
        ("name", c_char_p),
        ("capabilities", c_uint64),
        ("init", CFUNCTYPE(S)),
        ("status_name", CFUNCTYPE(c_char_p, S)),
        ("last_error", CFUNCTYPE(c_char_p)),
        ("device_count", CFUNCTYPE(S, POINTER(c_int))),
        ("get_device", CFUNCTYPE(S, POINTER(c_int))),
        ("set_device", CFUNCTYPE(S, c_int)),
        ("device_synchronize", CFUNCTYPE(S)),
        ("mem_get_info", CFUNCTYPE(S, POINTER(c_size_t), POINTER(c_size_t))),
        ("device_name", CFUNCTYPE(S, c_int, c_char_p, c_size_t)),
        ("malloc", CFUNCTYPE(S, POINTER(c_void_p), c_size_t)),
        ("free", CFUNCTYPE(S, c_void_p)),
        ("host_malloc", CFUNCTYPE(S, POINTER(c_void_p), c_size_t)),
        ("host_free", CFUNCTYPE(S, c_void_p)),
        ("pointer_info", CFUNCTYPE(S, c_void_p, POINTER(c_int), POINTER(c_int))),
        ("memcpy", CFUNCTYPE(S, c_void_p, c_void_p, c_size_t, c_int)),
        ("memcpy_async", CFUNCTYPE(S, c_void_p, c_void_p, c_size_t, c_int, c_void_p)),
        ("memcpy_peer_async", CFUNCTYPE(S, c_void_p, c_int, c_void_p, c_int, c_size_t, c_void_p)),
        ("memset_async", CFUNCTYPE(S, c_void_p, c_int, c_size_t, c_void_p)),
        ("stream_create", CFUNCTYPE(S, POINTER(c_void_p), c_int)),
        ("stream_destroy", CFUNCTYPE(S, c_void_p)),
        ("stream_synchronize", CFUNCTYPE(S, c_void_p)),
        ("stream_query", CFUNCTYPE(S, c_void_p)),
        ("stream_wait_event", CFUNCTYPE(S, c_void_p, c_void_p)),
        ("launch_host_func", CFUNCTYPE(S, c_void_p, HOST_FN, c_void_p)),
        ("event_create", CFUNCTYPE(S, POINTER(c_void_p), c_uint32)),
        ("event_destroy", CFUNCTYPE(S, c_void_p)),
        ("event_record", CFUNCTYPE(S, c_void_p, c_void_p)),
        ("event_synchronize", CFUNCTYPE(S, c_void_p)),
        ("event_query", CFUNCTYPE(S, c_void_p)),
        ("event_elapsed_ms", CFUNCTYPE(S, POINTER(c_float), c_void_p, c_void_p)),
        # v1.1
        (
            "ipc_get_handle",
            CFUNCTYPE(S, c_void_p, POINTER(IPC_HANDLE), POINTER(c_size_t), POINTER(c_size_t)),
        ),
        (
            "ipc_open_handle",
            CFUNCTYPE(S, POINTER(IPC_HANDLE), POINTER(c_void_p), POINTER(c_size_t), POINTER(c_int)),
        ),
        ("ipc_close_handle", CFUNCTYPE(S, c_void_p)),
        # v1.2
        ("native_stream", CFUNCTYPE(S, c_void_p, c_int, POINTER(c_void_p))),
        ("probe", CFUNCTYPE(S, POINTER(c_int), c_char_p, c_size_t)),
        # v1.3
        ("graph_capture_begin", CFUNCTYPE(S, c_void_p, c_int)),
        ("graph_capture_end", CFUNCTYPE(S, c_void_p, POINTER(c_void_p))),
        ("graph_instantiate", CFUNCTYPE(S, c_void_p)),
        ("graph_launch", CFUNCTYPE(S, c_void_p, c_void_p)),
        ("graph_destroy", CFUNCTYPE(S, c_void_p)),
        ("stream_capture_status", CFUNCTYPE(S, c_void_p, POINTER(c_int))),
    ]


def _table() -> RuntimeV1:
    lib = sim.library()
    lib.tfl_runtime_get.argtypes = [c_uint32]
    lib.tfl_runtime_get.restype = POINTER(RuntimeV1)
    return lib.tfl_runtime_get(1).contents


class Runtime:
    """Thin helpers over the table: out-params become return values and a
    failing call raises with the runtime's own status name and message."""

    def __init__(self, table: RuntimeV1) -> None:
        self.t = table

    def error(self) -> str:
        return self.t.last_error().decode()

    def check(self, status: int) -> None:
        if status != OK:
            raise AssertionError(f"{self.t.status_name(status).decode()}: {self.error()}")

    def malloc(self, size: int) -> int:
        p = c_void_p()
        self.check(self.t.malloc(byref(p), size))
        return p.value or 0

    def host_malloc(self, size: int) -> int:
        p = c_void_p()
        self.check(self.t.host_malloc(byref(p), size))
        return p.value or 0

    def pointer_info(self, ptr: int) -> tuple[int, int]:
        kind, device = c_int(-7), c_int(-7)
        self.check(self.t.pointer_info(ptr, byref(kind), byref(device)))
        return kind.value, device.value

    def get_device(self) -> int:
        d = c_int(-1)
        self.check(self.t.get_device(byref(d)))
        return d.value

    def device_count(self) -> int:
        n = c_int(-1)
        self.check(self.t.device_count(byref(n)))
        return n.value

    def mem_get_info(self) -> tuple[int, int]:
        free, total = c_size_t(), c_size_t()
        self.check(self.t.mem_get_info(byref(free), byref(total)))
        return free.value, total.value

    def stream(self) -> int:
        s = c_void_p()
        self.check(self.t.stream_create(byref(s), 0))
        return s.value

    def event(self, flags: int = 0) -> int:
        e = c_void_p()
        self.check(self.t.event_create(byref(e), flags))
        return e.value

    def read(self, device_ptr: int, n: int) -> bytes:
        """Device bytes via a synchronous D2H copy."""
        buf = (ctypes.c_ubyte * n)()
        self.check(self.t.memcpy(ctypes.addressof(buf), device_ptr, n, D2H))
        return bytes(buf)

    def write(self, device_ptr: int, data: bytes) -> None:
        buf = ctypes.create_string_buffer(data, len(data))
        self.check(self.t.memcpy(device_ptr, ctypes.addressof(buf), len(data), H2D))

    def ipc_get_handle(self, ptr: int) -> tuple[bytes, int, int]:
        handle, offset, size = IPC_HANDLE(), c_size_t(), c_size_t()
        self.check(self.t.ipc_get_handle(ptr, byref(handle), byref(offset), byref(size)))
        return bytes(handle), offset.value, size.value

    def capture_end(self, stream: int) -> tuple[int, int | None]:
        """(status, graph) of graph_capture_end; the graph stays unwritten on failure."""
        g = c_void_p()
        st = self.t.graph_capture_end(stream, byref(g))
        return st, g.value

    def capture_status(self, stream: int | None) -> int:
        status = c_int(-1)
        self.check(self.t.stream_capture_status(stream, byref(status)))
        return status.value

    def ipc_open(self, handle: bytes) -> tuple[int, int, int, int]:
        """(status, ptr, size, device) of ipc_open_handle."""
        h = IPC_HANDLE.from_buffer_copy(handle)
        p, size, device = c_void_p(), c_size_t(), c_int(-1)
        st = self.t.ipc_open_handle(byref(h), byref(p), byref(size), byref(device))
        return st, p.value or 0, size.value, device.value


class Gate:
    """A host function that blocks its stream until opened."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.started = threading.Event()

        def _block(_user_data: object) -> None:
            self.started.set()
            self.opened.wait(10)  # bounded, so a broken test cannot hang forever

        self.fn = HOST_FN(_block)  # keep a reference until the stream ran it

    def launch(self, rt: Runtime, stream: int | None) -> None:
        rt.check(rt.t.launch_host_func(stream, self.fn, None))

    def open_later(self, seconds: float = 0.05) -> threading.Timer:
        timer = threading.Timer(seconds, self.opened.set)
        timer.start()
        return timer


@pytest.fixture(scope="module")
def rt() -> Iterator[Runtime]:
    # Default environment: 2 devices of 16 GiB. Tests that need two devices
    # skip (saying why) if this process was started with fewer.
    runtime = Runtime(_table())
    runtime.check(runtime.t.init())
    runtime.check(runtime.t.set_device(0))
    sim.clear_faults()
    yield runtime
    sim.clear_faults()


@pytest.fixture
def two_devices(rt: Runtime) -> Runtime:
    if rt.device_count() < 2:
        pytest.skip("needs FLAGOS_SIM_DEVICES >= 2 (the sim runtime was initialized with fewer)")
    return rt


# ---- subprocess children (run as `python test_sim_runtime.py <child>`) -------


def _run_child(name: str, **env: str) -> dict:
    child_env = dict(os.environ)
    for key in ("FLAGOS_SIM_DEVICES", "FLAGOS_SIM_MEMORY", "FLAGOS_SIM_FAULTS"):
        child_env.pop(key, None)
    child_env.update(env)
    child_env[sim.LIBRARY_ENV] = sim.library_path()
    proc = subprocess.run(
        [sys.executable, __file__, name], env=child_env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def child_configured() -> dict:
    rt = Runtime(_table())
    out: dict = {"count": rt.device_count()}
    rt.check(rt.t.set_device(2))
    out["total"] = rt.mem_get_info()[1]
    a = rt.malloc(512 << 10)  # 1st malloc: fine
    p = c_void_p()
    out["second_malloc"] = rt.t.malloc(byref(p), 16)  # FLAGOS_SIM_FAULTS=malloc:2
    out["second_error"] = rt.error()
    out["oom"] = rt.t.malloc(byref(p), 600 << 10)
    out["oom_error"] = rt.error()
    out["free_after_oom"] = rt.mem_get_info()[0]
    rt.check(rt.t.free(a))
    out["free_after_free"] = rt.mem_get_info()[0]
    e = c_void_p()
    out["event_create"] = rt.t.event_create(byref(e), 0)  # event_create:1:TFL_ERROR_DEVICE
    # Streams left alive (idle workers) must not hang process exit.
    for _ in range(3):
        rt.stream()
    rt.check(rt.t.device_synchronize())
    return out


def child_ipc_open() -> dict:
    """Opens TFL_TEST_IPC_HANDLE (hex), reads it, writes 0x5A over its first bytes, closes."""
    rt = Runtime(_table())
    handle = bytes.fromhex(os.environ["TFL_TEST_IPC_HANDLE"])
    n = int(os.environ["TFL_TEST_IPC_BYTES"])
    st, ptr, size, device = rt.ipc_open(handle)
    out: dict = {"status": st, "error": rt.error() if st else "", "size": size, "device": device}
    if st == OK:
        out["read"] = rt.read(ptr, n).hex()
        out["kind"] = list(rt.pointer_info(ptr + 1))
        rt.write(ptr, b"\x5a" * n)
        p = c_void_p(ptr)
        out["free_imported"] = rt.t.free(p)
        out["free_error"] = rt.error()
        rt.check(rt.t.ipc_close_handle(ptr))
        out["close_again"] = rt.t.ipc_close_handle(ptr)
    return out


def child_bad_env() -> dict:
    rt = Runtime(_table())
    init = rt.t.init()
    init_error = rt.error()
    p = c_void_p()
    return {
        "init": init,
        "init_error": init_error,
        "malloc": rt.t.malloc(byref(p), 16),
        "malloc_error": rt.error(),
    }


def child_memory_suffix() -> dict:
    rt = Runtime(_table())
    return {"count": rt.device_count(), "total": rt.mem_get_info()[1]}


# ---- table and devices ---------------------------------------------------------


def test_table_header(rt: Runtime) -> None:
    t = rt.t
    assert t.abi_version == 1
    assert t.struct_size == ctypes.sizeof(RuntimeV1)
    assert t.name == b"sim"
    assert t.capabilities == (
        CAP_HOST_ADDRESSABLE_MEMORY
        | CAP_PEER_COPY
        | CAP_EVENT_TIMING
        | CAP_PINNED_HOST_MEMORY
        | CAP_GRAPHS
    )
    assert not t.capabilities & CAP_UNORDERED_PRODUCERS
    lib = sim.library()
    assert not lib.tfl_runtime_get(2), "an unknown ABI version must give NULL"
    assert t.init() == OK  # idempotent


def test_status_names_match_python_mirror(rt: Runtime) -> None:
    for name, code in sim.STATUS.items():
        assert rt.t.status_name(code).decode() == name


@pytest.mark.multidevice
def test_devices_and_current_device_is_per_thread(two_devices: Runtime) -> None:
    rt = two_devices
    assert rt.device_count() == 2
    buf = ctypes.create_string_buffer(64)
    rt.check(rt.t.device_name(1, buf, 64))
    assert buf.value == b"flagos sim device 1"
    assert rt.t.set_device(2) == INVALID_DEVICE
    assert "invalid device 2" in rt.error() and "tfl_set_device" in rt.error()
    assert rt.t.set_device(-1) == INVALID_DEVICE

    rt.check(rt.t.set_device(1))
    try:
        seen = []
        worker = threading.Thread(target=lambda: seen.append(rt.get_device()))
        worker.start()
        worker.join()
        assert seen == [0], "a new thread starts on device 0"
        assert rt.get_device() == 1
    finally:
        rt.check(rt.t.set_device(0))


def test_env_device_count_capacity_and_faults_in_subprocess() -> None:
    out = _run_child(
        "child_configured",
        FLAGOS_SIM_DEVICES="3",
        FLAGOS_SIM_MEMORY="1048576",
        FLAGOS_SIM_FAULTS="malloc:2,event_create:1:TFL_ERROR_DEVICE",
    )
    assert out["count"] == 3
    assert out["total"] == 1 << 20
    assert out["second_malloc"] == INJECTED
    assert out["second_error"] == "injected fault in malloc (test)"
    assert out["oom"] == OUT_OF_MEMORY
    msg = out["oom_error"]
    assert "tfl_malloc" in msg and "flagos sim device 2" in msg
    assert (
        str(600 << 10) in msg and str(512 << 10) in msg and str(1 << 20) in msg
    )  # requested/free/total
    assert out["free_after_oom"] == 512 << 10
    assert out["free_after_free"] == 1 << 20
    assert out["event_create"] == DEVICE_ERROR


def test_env_memory_suffix_in_subprocess() -> None:
    out = _run_child("child_memory_suffix", FLAGOS_SIM_DEVICES="1", FLAGOS_SIM_MEMORY="4G")
    assert out == {"count": 1, "total": 4 << 30}


def test_bad_env_fails_init_and_every_call_in_subprocess() -> None:
    out = _run_child("child_bad_env", FLAGOS_SIM_MEMORY="lots")
    assert out["init"] == INVALID_VALUE
    assert "FLAGOS_SIM_MEMORY='lots'" in out["init_error"]
    assert out["malloc"] == NOT_INITIALIZED
    assert "tfl_malloc" in out["malloc_error"] and "FLAGOS_SIM_MEMORY" in out["malloc_error"]


# ---- memory ----------------------------------------------------------------------


def test_malloc_free_pointer_info_interior_pointers(rt: Runtime) -> None:
    allocs, nbytes = sim.live_allocations(0), sim.live_bytes(0)
    free_before, total = rt.mem_get_info()
    p = rt.malloc(1000)
    assert p % 512 == 0, "allocations are 512-byte aligned"
    assert sim.live_allocations(0) == allocs + 1 and sim.live_bytes(0) == nbytes + 1000
    assert rt.mem_get_info() == (free_before - 1000, total)

    assert rt.pointer_info(p) == (POINTER_DEVICE, 0)
    assert rt.pointer_info(p + 999) == (POINTER_DEVICE, 0), (
        "interior pointers find their allocation"
    )
    assert rt.pointer_info(p + 1000)[0] == POINTER_UNKNOWN
    local = ctypes.create_string_buffer(8)
    assert rt.pointer_info(ctypes.addressof(local)) == (POINTER_UNKNOWN, -1)

    h = rt.host_malloc(100)
    assert rt.pointer_info(h + 50) == (POINTER_HOST, -1)
    assert sim.live_allocations(-1) >= 1
    assert rt.t.free(h) == INVALID_POINTER and "tfl_host_free" in rt.error()
    rt.check(rt.t.host_free(h))

    assert rt.t.free(p + 8) == INVALID_POINTER, "free takes the allocation's start"
    rt.check(rt.t.free(p))
    assert rt.t.free(p) == INVALID_POINTER, "double free"
    assert "was not allocated by the sim runtime" in rt.error()
    assert rt.pointer_info(p)[0] == POINTER_UNKNOWN
    rt.check(rt.t.free(None))
    assert sim.live_allocations(0) == allocs and sim.live_bytes(0) == nbytes

    zero = c_void_p(1234)
    rt.check(rt.t.malloc(byref(zero), 0))
    assert zero.value is None, "malloc(0) gives NULL"


@pytest.mark.multidevice
def test_allocation_belongs_to_current_device(two_devices: Runtime) -> None:
    rt = two_devices
    rt.check(rt.t.set_device(1))
    try:
        p = rt.malloc(64)
        assert rt.pointer_info(p) == (POINTER_DEVICE, 1)
    finally:
        rt.check(rt.t.set_device(0))
    rt.check(rt.t.free(p))  # any device's pointer may be freed


def test_concurrent_malloc_free_is_thread_safe(rt: Runtime) -> None:
    before = sim.live_allocations(0)
    errors: list[str] = []

    def churn() -> None:
        for i in range(200):
            p = c_void_p()
            if rt.t.malloc(byref(p), 64 + i) != OK or rt.t.free(p) != OK:
                errors.append(rt.error())

    threads = [threading.Thread(target=churn) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sim.live_allocations(0) == before


# ---- copies ----------------------------------------------------------------------


def test_memcpy_round_trip_and_kinds(rt: Runtime) -> None:
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
    rt.check(rt.t.free(d))
    rt.check(rt.t.free(d2))


def test_wrong_memcpy_kind_rejected_destination_untouched(rt: Runtime) -> None:
    d = rt.malloc(8)
    rt.write(d, b"DEVICE!!")
    host = ctypes.create_string_buffer(b"host....", 8)
    addr = ctypes.addressof(host)

    # Arguments swapped for the kind: the "host" source is a device pointer.
    assert rt.t.memcpy(addr, d, 8, H2D) == INVALID_MEMCPY_KIND
    assert "tfl_memcpy" in rt.error() and "source" in rt.error() and "device pointer" in rt.error()
    assert host.raw == b"host...."
    assert rt.t.memcpy(d, addr, 8, D2H) == INVALID_MEMCPY_KIND
    # The device side is plain host memory, unknown to the runtime.
    other = ctypes.create_string_buffer(b"other...", 8)
    assert rt.t.memcpy(addr, ctypes.addressof(other), 8, D2H) == INVALID_POINTER
    assert "source" in rt.error() and "is not a device pointer" in rt.error()
    assert rt.t.memcpy_async(d, addr, 8, D2D, None) == INVALID_POINTER
    assert rt.t.memcpy(addr, d, 8, H2H) == INVALID_MEMCPY_KIND
    pinned = rt.host_malloc(8)
    assert rt.t.memcpy(pinned, addr, 8, H2D) == INVALID_MEMCPY_KIND
    assert "pinned host memory" in rt.error()
    assert rt.t.memcpy(d, addr, 8, 7) == INVALID_VALUE
    assert rt.read(d, 8) == b"DEVICE!!"
    rt.check(rt.t.host_free(pinned))
    rt.check(rt.t.free(d))


def test_out_of_bounds_copy_rejected_destination_untouched(rt: Runtime) -> None:
    d = rt.malloc(8)
    rt.write(d, b"12345678")
    src = ctypes.create_string_buffer(b"x" * 16, 16)
    assert rt.t.memcpy(d + 4, ctypes.addressof(src), 8, H2D) == INVALID_VALUE
    assert "runs past the end of its allocation" in rt.error()
    assert rt.t.memset_async(d, 0, 9, None) == INVALID_VALUE
    rt.check(rt.t.memcpy(d + 4, ctypes.addressof(src), 4, H2D))  # interior, in bounds
    assert rt.read(d, 8) == b"1234xxxx"
    rt.check(rt.t.free(d))


@pytest.mark.multidevice
def test_cross_device_pointer_rejected_by_memcpy_accepted_by_peer(two_devices: Runtime) -> None:
    rt = two_devices
    a = rt.malloc(32)
    rt.write(a, b"\0" * 32)
    rt.check(rt.t.set_device(1))
    try:
        b = rt.malloc(32)
        rt.write(b, b"peer" * 8)
        s1 = rt.stream()
    finally:
        rt.check(rt.t.set_device(0))

    assert rt.t.memcpy(a, b, 32, D2D) == INVALID_POINTER
    assert rt.error() == (
        f"tfl_memcpy: source {hex(b)} is not a device pointer of flagos sim device 0 (it belongs to device 1)"
    )
    assert rt.t.memcpy_async(b, a, 32, D2D, None) == INVALID_POINTER
    assert "destination" in rt.error() and "(it belongs to device 1)" in rt.error()
    assert rt.read(a, 32) == b"\0" * 32

    assert rt.t.memcpy_peer_async(a, 1, b, 1, 32, None) == INVALID_POINTER  # a is on device 0
    assert rt.t.memcpy_peer_async(a, 0, b, 1, 32, s1) == INVALID_HANDLE  # stream of device 1
    assert "belongs to flagos sim device 1" in rt.error()
    assert rt.t.memcpy_peer_async(a, 0, b, 2, 32, None) == INVALID_DEVICE
    assert rt.t.memcpy_peer_async(a, 0, b, 1, 33, None) == INVALID_VALUE
    rt.check(rt.t.memcpy_peer_async(a, 0, b, 1, 32, None))
    rt.check(rt.t.stream_synchronize(None))
    assert rt.read(a, 32) == b"peer" * 8

    rt.check(rt.t.stream_destroy(s1))
    rt.check(rt.t.free(a))
    rt.check(rt.t.free(b))


# ---- streams ---------------------------------------------------------------------


def test_async_work_runs_in_stream_order(rt: Runtime) -> None:
    s = rt.stream()
    n, hops = 64, 50
    bufs = [rt.malloc(n) for _ in range(hops)]
    pinned = rt.host_malloc(n)
    data = ctypes.create_string_buffer(bytes(range(n)), n)
    rt.check(rt.t.memcpy_async(bufs[0], ctypes.addressof(data), n, H2D, s))
    for src, dst in zip(bufs[:-1], bufs[1:], strict=True):
        rt.check(rt.t.memcpy_async(dst, src, n, D2D, s))
    for value in range(256):  # later memsets overwrite earlier ones only if in order
        rt.check(rt.t.memset_async(bufs[0], value, n, s))
    rt.check(rt.t.memcpy_async(pinned, bufs[-1], n, D2H, s))
    rt.check(rt.t.stream_synchronize(s))
    assert rt.t.stream_query(s) == OK
    assert ctypes.string_at(pinned, n) == bytes(range(n))
    assert rt.read(bufs[0], n) == b"\xff" * n
    for p in bufs:
        rt.check(rt.t.free(p))
    rt.check(rt.t.host_free(pinned))
    rt.check(rt.t.stream_destroy(s))


def test_stream_query_not_ready_while_work_pending(rt: Runtime) -> None:
    s = rt.stream()
    d = rt.malloc(4)
    rt.write(d, b"\0" * 4)
    pinned = rt.host_malloc(4)
    ctypes.memset(pinned, 0, 4)
    gate = Gate()
    gate.launch(rt, s)
    rt.check(rt.t.memset_async(d, 0x5A, 4, s))
    rt.check(rt.t.memcpy_async(pinned, d, 4, D2H, s))  # pinned destination: truly async
    assert rt.t.stream_query(s) == NOT_READY
    assert gate.started.wait(5)
    assert ctypes.string_at(pinned, 4) == b"\0" * 4, "work behind the gate has not run"
    gate.opened.set()
    rt.check(rt.t.stream_synchronize(s))
    assert rt.t.stream_query(s) == OK
    assert ctypes.string_at(pinned, 4) == b"\x5a" * 4
    rt.check(rt.t.free(d))
    rt.check(rt.t.host_free(pinned))
    rt.check(rt.t.stream_destroy(s))


def test_pageable_source_is_staged_at_enqueue(rt: Runtime) -> None:
    s = rt.stream()
    d = rt.malloc(4)
    src = ctypes.create_string_buffer(b"old!", 4)
    gate = Gate()
    gate.launch(rt, s)
    rt.check(rt.t.memcpy_async(d, ctypes.addressof(src), 4, H2D, s))
    ctypes.memmove(src, b"new!", 4)  # the caller may reuse pageable memory at once (CUDA)
    gate.opened.set()
    rt.check(rt.t.stream_synchronize(s))
    assert rt.read(d, 4) == b"old!"
    rt.check(rt.t.free(d))
    rt.check(rt.t.stream_destroy(s))


def test_sync_memcpy_is_ordered_after_default_stream(rt: Runtime) -> None:
    d = rt.malloc(4)
    rt.write(d, b"\0" * 4)
    gate = Gate()
    gate.launch(rt, None)
    rt.check(rt.t.memset_async(d, 7, 4, None))
    timer = gate.open_later()
    assert rt.read(d, 4) == b"\x07" * 4  # blocks until the gate opens, then the memset ran
    timer.join()
    rt.check(rt.t.free(d))


def test_device_synchronize_and_stream_destroy_drain(rt: Runtime) -> None:
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
    rt.check(rt.t.stream_destroy(s))  # drains before joining its worker
    timer.join()
    assert rt.read(d, 4) == b"\x02" * 4
    assert rt.t.stream_query(s) == INVALID_HANDLE
    assert rt.t.stream_destroy(s) == INVALID_HANDLE
    assert rt.t.stream_destroy(None) == INVALID_HANDLE
    rt.check(rt.t.free(d))


def test_stream_wait_event_orders_across_streams(rt: Runtime) -> None:
    producer, consumer = rt.stream(), rt.stream()
    x, y = rt.malloc(8), rt.malloc(8)
    rt.write(x, b"\0" * 8)
    rt.write(y, b"\0" * 8)
    e = rt.event(EVENT_DISABLE_TIMING)
    gate = Gate()
    gate.launch(rt, producer)
    rt.check(rt.t.memset_async(x, 9, 8, producer))
    rt.check(rt.t.event_record(e, producer))
    rt.check(rt.t.stream_wait_event(consumer, e))
    rt.check(rt.t.memcpy_async(y, x, 8, D2D, consumer))
    assert rt.t.event_query(e) == NOT_READY
    assert rt.t.stream_query(consumer) == NOT_READY, "the consumer waits for the producer's event"
    gate.opened.set()
    rt.check(rt.t.stream_synchronize(consumer))
    assert rt.t.event_query(e) == OK
    assert rt.read(y, 8) == b"\x09" * 8
    for p in (x, y):
        rt.check(rt.t.free(p))
    rt.check(rt.t.event_destroy(e))
    for s in (producer, consumer):
        rt.check(rt.t.stream_destroy(s))


# ---- events ----------------------------------------------------------------------


def test_event_elapsed_time(rt: Runtime) -> None:
    start, end = rt.event(), rt.event()
    assert rt.t.event_query(start) == OK, "a never-recorded event counts as complete"
    rt.check(rt.t.event_synchronize(start))
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
    gate.opened.set()
    rt.check(rt.t.event_synchronize(end))
    rt.check(rt.t.event_elapsed_ms(byref(ms), start, end))
    assert ms.value >= 0

    untimed = rt.event(EVENT_DISABLE_TIMING)
    rt.check(rt.t.event_record(untimed, None))
    rt.check(rt.t.event_synchronize(untimed))
    assert rt.t.event_elapsed_ms(byref(ms), start, untimed) == INVALID_VALUE
    assert "TFL_EVENT_DISABLE_TIMING" in rt.error()
    for e in (start, end, untimed):
        rt.check(rt.t.event_destroy(e))
    assert rt.t.event_query(start) == INVALID_HANDLE
    assert rt.t.event_create(byref(c_void_p()), 0x80) == INVALID_VALUE


def test_event_rerecord_waits_for_latest_record(rt: Runtime) -> None:
    e = rt.event()
    rt.check(rt.t.event_record(e, None))
    rt.check(rt.t.event_synchronize(e))
    s = rt.stream()
    gate = Gate()
    gate.launch(rt, s)
    rt.check(rt.t.event_record(e, s))
    assert rt.t.event_query(e) == NOT_READY, "the latest record is still pending"
    gate.opened.set()
    rt.check(rt.t.event_synchronize(e))
    assert rt.t.event_query(e) == OK
    rt.check(rt.t.event_destroy(e))
    rt.check(rt.t.stream_destroy(s))


# ---- fault injection and errors --------------------------------------------------


def test_injected_malloc_fault_then_success(rt: Runtime) -> None:
    calls = sim.call_count("malloc")
    allocs = sim.live_allocations(0)
    sim.inject_fault("malloc", nth=2, status="TFL_ERROR_OUT_OF_MEMORY")
    first = rt.malloc(16)
    p = c_void_p()
    assert rt.t.malloc(byref(p), 16) == OUT_OF_MEMORY
    assert rt.error() == "injected fault in malloc (test)"
    assert p.value is None
    assert sim.live_allocations(0) == allocs + 1, "the failed call allocated nothing"
    second = rt.malloc(16)
    assert sim.call_count("malloc") == calls + 3, "injected failures are counted too"
    for q in (first, second):
        rt.check(rt.t.free(q))


def test_injected_copy_fault_moves_no_bytes(rt: Runtime) -> None:
    d = rt.malloc(4)
    rt.write(d, b"keep")
    src = ctypes.create_string_buffer(b"lost", 4)
    with sim.fault("memcpy_async"):
        assert rt.t.memcpy_async(d, ctypes.addressof(src), 4, H2D, None) == INJECTED
    rt.check(rt.t.memcpy_async(d, ctypes.addressof(src), 4, H2D, None))  # cleared: fine again
    rt.check(rt.t.stream_synchronize(None))
    with sim.fault("memcpy", status=DEVICE_ERROR):
        assert rt.t.memcpy(d, ctypes.addressof(src), 4, H2D) == DEVICE_ERROR
    assert rt.read(d, 4) == b"lost"
    rt.check(rt.t.free(d))


def test_fault_control_rejects_bad_requests(rt: Runtime) -> None:
    with pytest.raises(ValueError):
        sim.inject_fault("no_such_call")
    with pytest.raises(ValueError):
        sim.inject_fault("malloc", nth=0)
    with pytest.raises(ValueError):
        sim.inject_fault("malloc", status="TFL_OK")
    assert sim.library().tfl_sim_inject_fault(b"malloc", 1, 99) != 0
    assert sim.call_count("no_such_call") == 0
    assert sim.live_allocations(99) == 0


# ---- memory shared between processes (v1.1) -------------------------------------


def test_table_functions_follow_the_header_list() -> None:
    """The ctypes mirror has the fields of runtime.h's TFL_RUNTIME_V1_FUNCTIONS, in order."""
    import re

    header = Path(__file__).resolve().parents[1] / "include" / "torch_fl" / "runtime.h"
    text = header.read_text()
    block = text[text.index("#define TFL_RUNTIME_V1_FUNCTIONS(X)") :]
    block = block[: block.index("\n\n")]
    names = re.findall(r"X\((\w+), (\d+), [01]\)", block)
    mirrored = [name for name, _ in RuntimeV1._fields_[4:]]
    assert [n for n, _ in names] == mirrored
    assert {n for n, minor in names if minor == "1"} == {
        "ipc_get_handle",
        "ipc_open_handle",
        "ipc_close_handle",
    }


def test_ipc_handle_maps_the_same_memory_in_another_process(rt: Runtime) -> None:
    n = 4096
    base = rt.malloc(1 << 20)
    try:
        rt.write(base + 512, bytes(range(256)) * (n // 256))
        handle, offset, size = rt.ipc_get_handle(base + 512)
        assert (offset, size) == (512, 1 << 20)
        got = _run_child(
            "child_ipc_open", TFL_TEST_IPC_HANDLE=handle.hex(), TFL_TEST_IPC_BYTES=str(n)
        )
        assert got["status"] == OK, got
        assert (got["size"], got["device"]) == (1 << 20, 0)
        # The child mapped the whole allocation: its first bytes are before the offset.
        assert bytes.fromhex(got["read"])[512:] == (bytes(range(256)) * (n // 256))[: n - 512]
        assert got["kind"] == [POINTER_DEVICE, 0], "the mapping is device memory in the child"
        assert got["free_imported"] == INVALID_POINTER and "ipc_close_handle" in got["free_error"]
        assert got["close_again"] == INVALID_POINTER
        assert rt.read(base, n) == b"\x5a" * n, "the child's write is not in this process's memory"
    finally:
        rt.check(rt.t.free(c_void_p(base)))


def test_ipc_handle_of_a_freed_allocation_fails_to_open(rt: Runtime) -> None:
    base = rt.malloc(1 << 20)
    handle, _, _ = rt.ipc_get_handle(base)
    rt.check(rt.t.free(c_void_p(base)))
    other = rt.malloc(1 << 20)  # may reuse the descriptor number: the serial tells them apart
    try:
        got = _run_child("child_ipc_open", TFL_TEST_IPC_HANDLE=handle.hex(), TFL_TEST_IPC_BYTES="8")
        assert got["status"] == INVALID_HANDLE, got
        assert "no longer holds" in got["error"] and "keep the tensor alive" in got["error"]
        st, *_ = rt.ipc_open(handle)  # the exporter itself: same answer
        assert st == INVALID_HANDLE and "no longer holds" in rt.error()
    finally:
        rt.check(rt.t.free(c_void_p(other)))


def test_ipc_open_in_the_exporter_is_its_own_allocation(rt: Runtime) -> None:
    base = rt.malloc(1 << 20)
    try:
        handle, _, _ = rt.ipc_get_handle(base + 4096)
        st, p1, size, device = rt.ipc_open(handle)
        st2, p2, _, _ = rt.ipc_open(handle)
        assert (st, st2, p1, p2, size, device) == (OK, OK, base, base, 1 << 20, 0)
        rt.check(rt.t.ipc_close_handle(p1))
        rt.check(rt.t.ipc_close_handle(p2))
        assert rt.t.ipc_close_handle(p1) == INVALID_POINTER, "closed more often than opened"
        rt.write(base, b"still mine")  # closing never freed the exporter's allocation
    finally:
        rt.check(rt.t.free(c_void_p(base)))


def test_ipc_rejects_host_memory_unknown_pointers_and_foreign_handles(rt: Runtime) -> None:
    h = rt.host_malloc(4096)
    try:
        handle, offset, size = IPC_HANDLE(), c_size_t(), c_size_t()
        assert rt.t.ipc_get_handle(h, byref(handle), byref(offset), byref(size)) == INVALID_POINTER
        assert "pinned host memory" in rt.error()
    finally:
        rt.check(rt.t.host_free(h))
    st, *_ = rt.ipc_open(b"\x01" * 64)
    assert st == INVALID_HANDLE and "not a handle of the sim runtime" in rt.error()
    assert rt.t.ipc_get_handle(0x10, byref(handle), byref(offset), byref(size)) == INVALID_POINTER
    assert rt.t.ipc_get_handle(h, None, byref(offset), byref(size)) == INVALID_VALUE


def test_last_error_is_per_thread(rt: Runtime) -> None:
    assert rt.t.set_device(5) == INVALID_DEVICE
    mine = rt.error()
    other: list[str] = []

    def fail_differently() -> None:
        rt.t.free(c_void_p(0x10))
        other.append(rt.error())

    t = threading.Thread(target=fail_differently)
    t.start()
    t.join()
    assert "tfl_free" in other[0]
    assert rt.error() == mine


# ---- device graphs (v1.3) ---------------------------------------------------------


class Counter:
    """A host function counting its calls (from any stream's worker)."""

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

        def _hit(_user_data: object) -> None:
            with self._lock:
                self.calls += 1

        self.fn = HOST_FN(_hit)  # keep a reference while a graph may call it


@pytest.fixture
def capturing(rt: Runtime) -> Iterator[tuple[Runtime, int]]:
    """A created stream; a capture a test leaves open is ended (dropping its recording), so a
    failing test never leaves a GLOBAL capture forbidding the next test's calls."""
    s = rt.stream()
    yield rt, s
    status = c_int(-1)
    if rt.t.stream_capture_status(s, byref(status)) == OK and status.value != CAPTURE_NONE:
        st, g = rt.capture_end(s)
        if st == OK:
            rt.t.graph_destroy(g)
    rt.check(rt.t.stream_destroy(s))


def _captured_graph(rt: Runtime, s: int, record, mode: int = MODE_GLOBAL) -> int:
    """Captures what `record(s)` enqueues on s into a graph."""
    rt.check(rt.t.graph_capture_begin(s, mode))
    record(s)
    st, g = rt.capture_end(s)
    rt.check(st)
    assert g
    return g


def test_captured_work_is_recorded_not_run_and_replays_per_launch(capturing) -> None:
    rt, s = capturing
    d = rt.malloc(8)
    rt.write(d, b"\0" * 8)
    pinned = rt.host_malloc(8)  # before the capture: host_malloc is forbidden during it
    ctypes.memset(pinned, 0, 8)
    counter = Counter()

    rt.check(rt.t.graph_capture_begin(s, MODE_GLOBAL))
    assert rt.capture_status(s) == CAPTURE_ACTIVE
    rt.check(rt.t.memset_async(d, 7, 8, s))
    rt.check(rt.t.memcpy_async(pinned, d, 8, D2H, s))
    rt.check(rt.t.launch_host_func(s, counter.fn, None))
    scratch = rt.malloc(16)  # malloc and free stay allowed
    rt.check(rt.t.free(scratch))
    st, g = rt.capture_end(s)
    rt.check(st)
    assert rt.capture_status(s) == CAPTURE_NONE

    # Had anything been enqueued, synchronizing would have run it.
    rt.check(rt.t.stream_synchronize(s))
    assert rt.read(d, 8) == b"\0" * 8 and ctypes.string_at(pinned, 8) == b"\0" * 8
    assert counter.calls == 0

    rt.check(rt.t.graph_instantiate(g))
    rt.check(rt.t.graph_instantiate(g))  # idempotent
    rt.check(rt.t.graph_launch(g, s))
    rt.check(rt.t.stream_synchronize(s))
    assert ctypes.string_at(pinned, 8) == b"\x07" * 8 and counter.calls == 1

    # Every launch runs every node again, in order, on any stream of the device.
    rt.write(d, b"\0" * 8)
    ctypes.memset(pinned, 0, 8)
    rt.check(rt.t.graph_launch(g, None))
    rt.check(rt.t.stream_synchronize(None))
    assert ctypes.string_at(pinned, 8) == b"\x07" * 8 and counter.calls == 2
    rt.check(rt.t.graph_destroy(g))
    rt.check(rt.t.host_free(pinned))
    rt.check(rt.t.free(d))


def test_replay_reads_memory_at_launch_pageable_included(capturing) -> None:
    rt, s = capturing
    n = 16
    src = ctypes.create_string_buffer(b"capture-time....", n)  # pageable: never staged
    dst = ctypes.create_string_buffer(b"\0" * n, n)
    a, b = rt.malloc(n), rt.malloc(n)

    def record(stream: int) -> None:
        rt.check(rt.t.memcpy_async(a, ctypes.addressof(src), n, H2D, stream))
        rt.check(rt.t.memcpy_async(b, a, n, D2D, stream))
        rt.check(rt.t.memcpy_async(ctypes.addressof(dst), b, n, D2H, stream))

    g = _captured_graph(rt, s, record)
    assert dst.raw == b"\0" * n, "a copy into pageable memory did not wait (nor run) in capture"
    for value in (b"first launch....", b"second launch..."):
        ctypes.memmove(src, value, n)
        rt.check(rt.t.graph_launch(g, s))
        rt.check(rt.t.stream_synchronize(s))
        assert dst.raw == value
    rt.check(rt.t.graph_destroy(g))
    for p in (a, b):
        rt.check(rt.t.free(p))


@pytest.mark.multidevice
def test_peer_copy_is_recorded(two_devices: Runtime) -> None:
    rt = two_devices
    rt.check(rt.t.set_device(1))
    try:
        remote = rt.malloc(8)
        rt.write(remote, b"remote!!")
    finally:
        rt.check(rt.t.set_device(0))
    local = rt.malloc(8)
    rt.write(local, b"\0" * 8)
    s = rt.stream()
    g = _captured_graph(
        rt, s, lambda st: rt.check(rt.t.memcpy_peer_async(local, 0, remote, 1, 8, st))
    )
    rt.check(rt.t.stream_synchronize(s))
    assert rt.read(local, 8) == b"\0" * 8
    rt.check(rt.t.graph_launch(g, s))
    rt.check(rt.t.stream_synchronize(s))
    assert rt.read(local, 8) == b"remote!!"
    rt.check(rt.t.graph_destroy(g))
    rt.check(rt.t.stream_destroy(s))
    for p in (local, remote):
        rt.check(rt.t.free(p))


FORBIDDEN_WHILE_CAPTURING = [
    "device_synchronize",
    "memcpy",
    "stream_synchronize",
    "stream_query",
    "stream_destroy",
    "event_synchronize",
    "event_query",
    "host_malloc",
]


def _forbidden_calls(rt: Runtime, s: int, event: int, d: int) -> dict:
    buf = ctypes.create_string_buffer(4)
    return {
        "device_synchronize": lambda: rt.t.device_synchronize(),
        "memcpy": lambda: rt.t.memcpy(ctypes.addressof(buf), d, 4, D2H),
        "stream_synchronize": lambda: rt.t.stream_synchronize(s),
        "stream_query": lambda: rt.t.stream_query(s),
        "stream_destroy": lambda: rt.t.stream_destroy(s),
        "event_synchronize": lambda: rt.t.event_synchronize(event),
        "event_query": lambda: rt.t.event_query(event),
        "host_malloc": lambda: rt.t.host_malloc(byref(c_void_p()), 64),
    }


@pytest.mark.parametrize("call", FORBIDDEN_WHILE_CAPTURING)
def test_forbidden_call_fails_and_invalidates_the_capture(capturing, call: str) -> None:
    rt, s = capturing
    d = rt.malloc(4)
    rt.write(d, b"\0" * 4)
    e = rt.event()
    calls = _forbidden_calls(rt, s, e, d)
    assert list(calls) == FORBIDDEN_WHILE_CAPTURING
    rt.check(rt.t.graph_capture_begin(s, MODE_GLOBAL))
    rt.check(rt.t.memset_async(d, 1, 4, s))
    rt.check(rt.t.event_record(e, s))  # an event recorded in the capture
    assert calls[call]() == CAPTURE
    message = rt.error()
    assert f"tfl_{call}" in message and hex(s) in message, message
    assert "the capture is now invalidated" in message, message
    assert rt.capture_status(s) == CAPTURE_INVALIDATED
    # Work enqueued on an invalidated capture fails too, saying why.
    assert rt.t.memset_async(d, 2, 4, s) == CAPTURE
    assert "invalidated" in rt.error() and f"tfl_{call}" in rt.error()
    st, g = rt.capture_end(s)
    assert st == CAPTURE and g is None
    assert "was invalidated" in rt.error() and f"tfl_{call}" in rt.error(), rt.error()
    assert rt.capture_status(s) == CAPTURE_NONE, "the capture ended all the same"
    # Nothing recorded ever ran; the stream works again.
    rt.check(rt.t.stream_synchronize(s))
    rt.check(rt.t.event_synchronize(e))
    assert rt.read(d, 4) == b"\0" * 4
    rt.check(rt.t.memset_async(d, 3, 4, s))
    rt.check(rt.t.stream_synchronize(s))
    assert rt.read(d, 4) == b"\x03" * 4
    rt.check(rt.t.event_destroy(e))
    rt.check(rt.t.free(d))


def _on_thread(fn) -> list:
    out: list = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out


def test_capture_modes_decide_which_threads_are_refused(capturing) -> None:
    rt, s = capturing
    # THREAD_LOCAL: another thread may make unsafe calls (host_malloc), the capturing one may not.
    rt.check(rt.t.graph_capture_begin(s, MODE_THREAD_LOCAL))
    p = c_void_p()
    assert _on_thread(lambda: rt.t.host_malloc(byref(p), 8)) == [OK]
    rt.check(rt.t.host_free(p))
    assert rt.capture_status(s) == CAPTURE_ACTIVE
    assert rt.t.host_malloc(byref(c_void_p()), 8) == CAPTURE
    assert "TFL_CAPTURE_MODE_THREAD_LOCAL" in rt.error()
    assert rt.capture_end(s)[0] == CAPTURE

    # device_synchronize waits for the capturing stream: refused from any thread in any mode, and
    # the capture is invalidated (the H200's CUDA does the same: cudaErrorStreamCaptureUnsupported
    # in the other thread, cudaErrorStreamCaptureInvalidated in the capturing one).
    rt.check(rt.t.graph_capture_begin(s, MODE_THREAD_LOCAL))
    assert _on_thread(rt.t.device_synchronize) == [CAPTURE]
    assert rt.capture_status(s) == CAPTURE_INVALIDATED
    assert rt.capture_end(s)[0] == CAPTURE

    # GLOBAL: every thread is refused.
    rt.check(rt.t.graph_capture_begin(s, MODE_GLOBAL))
    assert _on_thread(lambda: rt.t.host_malloc(byref(c_void_p()), 8)) == [CAPTURE]
    assert rt.capture_status(s) == CAPTURE_INVALIDATED
    assert rt.capture_end(s)[0] == CAPTURE

    # RELAXED: unsafe calls are allowed anywhere; what waits for the capturing stream still cannot.
    rt.check(rt.t.graph_capture_begin(s, MODE_RELAXED))
    p = rt.host_malloc(8)
    rt.check(rt.t.host_free(p))
    assert rt.capture_status(s) == CAPTURE_ACTIVE
    assert rt.t.stream_synchronize(s) == CAPTURE
    assert rt.capture_end(s)[0] == CAPTURE
    rt.check(rt.t.graph_capture_begin(s, MODE_RELAXED))
    assert rt.t.device_synchronize() == CAPTURE
    assert rt.capture_end(s)[0] == CAPTURE


def test_capture_must_end_in_its_thread_unless_relaxed(capturing) -> None:
    rt, s = capturing
    rt.check(rt.t.graph_capture_begin(s, MODE_GLOBAL))
    assert _on_thread(lambda: rt.capture_end(s)[0]) == [CAPTURE]
    assert rt.capture_status(s) == CAPTURE_NONE, "the capture ended, refused"
    rt.check(rt.t.graph_capture_begin(s, MODE_RELAXED))
    st, g = _on_thread(lambda: rt.capture_end(s))[0]
    rt.check(st)
    rt.check(rt.t.graph_destroy(g))


def test_capture_begin_and_end_misuse(capturing) -> None:
    rt, s = capturing
    assert rt.t.graph_capture_begin(None, MODE_GLOBAL) == INVALID_VALUE
    assert "default stream" in rt.error()
    assert rt.t.graph_capture_begin(s, 3) == INVALID_VALUE and "mode 3" in rt.error()
    assert rt.t.graph_capture_begin(0x10, MODE_GLOBAL) == INVALID_HANDLE
    assert rt.capture_end(s)[0] == INVALID_VALUE and "not capturing" in rt.error()
    assert rt.capture_end(None)[0] == INVALID_VALUE
    assert rt.capture_status(s) == CAPTURE_NONE

    rt.check(rt.t.graph_capture_begin(s, MODE_GLOBAL))
    assert rt.t.graph_capture_begin(s, MODE_GLOBAL) == CAPTURE
    assert "already captures" in rt.error()
    st, g = rt.capture_end(s)
    assert st == CAPTURE and "already captures" in rt.error() and g is None

    rt.check(rt.t.graph_capture_begin(s, MODE_GLOBAL))
    assert rt.t.graph_capture_end(s, None) == INVALID_VALUE
    assert rt.capture_status(s) == CAPTURE_NONE, "a NULL out-parameter ends it too"
    status = c_int()
    assert rt.t.stream_capture_status(s, None) == INVALID_VALUE
    assert rt.t.stream_capture_status(0x10, byref(status)) == INVALID_HANDLE
    assert rt.capture_status(None) == CAPTURE_NONE, "the default stream never captures"


def test_stream_capture_status_through_the_states(capturing) -> None:
    rt, s = capturing
    other = rt.stream()
    assert rt.capture_status(s) == CAPTURE_NONE
    rt.check(rt.t.graph_capture_begin(s, MODE_GLOBAL))
    assert rt.capture_status(s) == CAPTURE_ACTIVE
    assert rt.capture_status(other) == CAPTURE_NONE
    assert rt.t.stream_query(s) == CAPTURE
    assert rt.capture_status(s) == CAPTURE_INVALIDATED
    assert rt.capture_end(s)[0] == CAPTURE
    assert rt.capture_status(s) == CAPTURE_NONE
    # A fresh capture on the same stream starts clean.
    rt.check(rt.t.graph_capture_begin(s, MODE_GLOBAL))
    assert rt.capture_status(s) == CAPTURE_ACTIVE
    st, g = rt.capture_end(s)
    rt.check(st)
    rt.check(rt.t.graph_launch(g, s))  # an empty graph launches, doing nothing
    rt.check(rt.t.graph_destroy(g))
    rt.check(rt.t.stream_destroy(other))


def test_event_waits_across_the_capture_boundary(capturing) -> None:
    rt, s = capturing
    other = rt.stream()
    inside, outside, never = rt.event(), rt.event(), rt.event()
    rt.check(rt.t.event_record(outside, other))
    rt.check(rt.t.event_synchronize(outside))

    # Another stream waiting on an event of the capture would join it: sim does not.
    rt.check(rt.t.graph_capture_begin(s, MODE_GLOBAL))
    rt.check(rt.t.event_record(inside, s))
    assert rt.t.stream_wait_event(other, inside) == NOT_SUPPORTED
    assert "captures one stream only" in rt.error() and hex(other) in rt.error()
    assert rt.capture_status(s) == CAPTURE_INVALIDATED
    assert rt.capture_end(s)[0] == CAPTURE

    # The capturing stream waiting on an event recorded outside it: refused, as CUDA does.
    rt.check(rt.t.graph_capture_begin(s, MODE_GLOBAL))
    assert rt.t.stream_wait_event(s, outside) == CAPTURE
    assert "recorded outside the capture" in rt.error()
    assert rt.capture_end(s)[0] == CAPTURE

    # Its own events and never-recorded ones need no wait; the events replay with the graph.
    gate = Gate()
    counter = Counter()

    def record(stream: int) -> None:
        rt.check(rt.t.event_record(inside, stream))
        rt.check(rt.t.stream_wait_event(stream, inside))
        rt.check(rt.t.stream_wait_event(stream, never))
        rt.check(rt.t.launch_host_func(stream, counter.fn, None))

    g = _captured_graph(rt, s, record)
    assert rt.t.event_query(inside) == OK, "after the capture the event is as it was"
    gate.launch(rt, s)
    rt.check(rt.t.graph_launch(g, s))
    assert rt.t.event_query(inside) == NOT_READY, "recorded by the launch, pending behind the gate"
    rt.check(rt.t.stream_wait_event(other, inside))  # an ordinary wait on the replayed record
    rt.check(rt.t.launch_host_func(other, counter.fn, None))
    assert gate.started.wait(5)
    assert counter.calls == 0
    gate.opened.set()
    for stream in (other, s):
        rt.check(rt.t.stream_synchronize(stream))
    assert rt.t.event_query(inside) == OK and counter.calls == 2
    rt.check(rt.t.graph_destroy(g))
    for e in (inside, outside, never):
        rt.check(rt.t.event_destroy(e))
    rt.check(rt.t.stream_destroy(other))


def test_a_capture_waiting_on_another_captures_event_breaks_both(capturing) -> None:
    rt, s = capturing
    other = rt.stream()
    e = rt.event()
    rt.check(rt.t.graph_capture_begin(s, MODE_GLOBAL))
    rt.check(rt.t.graph_capture_begin(other, MODE_GLOBAL))
    rt.check(rt.t.event_record(e, s))
    assert rt.t.stream_wait_event(other, e) == CAPTURE
    assert hex(other) in rt.error() and hex(s) in rt.error()
    assert rt.capture_status(s) == rt.capture_status(other) == CAPTURE_INVALIDATED
    for stream in (s, other):
        assert rt.capture_end(stream)[0] == CAPTURE
    rt.check(rt.t.event_destroy(e))
    rt.check(rt.t.stream_destroy(other))


def test_graph_launched_into_a_capture_is_recorded(capturing) -> None:
    rt, s = capturing
    d = rt.malloc(4)
    rt.write(d, b"\0" * 4)
    counter = Counter()
    inner = _captured_graph(rt, s, lambda st: rt.check(rt.t.memset_async(d, 5, 4, st)))

    def record(stream: int) -> None:
        rt.check(rt.t.graph_launch(inner, stream))
        rt.check(rt.t.launch_host_func(stream, counter.fn, None))

    outer = _captured_graph(rt, s, record)
    rt.check(rt.t.graph_destroy(inner))  # the outer graph keeps its own copy of the nodes
    rt.check(rt.t.stream_synchronize(s))
    assert rt.read(d, 4) == b"\0" * 4 and counter.calls == 0
    rt.check(rt.t.graph_launch(outer, s))
    rt.check(rt.t.stream_synchronize(s))
    assert rt.read(d, 4) == b"\x05" * 4 and counter.calls == 1
    rt.check(rt.t.graph_destroy(outer))
    rt.check(rt.t.free(d))


@pytest.mark.multidevice
def test_graph_launches_only_on_its_device(two_devices: Runtime) -> None:
    rt = two_devices
    s = rt.stream()
    d = rt.malloc(4)
    g = _captured_graph(rt, s, lambda st: rt.check(rt.t.memset_async(d, 9, 4, st)))
    rt.check(rt.t.set_device(1))
    try:
        s1 = rt.stream()
        assert rt.t.graph_launch(g, s1) == INVALID_HANDLE
        assert "flagos sim device 1" in rt.error() and "device 0" in rt.error()
        assert rt.t.graph_launch(g, None) == INVALID_HANDLE, "NULL: device 1's default stream"
        rt.check(rt.t.stream_destroy(s1))
    finally:
        rt.check(rt.t.set_device(0))
    rt.check(rt.t.graph_launch(g, None))
    assert rt.read(d, 4) == b"\x09" * 4  # the synchronous read follows the default stream
    rt.check(rt.t.graph_destroy(g))
    rt.check(rt.t.stream_destroy(s))
    rt.check(rt.t.free(d))


def test_destroyed_graph_is_unknown_and_queued_launches_complete(capturing) -> None:
    rt, s = capturing
    d = rt.malloc(4)
    rt.write(d, b"\0" * 4)
    counter = Counter()

    def record(stream: int) -> None:
        rt.check(rt.t.memset_async(d, 4, 4, stream))
        rt.check(rt.t.launch_host_func(stream, counter.fn, None))

    g = _captured_graph(rt, s, record)
    gate = Gate()
    gate.launch(rt, s)
    rt.check(rt.t.graph_launch(g, s))
    rt.check(rt.t.graph_destroy(g))  # while the launch waits behind the gate
    assert rt.t.graph_destroy(g) == INVALID_HANDLE and "unknown or destroyed graph" in rt.error()
    assert rt.t.graph_launch(g, s) == INVALID_HANDLE
    assert rt.t.graph_instantiate(g) == INVALID_HANDLE
    assert rt.t.graph_destroy(None) == INVALID_HANDLE
    gate.opened.set()
    rt.check(rt.t.stream_synchronize(s))
    assert rt.read(d, 4) == b"\x04" * 4 and counter.calls == 1
    rt.check(rt.t.free(d))


def test_graph_calls_are_counted_and_can_be_failed(capturing) -> None:
    rt, s = capturing
    calls = sim.call_count("graph_capture_begin")
    with sim.fault("graph_capture_begin"):
        assert rt.t.graph_capture_begin(s, MODE_GLOBAL) == INJECTED
    assert rt.capture_status(s) == CAPTURE_NONE, "an injected failure began nothing"
    assert sim.call_count("graph_capture_begin") == calls + 1
    g = _captured_graph(rt, s, lambda st: None)
    with sim.fault("graph_launch", status="TFL_ERROR_CAPTURE"):
        assert rt.t.graph_launch(g, s) == CAPTURE
    rt.check(rt.t.graph_destroy(g))


def test_concurrent_captures_and_launches_are_thread_safe(rt: Runtime) -> None:
    n, launches = 64, 40
    errors: list[str] = []

    def worker(k: int) -> None:
        try:
            s, d = rt.stream(), rt.malloc(n)
            counter = Counter()

            def record(stream: int) -> None:
                rt.check(rt.t.memset_async(d, k, n, stream))
                rt.check(rt.t.launch_host_func(stream, counter.fn, None))

            g = _captured_graph(rt, s, record, MODE_RELAXED)
            for _ in range(launches):
                rt.check(rt.t.graph_launch(g, s))
            rt.check(rt.t.stream_synchronize(s))
            if counter.calls != launches or rt.read(d, n) != bytes([k]) * n:
                errors.append(f"worker {k}: {counter.calls} calls")
            rt.check(rt.t.graph_destroy(g))
            rt.check(rt.t.stream_destroy(s))
            rt.check(rt.t.free(d))
        except AssertionError as exc:
            errors.append(f"worker {k}: {exc}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


if __name__ == "__main__":
    print(json.dumps(globals()[sys.argv[1]]()))
