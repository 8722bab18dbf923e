"""The CANN emulator's runtime (libascendcl.so) enforces the aclrt contract, tested on the library
itself through ctypes (no torch, no torch_fl): what torch-fl-ascend's runtime is built to respect.

The emulator is built here (emulator/build, installed into emulator/prefix) when its installed
libascendcl.so is missing or older than its sources.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.ascend

EMULATOR = Path(__file__).resolve().parents[1] / "emulator"
EMULATOR_KIT = Path(__file__).resolve().parents[2] / "torch_fl_core" / "emulator_kit"
PREFIX = EMULATOR / "prefix"
BUILD = EMULATOR / "build"

SUCCESS = 0
INVALID_PARAM, UNINITIALIZE, REPEAT_INITIALIZE = 100000, 100001, 100002
RT_INVALID_DEVICEID, RT_CONTEXT_NULL, RT_STREAM_CONTEXT = 107001, 107002, 107003
RT_THREAD_SUBSCRIBE, RT_STREAM_NO_CB_REG = 107012, 107015
RT_MEMORY_ALLOCATION, RT_EVENT_NOT_COMPLETE, RT_REPORT_TIMEOUT = 207001, 507006, 507012
RT_AICORE_EXCEPTION = 507015
# Stream capture (aclmdlRICapture*).
RT_CAPTURE_DEPENDENCY, RT_MODEL_CAPTURED, RT_STREAM_CAPTURED = 107024, 107026, 107027
RT_STREAM_UNJOINED, RT_STREAM_CAPTURE_UNMATCHED = 107025, 107036
RT_EVENT_CAPTURED, RT_STREAM_NOT_CAPTURED, RT_CAPTURE_MODE_NOT_SUPPORT = 107028, 107029, 107030
RT_STREAM_CAPTURE_WRONG_THREAD, RT_STREAM_CAPTURE_INVALIDATED = 107038, 507903
MODE_GLOBAL, MODE_THREAD_LOCAL, MODE_RELAXED = 0, 1, 2  # aclmdlRICaptureMode
CAPTURE_NONE, CAPTURE_ACTIVE, CAPTURE_INVALIDATED = 0, 1, 2  # aclmdlRICaptureStatus
H2H, H2D, D2H, D2D, DEFAULT = 0, 1, 2, 3, 4
STREAM_COMPLETE, STREAM_NOT_READY = 0, 1  # aclrtStreamStatus
EVENT_NOT_READY, EVENT_COMPLETE = 0, 1  # aclrtEventRecordedStatus: the opposite polarity
HBM = 1
EVENT_SYNC, EVENT_TIME_LINE = 0x1, 0x8
CALLBACK_BLOCK = 1


def _sources_mtime() -> float:
    files = [EMULATOR / "CMakeLists.txt", *EMULATOR.glob("*.cmake")]
    files += [p for d in ("src", "include") for p in (EMULATOR / d).rglob("*") if p.is_file()]
    files += [p for p in EMULATOR_KIT.rglob("*") if p.is_file()]
    return max(p.stat().st_mtime for p in files)


def _named_toolkit() -> Path | None:
    """The emulator toolkit ASCEND_TOOLKIT_HOME (or ASCEND_HOME) names, when it is one other than
    the in-tree prefix: tested as installed there, the way the package runs on it."""
    for var in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME"):
        value = os.environ.get(var, "").strip()
        if value:
            home = Path(value).resolve()
            if home != PREFIX.resolve() and (home / "include" / "ascend_emulator.h").is_file():
                return home
            return None
    return None


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def _build() -> Path:
    """The installed libascendcl.so when it is newer than the emulator's sources, else the one
    built in emulator/build: only the runtime target is (re)built here (the op libraries compile
    against libtorch and are not needed by these tests)."""
    named = _named_toolkit()
    if named is not None:
        return named / "lib64" / "libascendcl.so"
    installed = PREFIX / "lib64" / "libascendcl.so"
    if installed.is_file() and installed.stat().st_mtime >= _sources_mtime():
        return installed
    if shutil.which("cmake") is None:
        pytest.fail("cmake is needed to build the CANN emulator")
    args = []
    if not (BUILD / "CMakeCache.txt").is_file():
        args = ["-G", "Ninja"] if shutil.which("ninja") else []
        args += [f"-DCMAKE_INSTALL_PREFIX={PREFIX}", f"-DPython_EXECUTABLE={sys.executable}"]
    conf = _run(["cmake", "-S", str(EMULATOR), "-B", str(BUILD), *args])
    if conf.returncode != 0:
        pytest.fail("configuring the CANN emulator failed:\n" + conf.stdout + conf.stderr)
    built = _run(["cmake", "--build", str(BUILD), "-j2", "--target", "ascendcl"])
    if built.returncode != 0:
        pytest.fail("building libascendcl.so failed:\n" + built.stdout + built.stderr)
    return BUILD / "libascendcl.so"


@pytest.fixture(scope="session")
def libpath() -> Path:
    return _build()


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    vp, sz, i32, u32 = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int32, ctypes.c_uint32
    P = ctypes.POINTER
    sigs = {
        "aclInit": [ctypes.c_char_p],
        "aclFinalize": [],
        "aclrtGetDeviceCount": [P(u32)],
        "aclrtSetDevice": [i32],
        "aclrtGetDevice": [P(i32)],
        "aclrtSynchronizeDevice": [],
        "aclrtMalloc": [P(vp), sz, ctypes.c_int],
        "aclrtFree": [vp],
        "aclrtMallocHost": [P(vp), sz],
        "aclrtFreeHost": [vp],
        "aclrtGetMemInfo": [ctypes.c_int, P(sz), P(sz)],
        "aclrtMemcpy": [vp, sz, vp, sz, ctypes.c_int],
        "aclrtMemcpyAsync": [vp, sz, vp, sz, ctypes.c_int, vp],
        "aclrtMemset": [vp, sz, i32, sz],
        "aclrtMemsetAsync": [vp, sz, i32, sz, vp],
        "aclrtDeviceCanAccessPeer": [P(i32), i32, i32],
        "aclrtDeviceEnablePeerAccess": [i32, u32],
        "aclrtDeviceDisablePeerAccess": [i32],
        "aclrtCreateStream": [P(vp)],
        "aclrtDestroyStream": [vp],
        "aclrtSynchronizeStream": [vp],
        "aclrtStreamQuery": [vp, P(ctypes.c_int)],
        "aclrtStreamWaitEvent": [vp, vp],
        "aclrtCreateEvent": [P(vp)],
        "aclrtCreateEventWithFlag": [P(vp), u32],
        "aclrtDestroyEvent": [vp],
        "aclrtRecordEvent": [vp, vp],
        "aclrtQueryEventStatus": [vp, P(ctypes.c_int)],
        "aclrtSynchronizeEvent": [vp],
        "aclrtEventElapsedTime": [P(ctypes.c_float), vp, vp],
        "aclrtSubscribeReport": [ctypes.c_uint64, vp],
        "aclrtUnSubscribeReport": [ctypes.c_uint64, vp],
        "aclrtLaunchCallback": [vp, vp, ctypes.c_int, vp],
        "aclrtProcessReport": [i32],
        "aclmdlRICaptureBegin": [vp, ctypes.c_int],
        "aclmdlRICaptureGetInfo": [vp, P(ctypes.c_int), P(vp)],
        "aclmdlRICaptureEnd": [vp, P(vp)],
        "aclmdlRIExecuteAsync": [vp, vp],
        "aclmdlRIDestroy": [vp],
        "aclEmuInjectFault": [ctypes.c_char_p, ctypes.c_int, ctypes.c_int],
        "aclEmuInternalResolve": [i32, vp, sz],
        "aclEmuInternalPointerDevice": [vp, sz],
        "aclEmuInternalStreamDevice": [vp],
        "aclEmuInternalEnqueue": [vp, ctypes.c_char_p, vp, vp, vp, vp, sz],
    }
    for name, args in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = ctypes.c_int
    lib.aclEmuInternalResolve.restype = vp
    lib.aclGetRecentErrMsg.restype = ctypes.c_char_p
    lib.aclGetRecentErrMsg.argtypes = []
    lib.aclrtGetSocName.restype = ctypes.c_char_p
    lib.aclEmuCallCount.argtypes = [ctypes.c_char_p]
    lib.aclEmuCallCount.restype = ctypes.c_uint64
    lib.aclEmuViolationCount.restype = ctypes.c_uint64
    lib.aclEmuLastViolation.restype = ctypes.c_char_p
    lib.aclEmuReset.restype = None
    lib.aclEmuClearFaults.restype = None
    lib.aclEmuLiveAllocations.argtypes = [i32]
    lib.aclEmuLiveAllocations.restype = ctypes.c_uint64
    return lib


@pytest.fixture(scope="session")
def acl(libpath):
    lib = _declare(ctypes.CDLL(str(libpath)))
    # Another user of this very library in the process (the package) may have initialised it.
    assert lib.aclInit(None) in (SUCCESS, REPEAT_INITIALIZE)
    count = ctypes.c_uint32()
    assert lib.aclrtGetDeviceCount(ctypes.byref(count)) == SUCCESS
    if count.value < 2:
        pytest.fail(f"the runtime tests need 2 emulated NPUs, the emulator has {count.value}")
    lib.aclrtSetDevice(0)
    return lib


@pytest.fixture(autouse=True)
def _clean_emulator(request):
    yield
    if "acl" in request.fixturenames:
        lib = request.getfixturevalue("acl")
        lib.aclEmuReset()
        lib.aclGetRecentErrMsg()  # drop a message a test left unread
        lib.aclrtSetDevice(0)


def err(acl) -> str:
    return (acl.aclGetRecentErrMsg() or b"").decode()


class Mem:
    """Device allocations freed at the end of the test (on their own device)."""

    def __init__(self, acl):
        self.acl = acl
        self.live: list[tuple[int, int]] = []
        self.host: list[int] = []

    def malloc(self, device: int, n: int) -> int:
        assert self.acl.aclrtSetDevice(device) == SUCCESS
        p = ctypes.c_void_p()
        assert self.acl.aclrtMalloc(ctypes.byref(p), n, 0) == SUCCESS, err(self.acl)
        self.live.append((device, p.value))
        return p.value

    def write(self, device: int, ptr: int, data: bytes) -> None:
        self.acl.aclrtSetDevice(device)
        assert self.acl.aclrtMemcpy(ptr, len(data), data, len(data), H2D) == SUCCESS, err(self.acl)

    def read(self, device: int, ptr: int, n: int) -> bytes:
        self.acl.aclrtSetDevice(device)
        buf = ctypes.create_string_buffer(n)
        assert self.acl.aclrtMemcpy(buf, n, ptr, n, D2H) == SUCCESS, err(self.acl)
        return buf.raw

    def pinned(self, data: bytes) -> int:
        """An aclrtMallocHost block holding `data`: what an asynchronous copy's host side needs."""
        h = ctypes.c_void_p()
        assert self.acl.aclrtMallocHost(ctypes.byref(h), len(data)) == SUCCESS, err(self.acl)
        ctypes.memmove(h, data, len(data))
        self.host.append(h.value)
        return h.value

    def forget(self, ptr: int) -> None:
        self.live = [(d, p) for d, p in self.live if p != ptr]
        self.host = [p for p in self.host if p != ptr]

    def free_all(self) -> None:
        for device, p in self.live:
            self.acl.aclrtSetDevice(device)
            self.acl.aclrtFree(p)
        for p in self.host:
            self.acl.aclrtFreeHost(p)
        self.acl.aclrtSetDevice(0)


@pytest.fixture
def mem(acl):
    m = Mem(acl)
    yield m
    m.free_all()


CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class Gate:
    """Holds a stream at a blocking host callback until released: the work queued behind it is
    then provably not done yet. The callback runs on this (subscribed) thread."""

    def __init__(self, acl, stream):
        self.acl, self.stream, self.ran = acl, stream, False
        self.tid = threading.get_ident()

        def cb(_data):
            self.ran = True

        self.cb = CALLBACK(cb)  # kept alive: the stream calls it later
        assert acl.aclrtSubscribeReport(self.tid, stream) == SUCCESS, err(acl)
        cbp = ctypes.cast(self.cb, ctypes.c_void_p)
        assert acl.aclrtLaunchCallback(cbp, None, CALLBACK_BLOCK, stream) == SUCCESS, err(acl)

    def release(self) -> None:
        assert self.acl.aclrtProcessReport(5000) == SUCCESS, err(self.acl)
        assert self.ran
        assert self.acl.aclrtUnSubscribeReport(self.tid, self.stream) == SUCCESS


def new_stream(acl, device: int = 0) -> int:
    acl.aclrtSetDevice(device)
    s = ctypes.c_void_p()
    assert acl.aclrtCreateStream(ctypes.byref(s)) == SUCCESS, err(acl)
    return s.value


def new_event(acl, flag: int | None = None) -> int:
    e = ctypes.c_void_p()
    if flag is None:
        assert acl.aclrtCreateEvent(ctypes.byref(e)) == SUCCESS
    else:
        assert acl.aclrtCreateEventWithFlag(ctypes.byref(e), flag) == SUCCESS
    return e.value


def stream_status(acl, s) -> int:
    st = ctypes.c_int(-1)
    assert acl.aclrtStreamQuery(s, ctypes.byref(st)) == SUCCESS
    return st.value


def event_status(acl, e) -> int:
    st = ctypes.c_int(-1)
    assert acl.aclrtQueryEventStatus(e, ctypes.byref(st)) == SUCCESS
    return st.value


# ------------------------------------------------------------------ headers


def test_headers_carry_cann_values(libpath, tmp_path):
    """The installed headers compile as C++ and carry CANN's enum values and error codes."""
    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    src = tmp_path / "h.cpp"
    src.write_text(
        textwrap.dedent("""
        #include "acl/acl.h"
        #include "ascend_emulator.h"
        static_assert(ACL_SUCCESS == 0 && ACL_ERROR_INVALID_PARAM == 100000, "");
        static_assert(ACL_ERROR_UNINITIALIZE == 100001 && ACL_ERROR_REPEAT_INITIALIZE == 100002, "");
        static_assert(ACL_ERROR_RT_MEMORY_ALLOCATION == 207001, "");
        static_assert(ACL_ERROR_RT_CONTEXT_NULL == 107002, "");
        static_assert(ACL_FLOAT == 0 && ACL_FLOAT16 == 1 && ACL_INT32 == 3 && ACL_INT64 == 9, "");
        static_assert(ACL_DOUBLE == 11 && ACL_BOOL == 12 && ACL_BF16 == 27, "");
        static_assert(ACL_FORMAT_NCHW == 0 && ACL_FORMAT_NHWC == 1 && ACL_FORMAT_ND == 2, "");
        static_assert(ACL_MEMCPY_HOST_TO_DEVICE == 1 && ACL_MEMCPY_DEVICE_TO_HOST == 2, "");
        static_assert(ACL_MEMCPY_DEVICE_TO_DEVICE == 3 && ACL_HBM_MEM == 1, "");
        static_assert(ACL_STREAM_STATUS_COMPLETE == 0 && ACL_STREAM_STATUS_NOT_READY == 1, "");
        static_assert(ACL_EVENT_RECORDED_STATUS_NOT_READY == 0, "");
        static_assert(ACL_EVENT_RECORDED_STATUS_COMPLETE == 1, "");
        static_assert(ACL_EVENT_SYNC == 0x1u && ACL_EVENT_TIME_LINE == 0x8u, "");
        static_assert(ACL_MEM_MALLOC_HUGE_FIRST == 0, "");
        static_assert(ACL_MODEL_RI_CAPTURE_MODE_GLOBAL == 0, "");
        static_assert(ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL == 1, "");
        static_assert(ACL_MODEL_RI_CAPTURE_MODE_RELAXED == 2, "");
        static_assert(ACL_MODEL_RI_CAPTURE_STATUS_NONE == 0, "");
        static_assert(ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE == 1, "");
        static_assert(ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED == 2, "");
        static_assert(ACL_ERROR_RT_STREAM_CAPTURED == 107027, "");
        static_assert(ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT == 107030, "");
        static_assert(ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED == 507903, "");
        aclError (*g)(aclmdlRI, aclrtStream) = aclmdlRIExecuteAsync;
        aclError (*f)(void*, size_t, const void*, size_t, aclrtMemcpyKind, aclrtStream) =
            aclrtMemcpyAsync;
        int main() { return f == nullptr || g == nullptr; }
        """)
    )
    lib64 = libpath.parent.name == "lib64"
    inc = libpath.parent.parent / "include" if lib64 else EMULATOR / "include"
    proc = _run([cxx, "-std=c++17", "-fsyntax-only", f"-I{inc}", str(src)])
    assert proc.returncode == 0, proc.stderr


# ------------------------------------------------------------------ initialisation


def test_uninitialised_use_and_repeat_init(libpath):
    """A fresh process: every aclrt call before aclInit fails 100001, a second aclInit 100002,
    and ASCEND_EMU_DEVICES / ASCEND_EMU_MEMORY_MB shape the devices."""
    script = textwrap.dedent(f"""
        import ctypes
        lib = ctypes.CDLL({str(libpath)!r})
        lib.aclGetRecentErrMsg.restype = ctypes.c_char_p
        vp = ctypes.c_void_p
        p, n = vp(), ctypes.c_uint32()
        assert lib.aclrtSetDevice(0) == {UNINITIALIZE}
        assert b"before aclInit" in lib.aclGetRecentErrMsg()
        assert lib.aclrtMalloc(ctypes.byref(p), ctypes.c_size_t(64), 0) == {UNINITIALIZE}
        assert lib.aclrtGetDeviceCount(ctypes.byref(n)) == {UNINITIALIZE}
        assert lib.aclrtCreateStream(ctypes.byref(p)) == {UNINITIALIZE}
        assert lib.aclrtSynchronizeDevice() == {UNINITIALIZE}
        assert lib.aclInit(None) == 0
        assert lib.aclInit(None) == {REPEAT_INITIALIZE}
        assert lib.aclrtGetDeviceCount(ctypes.byref(n)) == 0 and n.value == 3, n.value
        assert lib.aclrtSetDevice(3) == {RT_INVALID_DEVICEID}
        assert lib.aclrtSetDevice(2) == 0
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        assert lib.aclrtGetMemInfo({HBM}, ctypes.byref(free), ctypes.byref(total)) == 0
        assert total.value == 64 << 20 and free.value == total.value
        assert lib.aclFinalize() == 0
        assert lib.aclrtSetDevice(0) == {UNINITIALIZE}
        print("ok")
    """)
    env = {**os.environ, "ASCEND_EMU_DEVICES": "3", "ASCEND_EMU_MEMORY_MB": "64"}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


def test_a_forked_child_starts_uninitialised(libpath):
    """The child of fork() has none of the parent's devices, memory or stream workers: its aclrt
    calls fail 100001 (instead of hanging on a worker that did not fork) until it calls aclInit."""
    script = textwrap.dedent(f"""
        import ctypes, os
        lib = ctypes.CDLL({str(libpath)!r})
        vp = ctypes.c_void_p
        lib.aclrtMalloc.argtypes = [ctypes.POINTER(vp), ctypes.c_size_t, ctypes.c_int]
        lib.aclrtMemsetAsync.argtypes = [vp, ctypes.c_size_t, ctypes.c_int32, ctypes.c_size_t, vp]
        lib.aclrtSynchronizeStream.argtypes = [vp]
        assert lib.aclInit(None) == 0 and lib.aclrtSetDevice(0) == 0
        p = vp()
        assert lib.aclrtMalloc(ctypes.byref(p), 64, 0) == 0
        assert lib.aclrtMemsetAsync(p, 64, 1, 64, None) == 0
        pid = os.fork()
        if pid == 0:
            ok = lib.aclrtSynchronizeStream(None) == {UNINITIALIZE}
            ok = ok and lib.aclInit(None) == 0 and lib.aclrtSetDevice(0) == 0
            q = vp()
            ok = ok and lib.aclrtMalloc(ctypes.byref(q), 64, 0) == 0
            ok = ok and lib.aclrtMemsetAsync(p, 64, 1, 64, None) == {INVALID_PARAM}  # parent's
            ok = ok and lib.aclrtMemsetAsync(q, 64, 2, 64, None) == 0
            ok = ok and lib.aclrtSynchronizeStream(None) == 0
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0, status
        assert lib.aclrtSynchronizeStream(None) == 0  # the parent is unaffected
        print("ok")
    """)
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


def test_a_thread_without_a_current_device_gets_context_null(acl):
    out = {}

    def body():
        p, d = ctypes.c_void_p(), ctypes.c_int32()
        out["malloc"] = acl.aclrtMalloc(ctypes.byref(p), 64, 0)
        out["get"] = acl.aclrtGetDevice(ctypes.byref(d))
        out["host"] = acl.aclrtMallocHost(ctypes.byref(p), 64)
        out["msg"] = err(acl)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert out["malloc"] == out["get"] == out["host"] == RT_CONTEXT_NULL
    assert "no current device" in out["msg"]


def test_recent_error_message_is_per_thread_and_read_once(acl):
    assert acl.aclrtSetDevice(99) == RT_INVALID_DEVICEID
    seen = {}
    t = threading.Thread(target=lambda: seen.setdefault("other", acl.aclGetRecentErrMsg()))
    t.start()
    t.join()
    assert seen["other"] is None
    msg = err(acl)
    assert "aclrtSetDevice" in msg and "99" in msg and "100000" not in msg
    assert acl.aclGetRecentErrMsg() is None


# ------------------------------------------------------------------ memory


def test_device_pointers_are_device_scoped(acl, mem):
    p = mem.malloc(1, 64)
    acl.aclrtSetDevice(0)
    assert acl.aclrtMemset(p, 64, 0, 64) == INVALID_PARAM
    assert "belongs to device 1" in err(acl)
    assert acl.aclrtMemcpy(p, 64, b"x" * 64, 64, H2D) == INVALID_PARAM
    assert acl.aclrtFree(p) == INVALID_PARAM
    acl.aclrtSetDevice(1)
    assert acl.aclrtMemset(p, 64, 7, 64) == SUCCESS
    assert mem.read(1, p, 4) == b"\x07" * 4


def test_memcpy_kinds_are_checked_against_the_pointers(acl, mem):
    dev = mem.malloc(0, 32)
    host = ctypes.create_string_buffer(b"h" * 32, 32)
    other = ctypes.create_string_buffer(32)
    assert acl.aclrtMemcpy(dev, 32, host, 32, D2H) == INVALID_PARAM  # dst is device memory
    assert "wants host memory" in err(acl)
    assert acl.aclrtMemcpy(other, 32, host, 32, D2H) == INVALID_PARAM  # src is host memory
    assert "is not device memory" in err(acl)
    assert acl.aclrtMemcpy(host, 32, dev, 32, H2D) == INVALID_PARAM
    assert acl.aclrtMemcpy(dev, 32, host, 32, H2H) == INVALID_PARAM
    assert acl.aclrtMemcpy(dev, 32, dev, 32, 9) == INVALID_PARAM  # not an aclrtMemcpyKind
    assert acl.aclrtMemcpy(dev, 32, host, 32, H2D) == SUCCESS
    assert acl.aclrtMemcpy(other, 32, dev, 32, DEFAULT) == SUCCESS
    assert other.raw == b"h" * 32
    assert acl.aclrtMemcpy(other, 32, host, 32, H2H) == SUCCESS
    # A range running past its allocation is not one device buffer.
    assert acl.aclrtMemcpy(dev + 16, 32, host, 32, H2D) == INVALID_PARAM
    assert "overruns" in err(acl)


def test_dest_max_is_honoured(acl, mem):
    dev = mem.malloc(0, 64)
    data = b"d" * 64
    assert acl.aclrtMemcpy(dev, 32, data, 64, H2D) == INVALID_PARAM
    assert "exceeds destMax" in err(acl)
    assert acl.aclrtMemset(dev, 16, 0, 64) == INVALID_PARAM
    assert acl.aclrtMemsetAsync(dev, 16, 0, 64, None) == INVALID_PARAM
    assert acl.aclrtMemcpy(dev, 64, data, 64, H2D) == SUCCESS


def test_peer_copies_need_enabled_peer_access(acl, mem):
    a, b = mem.malloc(0, 16), mem.malloc(1, 16)
    mem.write(1, b, b"B" * 16)
    mem.write(0, a, b"A" * 16)
    acl.aclrtSetDevice(0)
    assert acl.aclrtMemcpy(a, 16, b, 16, D2D) == INVALID_PARAM
    assert "aclrtDeviceEnablePeerAccess" in err(acl)
    can = ctypes.c_int32()
    assert acl.aclrtDeviceCanAccessPeer(ctypes.byref(can), 0, 1) == SUCCESS and can.value == 1
    assert acl.aclrtDeviceEnablePeerAccess(0, 0) == INVALID_PARAM  # itself
    assert acl.aclrtDeviceEnablePeerAccess(1, 0) == SUCCESS
    try:
        assert acl.aclrtMemcpy(a, 16, b, 16, D2D) == SUCCESS
        assert mem.read(0, a, 16) == b"B" * 16
        # Enabling is directional: device 1 still may not touch device 0's memory.
        acl.aclrtSetDevice(1)
        assert acl.aclrtMemcpy(b, 16, a, 16, D2D) == INVALID_PARAM
        # H2D never reaches a peer's memory.
        acl.aclrtSetDevice(0)
        assert acl.aclrtMemcpy(b, 16, b"x" * 16, 16, H2D) == INVALID_PARAM
    finally:
        acl.aclrtSetDevice(0)
        assert acl.aclrtDeviceDisablePeerAccess(1) == SUCCESS
    assert acl.aclrtMemcpy(a, 16, b, 16, D2D) == INVALID_PARAM


def test_memory_accounting_and_allocation_errors(acl, mem):
    free0, total = ctypes.c_size_t(), ctypes.c_size_t()
    acl.aclrtSetDevice(0)
    assert acl.aclrtGetMemInfo(HBM, ctypes.byref(free0), ctypes.byref(total)) == SUCCESS
    live0 = acl.aclEmuLiveAllocations(0)
    p = mem.malloc(0, 1 << 20)
    free1 = ctypes.c_size_t()
    assert acl.aclrtGetMemInfo(HBM, ctypes.byref(free1), ctypes.byref(total)) == SUCCESS
    assert free0.value - free1.value == 1 << 20
    assert acl.aclEmuLiveAllocations(0) == live0 + 1
    assert acl.aclrtFree(p) == SUCCESS
    mem.forget(p)
    assert acl.aclrtFree(p) == INVALID_PARAM  # double free
    assert acl.aclrtGetMemInfo(HBM, ctypes.byref(free1), ctypes.byref(total)) == SUCCESS
    assert free1.value == free0.value
    q = ctypes.c_void_p()
    assert acl.aclrtMalloc(ctypes.byref(q), total.value + 1, 0) == RT_MEMORY_ALLOCATION
    assert "out of memory on device 0" in err(acl)
    assert acl.aclrtMalloc(ctypes.byref(q), 0, 0) == INVALID_PARAM
    assert acl.aclrtMalloc(ctypes.byref(q), 64, 77) == INVALID_PARAM  # not a policy


def test_pinned_host_memory_is_not_device_memory(acl, mem):
    h = ctypes.c_void_p()
    assert acl.aclrtMallocHost(ctypes.byref(h), 64) == SUCCESS
    dev = mem.malloc(0, 64)
    assert acl.aclrtFree(h) == INVALID_PARAM
    assert acl.aclrtFreeHost(dev) == INVALID_PARAM
    ctypes.memmove(h, b"p" * 64, 64)
    assert acl.aclrtMemcpy(dev, 64, h, 64, H2D) == SUCCESS
    assert acl.aclrtMemcpy(h, 64, dev, 64, H2D) == INVALID_PARAM
    assert acl.aclrtFreeHost(h) == SUCCESS
    assert acl.aclrtFreeHost(h) == INVALID_PARAM


# ------------------------------------------------------------------ streams and events


def test_streams_are_asynchronous_and_statuses_have_opposite_polarity(acl, mem):
    dev = mem.malloc(0, 8)
    mem.write(0, dev, b"oldoldol")
    s = new_stream(acl)
    e = new_event(acl)
    assert event_status(acl, e) == EVENT_NOT_READY  # never recorded
    gate = Gate(acl, s)
    src = mem.pinned(b"newnewne")
    assert acl.aclrtMemcpyAsync(dev, 8, src, 8, H2D, s) == SUCCESS
    assert acl.aclrtRecordEvent(e, s) == SUCCESS
    assert stream_status(acl, s) == STREAM_NOT_READY == 1
    assert event_status(acl, e) == EVENT_NOT_READY == 0
    assert mem.read(0, dev, 8) == b"oldoldol"  # the copy really has not happened yet
    gate.release()
    assert acl.aclrtSynchronizeStream(s) == SUCCESS
    assert mem.read(0, dev, 8) == b"newnewne"
    assert stream_status(acl, s) == STREAM_COMPLETE == 0
    assert event_status(acl, e) == EVENT_COMPLETE == 1
    assert acl.aclrtSynchronizeEvent(e) == SUCCESS
    assert acl.aclrtDestroyEvent(e) == SUCCESS
    assert acl.aclrtDestroyStream(s) == SUCCESS
    assert acl.aclrtDestroyStream(s) == INVALID_PARAM


class DelayedGate:
    """A Gate released by a helper thread after `delay` seconds, while the test thread waits."""

    def __init__(self, acl, stream, delay: float):
        self.acl, self.stream, self.released_at = acl, stream, None
        subscribed, self.go = threading.Event(), threading.Event()
        self.cb = CALLBACK(lambda _d: None)

        def helper():
            assert acl.aclrtSubscribeReport(threading.get_ident(), stream) == SUCCESS
            subscribed.set()
            self.go.wait()
            time.sleep(delay)
            self.released_at = time.monotonic()
            self.rc = acl.aclrtProcessReport(5000)
            acl.aclrtUnSubscribeReport(threading.get_ident(), stream)

        self.thread = threading.Thread(target=helper)
        self.thread.start()
        subscribed.wait()
        cbp = ctypes.cast(self.cb, ctypes.c_void_p)
        assert acl.aclrtLaunchCallback(cbp, None, CALLBACK_BLOCK, stream) == SUCCESS, err(acl)

    def start(self) -> None:
        self.go.set()

    def join(self) -> None:
        self.thread.join()
        assert self.rc == SUCCESS


@pytest.mark.parametrize("sync", ["stream", "event", "device"])
def test_synchronize_waits_for_queued_work(acl, mem, sync):
    dev = mem.malloc(0, 8)
    mem.write(0, dev, b"oldoldol")
    s = new_stream(acl)
    e = new_event(acl)
    gate = DelayedGate(acl, s, 0.3)
    src = mem.pinned(b"newnewne")
    assert acl.aclrtMemcpyAsync(dev, 8, src, 8, H2D, s) == SUCCESS
    assert acl.aclrtRecordEvent(e, s) == SUCCESS
    gate.start()
    if sync == "stream":
        assert acl.aclrtSynchronizeStream(s) == SUCCESS
    elif sync == "event":
        assert acl.aclrtSynchronizeEvent(e) == SUCCESS
    else:
        assert acl.aclrtSynchronizeDevice() == SUCCESS
    returned_at = time.monotonic()
    gate.join()
    assert gate.released_at is not None and returned_at >= gate.released_at
    assert mem.read(0, dev, 8) == b"newnewne"
    assert acl.aclrtDestroyEvent(e) == SUCCESS
    assert acl.aclrtDestroyStream(s) == SUCCESS


def test_stream_wait_event_orders_two_streams(acl, mem):
    dev = mem.malloc(0, 4)
    mem.write(0, dev, b"....")
    a, b = new_stream(acl), new_stream(acl)
    e = new_event(acl, EVENT_SYNC)
    gate = Gate(acl, a)
    assert acl.aclrtMemsetAsync(dev, 4, 0x41, 4, a) == SUCCESS
    assert acl.aclrtRecordEvent(e, a) == SUCCESS
    assert acl.aclrtStreamWaitEvent(b, e) == SUCCESS
    assert acl.aclrtMemsetAsync(dev, 2, 0x42, 2, b) == SUCCESS  # must land after a's memset
    assert stream_status(acl, b) == STREAM_NOT_READY
    gate.release()
    assert acl.aclrtSynchronizeStream(b) == SUCCESS
    assert mem.read(0, dev, 4) == b"BBAA"
    for s in (a, b):
        assert acl.aclrtDestroyStream(s) == SUCCESS
    acl.aclrtDestroyEvent(e)


def test_async_work_needs_a_stream_of_the_current_device(acl, mem):
    s1 = new_stream(acl, 1)
    d0 = mem.malloc(0, 8)
    acl.aclrtSetDevice(0)
    assert acl.aclrtMemsetAsync(d0, 8, 0, 8, s1) == RT_STREAM_CONTEXT
    assert "belongs to device 1" in err(acl)
    acl.aclrtSetDevice(1)
    assert acl.aclrtDestroyStream(s1) == SUCCESS


def test_event_elapsed_time(acl, mem):
    dev = mem.malloc(0, 1 << 16)
    start, end = new_event(acl), new_event(acl)
    untimed, unrecorded = new_event(acl, EVENT_SYNC), new_event(acl, EVENT_TIME_LINE)
    ms = ctypes.c_float(-1)
    assert acl.aclrtRecordEvent(start, None) == SUCCESS
    assert acl.aclrtMemsetAsync(dev, 1 << 16, 1, 1 << 16, None) == SUCCESS
    assert acl.aclrtRecordEvent(end, None) == SUCCESS
    assert acl.aclrtRecordEvent(untimed, None) == SUCCESS
    assert acl.aclrtSynchronizeEvent(end) == SUCCESS
    assert acl.aclrtSynchronizeEvent(untimed) == SUCCESS
    assert acl.aclrtSynchronizeEvent(unrecorded) == SUCCESS  # nothing to wait for
    assert acl.aclrtEventElapsedTime(ctypes.byref(ms), start, end) == SUCCESS
    assert 0.0 <= ms.value < 10_000
    assert acl.aclrtEventElapsedTime(ctypes.byref(ms), start, untimed) == INVALID_PARAM
    assert acl.aclrtEventElapsedTime(ctypes.byref(ms), start, unrecorded) == RT_EVENT_NOT_COMPLETE
    for e in (start, end, untimed, unrecorded):
        assert acl.aclrtDestroyEvent(e) == SUCCESS


def test_host_callbacks_need_a_subscribed_thread(acl):
    s = new_stream(acl)
    cb = CALLBACK(lambda _d: None)
    cbp = ctypes.cast(cb, ctypes.c_void_p)
    assert acl.aclrtLaunchCallback(cbp, None, CALLBACK_BLOCK, s) == RT_STREAM_NO_CB_REG
    assert acl.aclrtProcessReport(10) == RT_THREAD_SUBSCRIBE
    tid = threading.get_ident()
    assert acl.aclrtSubscribeReport(tid, s) == SUCCESS
    assert acl.aclrtProcessReport(10) == RT_REPORT_TIMEOUT
    assert acl.aclrtUnSubscribeReport(tid, s) == SUCCESS
    assert acl.aclrtDestroyStream(s) == SUCCESS


# ------------------------------------------------------------------ contract violations


def test_free_with_pending_work_is_a_violation_surfaced_at_sync(acl, mem):
    src, dst = mem.malloc(0, 16), mem.malloc(0, 16)
    mem.write(0, src, b"S" * 16)
    mem.write(0, dst, b"D" * 16)
    s = new_stream(acl)
    gate = Gate(acl, s)
    assert acl.aclrtMemcpyAsync(dst, 16, src, 16, D2D, s) == SUCCESS
    before = acl.aclEmuViolationCount()
    assert acl.aclrtFree(src) == SUCCESS  # the hardware would let it through
    mem.forget(src)
    assert acl.aclEmuViolationCount() == before + 1
    assert "aclrtFree" in acl.aclEmuLastViolation().decode()
    gate.release()
    assert acl.aclrtSynchronizeStream(s) == RT_AICORE_EXCEPTION
    msg = err(acl)
    assert "aclrtMemcpyAsync" in msg and "aclrtFree'd" in msg
    assert mem.read(0, dst, 16) == b"D" * 16  # the copy did not run on freed memory
    assert acl.aclrtSynchronizeStream(s) == SUCCESS  # reported once
    assert acl.aclrtDestroyStream(s) == SUCCESS


def test_async_copies_need_pinned_host_memory(acl, mem):
    dev = mem.malloc(0, 16)
    pageable = ctypes.create_string_buffer(16)
    assert acl.aclrtMemcpyAsync(dev, 16, pageable, 16, H2D, None) == INVALID_PARAM
    assert "pageable host memory" in err(acl)
    assert acl.aclrtMemcpyAsync(pageable, 16, dev, 16, D2H, None) == INVALID_PARAM
    assert acl.aclrtMemcpyAsync(pageable, 16, dev, 16, DEFAULT, None) == INVALID_PARAM
    pinned = mem.pinned(b"P" * 16)
    assert acl.aclrtMemcpyAsync(dev, 16, pinned, 16, H2D, None) == SUCCESS
    assert acl.aclrtMemcpyAsync(dev, 16, pinned + 8, 16, H2D, None) == INVALID_PARAM  # overrun
    assert acl.aclrtSynchronizeStream(None) == SUCCESS
    assert mem.read(0, dev, 16) == b"P" * 16


def test_free_host_with_pending_copy_is_a_violation(acl, mem):
    dev = mem.malloc(0, 8)
    mem.write(0, dev, b"devdevde")
    pinned = mem.pinned(b"hosthost")
    s = new_stream(acl)
    gate = Gate(acl, s)
    assert acl.aclrtMemcpyAsync(pinned, 8, dev, 8, D2H, s) == SUCCESS
    before = acl.aclEmuViolationCount()
    assert acl.aclrtFreeHost(pinned) == SUCCESS
    mem.forget(pinned)
    assert acl.aclEmuViolationCount() == before + 1
    assert "aclrtFreeHost" in acl.aclEmuLastViolation().decode()
    gate.release()
    assert acl.aclrtSynchronizeStream(s) == RT_AICORE_EXCEPTION
    assert "aclrtFreeHost'd" in err(acl)
    assert acl.aclrtDestroyStream(s) == SUCCESS


def test_work_freed_after_completion_is_no_violation(acl, mem):
    p = mem.malloc(0, 16)
    assert acl.aclrtMemsetAsync(p, 16, 0, 16, None) == SUCCESS
    assert acl.aclrtSynchronizeStream(None) == SUCCESS
    before = acl.aclEmuViolationCount()
    assert acl.aclrtFree(p) == SUCCESS
    mem.forget(p)
    assert acl.aclEmuViolationCount() == before


def test_fault_injection_and_call_counts(acl, mem):
    """aclEmuInjectFault(name, nth, status): the nth call from now fails; faults add up."""
    p = ctypes.c_void_p()
    n0 = acl.aclEmuCallCount(b"aclrtMalloc")
    assert acl.aclEmuInjectFault(b"aclrtMalloc", 1, RT_MEMORY_ALLOCATION) == 0
    assert acl.aclEmuInjectFault(b"aclrtMalloc", 2, RT_MEMORY_ALLOCATION) == 0
    assert acl.aclrtMalloc(ctypes.byref(p), 64, 0) == RT_MEMORY_ALLOCATION
    assert "injected fault" in err(acl)
    assert acl.aclrtMalloc(ctypes.byref(p), 64, 0) == RT_MEMORY_ALLOCATION
    mem.malloc(0, 64)  # the third call succeeds
    assert acl.aclEmuCallCount(b"aclrtMalloc") == n0 + 3
    assert acl.aclEmuInjectFault(b"aclrtSynchronizeStream", 2, 507000) == 0
    assert [acl.aclrtSynchronizeStream(None) for _ in range(3)] == [SUCCESS, 507000, SUCCESS]
    # Clearing the faults keeps the counters; aclEmuReset clears both.
    assert acl.aclEmuInjectFault(b"aclrtSynchronizeStream", 1, 507000) == 0
    acl.aclEmuClearFaults()
    assert acl.aclrtSynchronizeStream(None) == SUCCESS
    assert acl.aclEmuCallCount(b"aclrtMalloc") == n0 + 3
    acl.aclEmuReset()
    assert acl.aclEmuCallCount(b"aclrtMalloc") == 0
    assert acl.aclEmuInjectFault(b"aclrtMalloc", 0, 1) == -1  # nth < 1
    assert acl.aclEmuInjectFault(b"aclrtMalloc", 1, 0) == -1  # no status
    assert acl.aclEmuInjectFault(b"topsMalloc", 1, 1) == -1  # not a toolkit function


# ------------------------------------------------------------------ the op libraries' internal API

WORK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
CLEANUP = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class Range(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_void_p), ("bytes", ctypes.c_size_t)]


def test_internal_resolve_and_enqueue(acl, mem):
    p0, p1 = mem.malloc(0, 64), mem.malloc(1, 64)
    assert acl.aclEmuInternalResolve(0, p0 + 8, 56) == p0 + 8
    assert acl.aclEmuInternalResolve(0, p0 + 8, 57) is None  # past the allocation
    assert acl.aclEmuInternalResolve(1, p0, 8) is None  # device 0's memory
    assert acl.aclEmuInternalPointerDevice(p1, 64) == 1
    acl.aclrtSetDevice(0)
    assert acl.aclEmuInternalStreamDevice(None) == 0

    calls = []

    def work(_arg, msg, n):
        calls.append("work")
        ctypes.memmove(msg, b"bad tiling\0", 11)
        return 361001

    w, c = WORK(work), CLEANUP(lambda _a: calls.append("cleanup"))
    ranges = (Range * 1)(Range(p1, 64))  # device 1's memory on device 0's stream
    wp, cp = ctypes.cast(w, ctypes.c_void_p), ctypes.cast(c, ctypes.c_void_p)
    assert acl.aclEmuInternalEnqueue(None, b"aclnnFoo", wp, None, cp, ranges, 1) == INVALID_PARAM
    assert calls == ["cleanup"] and "device 1" in err(acl)
    calls.clear()
    ranges = (Range * 1)(Range(p0, 64))
    assert acl.aclEmuInternalEnqueue(None, b"aclnnFoo", wp, None, cp, ranges, 1) == SUCCESS
    assert acl.aclrtSynchronizeDevice() == 361001
    assert "aclnnFoo" in (msg := err(acl)) and "bad tiling" in msg
    assert calls == ["work", "cleanup"]


# ------------------------------------------------------------------ stream capture (aclmdlRI)


def _capture_status(acl, stream) -> tuple[int, int | None]:
    status, model = ctypes.c_int(-1), ctypes.c_void_p()
    assert acl.aclmdlRICaptureGetInfo(stream, ctypes.byref(status), ctypes.byref(model)) == SUCCESS
    return status.value, model.value


def _capture_end(acl, stream) -> tuple[int, int | None]:
    model = ctypes.c_void_p()
    rc = acl.aclmdlRICaptureEnd(stream, ctypes.byref(model))
    return rc, model.value


@pytest.fixture
def cap_stream(acl):
    """A created stream of device 0; a capture a test leaves open is ended, so a failed test never
    leaves a GLOBAL capture refusing the next test's calls."""
    acl.aclrtSetDevice(0)
    s = ctypes.c_void_p()
    assert acl.aclrtCreateStream(ctypes.byref(s)) == SUCCESS
    yield s.value
    acl.aclrtSetDevice(0)
    if _capture_status(acl, s.value)[0] != CAPTURE_NONE:
        rc, model = _capture_end(acl, s.value)
        if rc == SUCCESS:
            acl.aclmdlRIDestroy(model)
    acl.aclrtDestroyStream(s.value)
    acl.aclGetRecentErrMsg()


def test_capture_records_tasks_and_execute_runs_them_again(acl, mem, cap_stream):
    s = cap_stream
    d = mem.malloc(0, 8)
    mem.write(0, d, b"\0" * 8)
    h = mem.pinned(b"\0" * 8)
    calls = []
    w = WORK(lambda _a, _m, _n: calls.append("work") or 0)
    c = CLEANUP(lambda _a: calls.append("cleanup"))
    wp, cp = ctypes.cast(w, ctypes.c_void_p), ctypes.cast(c, ctypes.c_void_p)

    assert _capture_status(acl, s) == (CAPTURE_NONE, None)
    assert acl.aclmdlRICaptureBegin(s, MODE_GLOBAL) == SUCCESS, err(acl)
    status, model = _capture_status(acl, s)
    assert status == CAPTURE_ACTIVE and model
    assert acl.aclrtMemsetAsync(d, 8, 7, 8, s) == SUCCESS, err(acl)
    assert acl.aclrtMemcpyAsync(h, 8, d, 8, D2H, s) == SUCCESS, err(acl)
    # An op library's task (an aclnn op): its argument outlives the capture.
    ranges = (Range * 1)(Range(d, 8))
    assert acl.aclEmuInternalEnqueue(s, b"aclnnFoo", wp, None, cp, ranges, 1) == SUCCESS
    scratch = mem.malloc(0, 16)  # aclrtMalloc / aclrtFree stay allowed
    assert acl.aclrtFree(scratch) == SUCCESS
    mem.forget(scratch)
    rc, ended = _capture_end(acl, s)
    assert rc == SUCCESS, err(acl)
    assert ended == model, "aclmdlRICaptureGetInfo named the instance the capture made"
    assert _capture_status(acl, s) == (CAPTURE_NONE, None)
    assert acl.aclrtSynchronizeStream(s) == SUCCESS
    assert ctypes.string_at(h, 8) == b"\0" * 8 and calls == [], "recorded, not run"

    for value in (1, 2):
        mem.write(0, d, bytes([value]) * 8)  # overwritten by the replayed memset
        ctypes.memset(h, 0, 8)
        assert acl.aclmdlRIExecuteAsync(model, s) == SUCCESS, err(acl)
        assert acl.aclrtSynchronizeStream(s) == SUCCESS, err(acl)
        assert ctypes.string_at(h, 8) == b"\x07" * 8
    assert calls == ["work", "work"], "the op ran at each execution; its argument is kept"
    assert acl.aclmdlRIExecuteAsync(model, None) == SUCCESS, "any stream of its device"
    assert acl.aclrtSynchronizeStream(None) == SUCCESS
    assert acl.aclmdlRIDestroy(model) == SUCCESS
    # The op's argument goes with the last reference to the task: the instance's, or that of an
    # execution's item, which the stream's worker drops just after the sync returned.
    deadline = time.monotonic() + 5
    while calls[-1] != "cleanup" and time.monotonic() < deadline:
        time.sleep(0.005)
    assert calls == ["work", "work", "work", "cleanup"]
    assert acl.aclmdlRIDestroy(model) == INVALID_PARAM
    assert acl.aclmdlRIExecuteAsync(model, s) == INVALID_PARAM
    assert "not a live aclmdlRI" in err(acl)


def test_replay_reads_memory_when_it_runs_and_needs_it_alive(acl, mem, cap_stream):
    s = cap_stream
    a, b = mem.malloc(0, 8), mem.malloc(0, 8)
    mem.write(0, a, b"capture!")
    assert acl.aclmdlRICaptureBegin(s, MODE_GLOBAL) == SUCCESS
    assert acl.aclrtMemcpyAsync(b, 8, a, 8, D2D, s) == SUCCESS
    rc, model = _capture_end(acl, s)
    assert rc == SUCCESS
    mem.write(0, a, b"replay!!")
    assert acl.aclmdlRIExecuteAsync(model, s) == SUCCESS
    assert acl.aclrtSynchronizeStream(s) == SUCCESS
    assert mem.read(0, b, 8) == b"replay!!"
    # The instance keeps the addresses, not the memory: executing it after a free fails.
    assert acl.aclrtFree(a) == SUCCESS
    mem.forget(a)
    assert acl.aclmdlRIExecuteAsync(model, s) == SUCCESS
    assert acl.aclrtSynchronizeStream(s) == RT_AICORE_EXCEPTION
    assert "aclrtFree" in err(acl)
    assert acl.aclmdlRIDestroy(model) == SUCCESS


def _forbidden(acl, mem, s, e, d):
    buf = ctypes.create_string_buffer(8)
    status = ctypes.c_int()
    return {
        "aclrtMemcpy": (lambda: acl.aclrtMemcpy(buf, 8, d, 8, D2H), RT_CAPTURE_MODE_NOT_SUPPORT),
        "aclrtMemset": (lambda: acl.aclrtMemset(d, 8, 0, 8), RT_CAPTURE_MODE_NOT_SUPPORT),
        "aclrtMallocHost": (
            lambda: acl.aclrtMallocHost(ctypes.byref(ctypes.c_void_p()), 64),
            RT_CAPTURE_MODE_NOT_SUPPORT,
        ),
        "aclrtSynchronizeDevice": (acl.aclrtSynchronizeDevice, RT_CAPTURE_MODE_NOT_SUPPORT),
        "aclrtSynchronizeStream": (lambda: acl.aclrtSynchronizeStream(s), RT_STREAM_CAPTURED),
        "aclrtStreamQuery": (
            lambda: acl.aclrtStreamQuery(s, ctypes.byref(status)),
            RT_STREAM_CAPTURED,
        ),
        "aclrtDestroyStream": (lambda: acl.aclrtDestroyStream(s), RT_STREAM_CAPTURED),
        "aclrtSynchronizeEvent": (lambda: acl.aclrtSynchronizeEvent(e), RT_EVENT_CAPTURED),
        "aclrtQueryEventStatus": (
            lambda: acl.aclrtQueryEventStatus(e, ctypes.byref(status)),
            RT_EVENT_CAPTURED,
        ),
    }


FORBIDDEN = [
    "aclrtMemcpy",
    "aclrtMemset",
    "aclrtMallocHost",
    "aclrtSynchronizeDevice",
    "aclrtSynchronizeStream",
    "aclrtStreamQuery",
    "aclrtDestroyStream",
    "aclrtSynchronizeEvent",
    "aclrtQueryEventStatus",
]


@pytest.mark.parametrize("call", FORBIDDEN)
def test_forbidden_call_fails_and_invalidates_the_capture(acl, mem, cap_stream, call):
    s = cap_stream
    d = mem.malloc(0, 8)
    mem.write(0, d, b"\0" * 8)
    e = ctypes.c_void_p()
    assert acl.aclrtCreateEvent(ctypes.byref(e)) == SUCCESS
    calls = _forbidden(acl, mem, s, e.value, d)
    assert list(calls) == FORBIDDEN
    assert acl.aclmdlRICaptureBegin(s, MODE_GLOBAL) == SUCCESS
    assert acl.aclrtMemsetAsync(d, 8, 1, 8, s) == SUCCESS
    assert acl.aclrtRecordEvent(e.value, s) == SUCCESS  # an event recorded by the capture
    fn, code = calls[call]
    assert fn() == code
    assert call in (msg := err(acl)) and "the capture is now invalidated" in msg, msg
    assert _capture_status(acl, s)[0] == CAPTURE_INVALIDATED
    # Later tasks on the invalidated capture fail, saying why.
    assert acl.aclrtMemsetAsync(d, 8, 2, 8, s) == RT_STREAM_CAPTURE_INVALIDATED
    assert call in err(acl)
    rc, model = _capture_end(acl, s)
    assert rc == RT_STREAM_CAPTURE_INVALIDATED and model is None
    assert "was invalidated" in (msg := err(acl)) and call in msg, msg
    assert _capture_status(acl, s)[0] == CAPTURE_NONE, "the capture ended all the same"
    # Nothing recorded ever ran; the stream works again.
    assert acl.aclrtSynchronizeStream(s) == SUCCESS
    assert mem.read(0, d, 8) == b"\0" * 8
    assert acl.aclrtDestroyEvent(e.value) == SUCCESS


def _in_thread(acl, fn):
    out = []

    def body():
        acl.aclrtSetDevice(0)
        out.append(fn())
        acl.aclGetRecentErrMsg()

    t = threading.Thread(target=body)
    t.start()
    t.join()
    return out[0]


def test_capture_modes_decide_which_threads_are_refused(acl, mem, cap_stream):
    s = cap_stream
    d = mem.malloc(0, 8)
    buf = ctypes.create_string_buffer(8)

    def memcpy():
        return acl.aclrtMemcpy(buf, 8, d, 8, D2H)

    # THREAD_LOCAL: another thread may copy synchronously, the capturing one may not.
    assert acl.aclmdlRICaptureBegin(s, MODE_THREAD_LOCAL) == SUCCESS
    assert _in_thread(acl, memcpy) == SUCCESS
    assert _capture_status(acl, s)[0] == CAPTURE_ACTIVE
    assert memcpy() == RT_CAPTURE_MODE_NOT_SUPPORT
    assert "ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL" in err(acl)
    assert _capture_end(acl, s)[0] == RT_STREAM_CAPTURE_INVALIDATED

    # GLOBAL: every thread is refused.
    assert acl.aclmdlRICaptureBegin(s, MODE_GLOBAL) == SUCCESS
    assert _in_thread(acl, memcpy) == RT_CAPTURE_MODE_NOT_SUPPORT
    assert _capture_status(acl, s)[0] == CAPTURE_INVALIDATED
    assert _capture_end(acl, s)[0] == RT_STREAM_CAPTURE_INVALIDATED

    # RELAXED: the unsafe calls are allowed; the capturing stream still cannot be waited for.
    assert acl.aclmdlRICaptureBegin(s, MODE_RELAXED) == SUCCESS
    assert memcpy() == SUCCESS and acl.aclrtSynchronizeDevice() == SUCCESS
    assert _capture_status(acl, s)[0] == CAPTURE_ACTIVE
    assert acl.aclrtSynchronizeStream(s) == RT_STREAM_CAPTURED
    assert _capture_end(acl, s)[0] == RT_STREAM_CAPTURE_INVALIDATED


def test_capture_misuse(acl, mem, cap_stream):
    s = cap_stream
    assert acl.aclmdlRICaptureBegin(None, MODE_GLOBAL) == INVALID_PARAM
    assert "default stream" in err(acl)
    assert acl.aclmdlRICaptureBegin(s, 3) == INVALID_PARAM
    assert _capture_end(acl, s)[0] == RT_STREAM_NOT_CAPTURED
    # Ended in another thread than the one that began it (not RELAXED): refused, and ended.
    assert acl.aclmdlRICaptureBegin(s, MODE_GLOBAL) == SUCCESS
    assert _in_thread(acl, lambda: _capture_end(acl, s)[0]) == RT_STREAM_CAPTURE_WRONG_THREAD
    assert _capture_status(acl, s)[0] == CAPTURE_NONE
    assert acl.aclmdlRICaptureBegin(s, MODE_RELAXED) == SUCCESS
    rc, model = _in_thread(acl, lambda: _capture_end(acl, s))
    assert rc == SUCCESS and acl.aclmdlRIDestroy(model) == SUCCESS
    # Beginning twice invalidates; an instance still being captured neither runs nor goes.
    assert acl.aclmdlRICaptureBegin(s, MODE_GLOBAL) == SUCCESS
    model = _capture_status(acl, s)[1]
    assert acl.aclmdlRIExecuteAsync(model, None) == RT_MODEL_CAPTURED
    assert acl.aclmdlRIDestroy(model) == RT_MODEL_CAPTURED
    assert acl.aclmdlRICaptureBegin(s, MODE_GLOBAL) == RT_STREAM_CAPTURED
    assert _capture_end(acl, s)[0] == RT_STREAM_CAPTURE_INVALIDATED
    assert "already captures" in err(acl)
    # An instance runs on streams of the device it was captured on.
    assert acl.aclmdlRICaptureBegin(s, MODE_GLOBAL) == SUCCESS
    rc, model = _capture_end(acl, s)
    assert rc == SUCCESS
    acl.aclrtSetDevice(1)
    assert acl.aclmdlRIExecuteAsync(model, None) == RT_STREAM_CONTEXT
    acl.aclrtSetDevice(0)
    assert acl.aclmdlRIExecuteAsync(model, s) == SUCCESS, "an empty instance runs, doing nothing"
    assert acl.aclmdlRIDestroy(model) == SUCCESS


def test_joined_stream_is_captured_and_replays_in_order(acl, mem, cap_stream):
    # A fork and join through events, as a collective on its own stream is ordered: the joined
    # stream's tasks are recorded, and each execution keeps the order the events gave.
    s = cap_stream
    other = ctypes.c_void_p()
    assert acl.aclrtCreateStream(ctypes.byref(other)) == SUCCESS
    fork, join = ctypes.c_void_p(), ctypes.c_void_p()
    for e in (fork, join):
        assert acl.aclrtCreateEvent(ctypes.byref(e)) == SUCCESS
    a, b, c = (mem.malloc(0, 8) for _ in range(3))
    assert acl.aclmdlRICaptureBegin(s, MODE_GLOBAL) == SUCCESS
    assert acl.aclrtMemsetAsync(a, 8, 5, 8, s) == SUCCESS
    assert acl.aclrtRecordEvent(fork, s) == SUCCESS
    assert acl.aclrtStreamWaitEvent(other, fork) == SUCCESS, err(acl)
    assert acl.aclrtMemcpyAsync(b, 8, a, 8, D2D, other) == SUCCESS, err(acl)
    assert acl.aclrtRecordEvent(join, other) == SUCCESS
    assert acl.aclrtStreamWaitEvent(s, join) == SUCCESS, err(acl)
    assert acl.aclrtMemsetAsync(a, 8, 9, 8, s) == SUCCESS
    assert acl.aclrtMemcpyAsync(c, 8, b, 8, D2D, s) == SUCCESS
    rc, model = _capture_end(acl, s)
    assert rc == SUCCESS, err(acl)
    assert _capture_status(acl, other) == (CAPTURE_NONE, None)
    for ptr in (a, b, c):
        mem.write(0, ptr, b"\0" * 8)
    assert acl.aclrtSynchronizeStream(other) == SUCCESS, "recorded, not run"
    assert mem.read(0, b, 8) == b"\0" * 8
    for launch in (s, other.value):
        for ptr in (a, b, c):
            mem.write(0, ptr, b"\0" * 8)
        assert acl.aclmdlRIExecuteAsync(model, launch) == SUCCESS, err(acl)
        assert acl.aclrtSynchronizeStream(launch) == SUCCESS, err(acl)
        assert mem.read(0, b, 8) == b"\x05" * 8, "the joined copy ran after the fork"
        assert mem.read(0, a, 8) == b"\x09" * 8, "the origin's later task ran after the join"
        assert mem.read(0, c, 8) == b"\x05" * 8
    assert acl.aclmdlRIDestroy(model) == SUCCESS
    for e in (fork, join):
        assert acl.aclrtDestroyEvent(e) == SUCCESS
    assert acl.aclrtDestroyStream(other) == SUCCESS


def test_events_across_the_capture_boundary(acl, mem, cap_stream):
    s = cap_stream
    d = mem.malloc(0, 8)
    other = ctypes.c_void_p()
    assert acl.aclrtCreateStream(ctypes.byref(other)) == SUCCESS
    inside, outside, never = (ctypes.c_void_p() for _ in range(3))
    for e in (inside, outside, never):
        assert acl.aclrtCreateEvent(ctypes.byref(e)) == SUCCESS
    assert acl.aclrtRecordEvent(outside, other) == SUCCESS
    assert acl.aclrtSynchronizeEvent(outside) == SUCCESS

    # Another stream waiting on an event of the capture joins it (CANN: "event deduction" brings
    # more streams into the capture); ending it before the origin waited on that stream's last
    # task fails, as CUDA's unjoined end does, and ends the capture without an instance.
    assert acl.aclmdlRICaptureBegin(s, MODE_GLOBAL) == SUCCESS
    model = _capture_status(acl, s)[1]
    assert acl.aclrtRecordEvent(inside, s) == SUCCESS
    assert acl.aclrtStreamWaitEvent(other, inside) == SUCCESS, err(acl)
    assert _capture_status(acl, other) == (CAPTURE_ACTIVE, model)
    assert acl.aclrtSynchronizeStream(other) == RT_STREAM_CAPTURED
    assert _capture_end(acl, s)[0] == RT_STREAM_CAPTURE_INVALIDATED
    assert _capture_status(acl, other)[0] == CAPTURE_NONE, "the end releases joined streams"
    assert acl.aclmdlRICaptureBegin(s, MODE_GLOBAL) == SUCCESS
    assert acl.aclrtRecordEvent(inside, s) == SUCCESS
    assert acl.aclrtStreamWaitEvent(other, inside) == SUCCESS
    assert acl.aclrtMemsetAsync(d, 8, 1, 8, other) == SUCCESS, err(acl)
    assert _capture_end(acl, s) == (RT_STREAM_UNJOINED, None)
    assert "did not wait for its last work" in err(acl)
    assert _capture_status(acl, s)[0] == CAPTURE_NONE
    assert _capture_status(acl, other)[0] == CAPTURE_NONE
    # Only the stream that began a capture ends it: a joined one is refused, invalidating it.
    assert acl.aclmdlRICaptureBegin(s, MODE_GLOBAL) == SUCCESS
    assert acl.aclrtRecordEvent(inside, s) == SUCCESS
    assert acl.aclrtStreamWaitEvent(other, inside) == SUCCESS
    assert _capture_end(acl, other)[0] == RT_STREAM_CAPTURE_UNMATCHED
    assert _capture_status(acl, other)[0] == CAPTURE_INVALIDATED
    assert _capture_end(acl, s)[0] == RT_STREAM_CAPTURE_INVALIDATED
    assert acl.aclrtSynchronizeStream(other) == SUCCESS

    # The capturing stream waiting on an event recorded outside the capture.
    assert acl.aclmdlRICaptureBegin(s, MODE_GLOBAL) == SUCCESS
    assert acl.aclrtStreamWaitEvent(s, outside) == RT_CAPTURE_DEPENDENCY
    assert "outside the capture" in err(acl)
    assert _capture_end(acl, s)[0] == RT_STREAM_CAPTURE_INVALIDATED

    # Its own events and never-recorded ones need no wait; the record runs at each execution.
    gate = Gate(acl, other.value)
    assert acl.aclmdlRICaptureBegin(s, MODE_GLOBAL) == SUCCESS
    assert acl.aclrtStreamWaitEvent(s, never) == SUCCESS
    assert acl.aclrtRecordEvent(inside, s) == SUCCESS
    assert acl.aclrtStreamWaitEvent(s, inside) == SUCCESS
    rc, model = _capture_end(acl, s)
    assert rc == SUCCESS, err(acl)
    assert acl.aclrtStreamWaitEvent(s, outside) == SUCCESS  # no capture: an ordinary wait
    status = ctypes.c_int(-1)
    # Behind the gate on `other`, the execution's record stays pending.
    done = ctypes.c_void_p()
    assert acl.aclrtCreateEvent(ctypes.byref(done)) == SUCCESS
    assert acl.aclrtRecordEvent(done, other) == SUCCESS
    assert acl.aclrtStreamWaitEvent(s, done) == SUCCESS
    assert acl.aclmdlRIExecuteAsync(model, s) == SUCCESS
    assert acl.aclrtQueryEventStatus(inside, ctypes.byref(status)) == SUCCESS
    assert status.value == EVENT_NOT_READY
    gate.release()
    assert acl.aclrtSynchronizeEvent(inside) == SUCCESS
    assert acl.aclrtQueryEventStatus(inside, ctypes.byref(status)) == SUCCESS
    assert status.value == EVENT_COMPLETE
    assert acl.aclmdlRIDestroy(model) == SUCCESS
    for e in (inside, outside, never, done):
        assert acl.aclrtDestroyEvent(e) == SUCCESS
    assert acl.aclrtSynchronizeStream(other) == SUCCESS
    assert acl.aclrtDestroyStream(other) == SUCCESS


def test_executing_on_a_capturing_stream_records_the_tasks(acl, mem, cap_stream):
    s = cap_stream
    d = mem.malloc(0, 8)
    mem.write(0, d, b"\0" * 8)
    assert acl.aclmdlRICaptureBegin(s, MODE_GLOBAL) == SUCCESS
    assert acl.aclrtMemsetAsync(d, 8, 5, 8, s) == SUCCESS
    inner = _capture_end(acl, s)[1]
    assert acl.aclmdlRICaptureBegin(s, MODE_GLOBAL) == SUCCESS
    assert acl.aclmdlRIExecuteAsync(inner, s) == SUCCESS
    rc, outer = _capture_end(acl, s)
    assert rc == SUCCESS
    assert mem.read(0, d, 8) == b"\0" * 8
    assert acl.aclmdlRIDestroy(inner) == SUCCESS  # the outer instance holds its own tasks
    assert acl.aclmdlRIExecuteAsync(outer, s) == SUCCESS
    assert acl.aclrtSynchronizeStream(s) == SUCCESS
    assert mem.read(0, d, 8) == b"\x05" * 8
    assert acl.aclmdlRIDestroy(outer) == SUCCESS
