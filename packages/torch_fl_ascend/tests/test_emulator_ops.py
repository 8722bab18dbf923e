"""The CANN emulator's op libraries (libnnopbase.so, libopapi.so) enforce the aclnn contract,
tested on the libraries themselves through ctypes (numpy for reference values; no torch, no
torch_fl):
the two-phase protocol, views against storage and allocations, device scoping, dtype support,
tensor-list limits, and that ops compute on strided views.

Everything is reached through one handle of libopapi.so, so the runtime functions are those of the
libascendcl.so it is linked with. The op libraries are built here (emulator/build) when the
installed ones are missing or older than the emulator's sources.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")

pytestmark = pytest.mark.ascend

EMULATOR = Path(__file__).resolve().parents[1] / "emulator"
EMULATOR_KIT = Path(__file__).resolve().parents[2] / "torch_fl_core" / "emulator_kit"
PREFIX = EMULATOR / "prefix"
BUILD = EMULATOR / "build"

SUCCESS, REPEAT_INITIALIZE = 0, 100002
PARAM_NULLPTR, PARAM_INVALID, RUNTIME_ERROR = 161001, 161002, 361001
RT_AICORE_EXCEPTION = 507015
H2D, D2H = 1, 2
CALLBACK_BLOCK = 1
FLOAT, FLOAT16, INT32, INT64, DOUBLE, BOOL, UINT8, BF16 = 0, 1, 3, 9, 11, 12, 4, 27
ND = 2


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
    """The directory holding libopapi.so and the libraries it links: the installed prefix when
    it is newer than the sources, else emulator/build after (re)building the three libraries."""
    named = _named_toolkit()
    if named is not None:
        return named / "lib64"
    installed = PREFIX / "lib64" / "libopapi.so"
    if installed.is_file() and installed.stat().st_mtime >= _sources_mtime():
        return installed.parent
    if shutil.which("cmake") is None:
        pytest.fail("cmake is needed to build the CANN emulator")
    args = []
    if not (BUILD / "CMakeCache.txt").is_file():
        args = ["-G", "Ninja"] if shutil.which("ninja") else []
        args += [f"-DCMAKE_INSTALL_PREFIX={PREFIX}", f"-DPython_EXECUTABLE={sys.executable}"]
    conf = _run(["cmake", "-S", str(EMULATOR), "-B", str(BUILD), *args])
    if conf.returncode != 0:
        pytest.fail("configuring the CANN emulator failed:\n" + conf.stdout + conf.stderr)
    targets = ["--target", "ascendcl", "nnopbase", "opapi"]
    built = _run(["cmake", "--build", str(BUILD), "-j2", *targets])
    if built.returncode != 0:
        pytest.fail("building the emulator's op libraries failed:\n" + built.stdout + built.stderr)
    return BUILD


vp, sz, i32, u64, i64 = (
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int32,
    ctypes.c_uint64,
    ctypes.c_int64,
)
P = ctypes.POINTER
WS = [P(u64), P(vp)]  # workspaceSize, executor
LAUNCH = [vp, u64, vp, vp]

SIGS = {
    "aclInit": ([ctypes.c_char_p], ctypes.c_int),
    "aclrtGetDeviceCount": ([P(ctypes.c_uint32)], ctypes.c_int),
    "aclrtSetDevice": ([i32], ctypes.c_int),
    "aclrtMalloc": ([P(vp), sz, ctypes.c_int], ctypes.c_int),
    "aclrtFree": ([vp], ctypes.c_int),
    "aclrtMemcpy": ([vp, sz, vp, sz, ctypes.c_int], ctypes.c_int),
    "aclrtCreateStream": ([P(vp)], ctypes.c_int),
    "aclrtDestroyStream": ([vp], ctypes.c_int),
    "aclrtSynchronizeStream": ([vp], ctypes.c_int),
    "aclrtSubscribeReport": ([ctypes.c_uint64, vp], ctypes.c_int),
    "aclrtUnSubscribeReport": ([ctypes.c_uint64, vp], ctypes.c_int),
    "aclrtLaunchCallback": ([vp, vp, ctypes.c_int, vp], ctypes.c_int),
    "aclrtProcessReport": ([i32], ctypes.c_int),
    "aclGetRecentErrMsg": ([], ctypes.c_char_p),
    "aclEmuInjectFault": ([ctypes.c_char_p, ctypes.c_int, ctypes.c_int], ctypes.c_int),
    "aclEmuCallCount": ([ctypes.c_char_p], ctypes.c_uint64),
    "aclEmuViolationCount": ([], ctypes.c_uint64),
    "aclEmuLastViolation": ([], ctypes.c_char_p),
    "aclEmuReset": ([], None),
    "aclCreateTensor": (
        [P(i64), u64, ctypes.c_int, P(i64), i64, ctypes.c_int, P(i64), u64, vp],
        vp,
    ),
    "aclCreateScalar": ([vp, ctypes.c_int], vp),
    "aclCreateIntArray": ([P(i64), u64], vp),
    "aclCreateTensorList": ([P(vp), u64], vp),
    "aclDestroyTensor": ([vp], ctypes.c_int),
    "aclDestroyScalar": ([vp], ctypes.c_int),
    "aclDestroyIntArray": ([vp], ctypes.c_int),
    "aclDestroyTensorList": ([vp], ctypes.c_int),
    "aclSetAclOpExecutorRepeatable": ([vp], ctypes.c_int),
    "aclDestroyAclOpExecutor": ([vp], ctypes.c_int),
    "aclnnAddGetWorkspaceSize": ([vp, vp, vp, vp, *WS], ctypes.c_int),
    "aclnnMulGetWorkspaceSize": ([vp, vp, vp, *WS], ctypes.c_int),
    "aclnnAbsGetWorkspaceSize": ([vp, vp, *WS], ctypes.c_int),
    "aclnnMmGetWorkspaceSize": ([vp, vp, vp, ctypes.c_int8, *WS], ctypes.c_int),
    "aclnnCatGetWorkspaceSize": ([vp, i64, vp, *WS], ctypes.c_int),
    "aclnnReduceSumGetWorkspaceSize": (
        [vp, vp, ctypes.c_bool, ctypes.c_int, vp, *WS],
        ctypes.c_int,
    ),
    "aclnnCastGetWorkspaceSize": ([vp, ctypes.c_int, vp, *WS], ctypes.c_int),
}
for _op in ("Add", "Mul", "Abs", "Mm", "Cat", "ReduceSum", "Cast"):
    SIGS[f"aclnn{_op}"] = (LAUNCH, ctypes.c_int)


@pytest.fixture(scope="session")
def lib():
    libdir = _build()
    handle = ctypes.CDLL(str(libdir / "libopapi.so"))
    for name, (args, res) in SIGS.items():
        fn = getattr(handle, name)
        fn.argtypes, fn.restype = args, res
    assert handle.aclInit(None) in (SUCCESS, REPEAT_INITIALIZE)
    handle.libdir = libdir
    return handle


@pytest.fixture(autouse=True)
def _clean(request):
    yield
    if "lib" in request.fixturenames:
        h = request.getfixturevalue("lib")
        h.aclEmuReset()
        h.aclGetRecentErrMsg()
        h.aclrtSetDevice(0)


def err(lib) -> str:
    return (lib.aclGetRecentErrMsg() or b"").decode()


def device_count(lib) -> int:
    n = ctypes.c_uint32()
    assert lib.aclrtGetDeviceCount(ctypes.byref(n)) == SUCCESS
    return n.value


def arr(values, ctype=i64):
    return (ctype * max(len(values), 1))(*values)


class Dev:
    """Device memory, aclnn objects and streams of one test, released at its end."""

    def __init__(self, lib):
        self.lib = lib
        self.allocs: list[tuple[int, int]] = []
        self.objs: list[tuple[str, int]] = []
        self.streams: list[int] = []

    def malloc(self, nbytes: int, device: int = 0) -> int:
        self.lib.aclrtSetDevice(device)
        p = ctypes.c_void_p()
        assert self.lib.aclrtMalloc(ctypes.byref(p), nbytes, 0) == SUCCESS, err(self.lib)
        self.allocs.append((device, p.value))
        self.lib.aclrtSetDevice(0)
        return p.value

    def upload(self, t: np.ndarray, device: int = 0) -> int:
        data = np.ascontiguousarray(t).tobytes()
        p = self.malloc(max(len(data), 1), device)
        self.lib.aclrtSetDevice(device)
        assert self.lib.aclrtMemcpy(p, len(data), data, len(data), H2D) == SUCCESS, err(self.lib)
        self.lib.aclrtSetDevice(0)
        return p

    def download(self, ptr: int, nbytes: int, device: int = 0) -> bytes:
        self.lib.aclrtSetDevice(device)
        buf = ctypes.create_string_buffer(nbytes)
        assert self.lib.aclrtMemcpy(buf, nbytes, ptr, nbytes, D2H) == SUCCESS, err(self.lib)
        self.lib.aclrtSetDevice(0)
        return buf.raw

    def tensor(self, ptr, shape, dtype=FLOAT, strides=None, offset=0, storage=None) -> int:
        if strides is None:
            strides, acc = [], 1
            for d in reversed(shape):
                strides.insert(0, acc)
                acc *= d
        if storage is None:
            storage = [offset + sum((d - 1) * s for d, s in zip(shape, strides, strict=True)) + 1]
        t = self.lib.aclCreateTensor(
            arr(shape), len(shape), dtype, arr(strides), offset, ND, arr(storage), len(storage), ptr
        )
        if t:
            self.objs.append(("aclDestroyTensor", t))
        return t

    def from_np(self, t: np.ndarray, dtype=FLOAT, device: int = 0) -> int:
        return self.tensor(self.upload(t, device), list(t.shape), dtype)

    def scalar(self, value, dtype=FLOAT) -> int:
        ctype = {FLOAT: ctypes.c_float, INT64: ctypes.c_int64, DOUBLE: ctypes.c_double}[dtype]
        v = ctype(value)
        s = self.lib.aclCreateScalar(ctypes.byref(v), dtype)
        self.objs.append(("aclDestroyScalar", s))
        return s

    def stream(self, device: int = 0) -> int:
        self.lib.aclrtSetDevice(device)
        s = ctypes.c_void_p()
        assert self.lib.aclrtCreateStream(ctypes.byref(s)) == SUCCESS, err(self.lib)
        self.streams.append(s.value)
        self.lib.aclrtSetDevice(0)
        return s.value

    def release(self) -> None:
        for s in self.streams:
            self.lib.aclrtSynchronizeStream(s)
            self.lib.aclrtDestroyStream(s)
        for fn, o in self.objs:
            getattr(self.lib, fn)(o)
        for device, p in self.allocs:
            self.lib.aclrtSetDevice(device)
            self.lib.aclrtFree(p)
        self.lib.aclrtSetDevice(0)


@pytest.fixture
def dev(lib):
    d = Dev(lib)
    yield d
    d.release()


def phase1(lib, op: str, *args):
    ws, ex = ctypes.c_uint64(123456789), ctypes.c_void_p()
    st = getattr(lib, f"aclnn{op}GetWorkspaceSize")(*args, ctypes.byref(ws), ctypes.byref(ex))
    return st, ws.value, ex.value


def run_op(lib, dev: Dev, op: str, *args, stream=None) -> None:
    st, ws, ex = phase1(lib, op, *args)
    assert st == SUCCESS, err(lib)
    wsp = dev.malloc(ws) if ws else None
    assert getattr(lib, f"aclnn{op}")(wsp, ws, ex, stream) == SUCCESS, err(lib)
    assert lib.aclrtSynchronizeStream(stream) == SUCCESS, err(lib)


def read_tensor(dev: Dev, ptr: int, shape, dtype=np.float32) -> np.ndarray:
    n = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    return np.frombuffer(dev.download(ptr, n), dtype=dtype).reshape(shape)


RNG = np.random.default_rng(0)


def close(actual, expected) -> None:
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class Gate:
    """Holds a stream at a blocking host callback until released, so work queued behind it is
    provably still pending."""

    def __init__(self, lib, stream):
        self.lib, self.stream = lib, stream
        self.tid = threading.get_ident()
        self.cb = CALLBACK(lambda _data: None)
        assert lib.aclrtSubscribeReport(self.tid, stream) == SUCCESS, err(lib)
        cbp = ctypes.cast(self.cb, ctypes.c_void_p)
        assert lib.aclrtLaunchCallback(cbp, None, CALLBACK_BLOCK, stream) == SUCCESS, err(lib)

    def release(self) -> None:
        assert self.lib.aclrtProcessReport(5000) == SUCCESS, err(self.lib)
        assert self.lib.aclrtUnSubscribeReport(self.tid, self.stream) == SUCCESS


# ------------------------------------------------------------------ headers vs exports


def test_every_declared_op_is_exported_in_pairs(lib):
    declared = set()
    for h in (EMULATOR / "include" / "aclnnop").glob("aclnn_*.h"):
        declared |= set(re.findall(r"\b(aclnn\w+)\(", h.read_text()))
    assert len(declared) >= 180
    nm = _run(["nm", "-D", "--defined-only", str(lib.libdir / "libopapi.so")])
    if nm.returncode != 0:
        pytest.skip("nm is not available")
    exported = {line.split()[-1] for line in nm.stdout.splitlines() if " T aclnn" in line}
    assert declared <= exported, sorted(declared - exported)
    for name in declared:
        pair = name[: -len("GetWorkspaceSize")] if name.endswith("GetWorkspaceSize") else name
        assert pair in declared and pair + "GetWorkspaceSize" in declared, name
    # Only the aclnn API leaves libopapi.so.
    assert all(n.startswith("aclnn") for n in exported)


# ------------------------------------------------------------------ computation


def test_add_on_a_strided_view_with_offset(lib, dev):
    base = np.arange(24, dtype=np.float32)
    ptr = dev.upload(base)
    # A transposed (3, 2) view starting 5 elements into a 24-element storage.
    view = np.lib.stride_tricks.as_strided(base[5:], (3, 2), (4, 16))
    self_t = dev.tensor(ptr, [3, 2], FLOAT, strides=[1, 4], offset=5, storage=[24])
    other = np.array([[10.0, 20.0]], dtype=np.float32)
    other_t = dev.from_np(other)
    out_ptr = dev.malloc(6 * 4)
    out_t = dev.tensor(out_ptr, [3, 2])
    run_op(lib, dev, "Add", self_t, other_t, dev.scalar(2.0), out_t)
    close(read_tensor(dev, out_ptr, (3, 2)), view + 2 * other)


def test_output_view_is_written_in_place_and_nothing_else(lib, dev):
    storage = np.full((4, 4), -1.0, dtype=np.float32)
    out_ptr = dev.upload(storage)
    x = RNG.standard_normal((2, 2), dtype=np.float32)
    # out = the centre 2x2 of the 4x4 storage.
    out_t = dev.tensor(out_ptr, [2, 2], FLOAT, strides=[4, 1], offset=5, storage=[16])
    run_op(lib, dev, "Abs", dev.from_np(x), out_t)
    expect = storage.copy()
    expect[1:3, 1:3] = np.abs(x)
    close(read_tensor(dev, out_ptr, (4, 4)), expect)


def test_rank0_tensors(lib, dev):
    a, b = np.float32(3.0), np.float32(-4.0)
    out_ptr = dev.malloc(4)
    out_t = dev.tensor(out_ptr, [], storage=[1])
    run_op(
        lib,
        dev,
        "Mul",
        dev.tensor(dev.upload(np.array(a)), [], storage=[1]),
        dev.tensor(dev.upload(np.array(b)), [], storage=[1]),
        out_t,
    )
    assert read_tensor(dev, out_ptr, ())[()] == -12.0


def test_mm_reduction_and_cast_compute(lib, dev):
    a = RNG.standard_normal((3, 5), dtype=np.float32)
    b = RNG.standard_normal((5, 2), dtype=np.float32)
    out_ptr = dev.malloc(6 * 4)
    run_op(lib, dev, "Mm", dev.from_np(a), dev.from_np(b), dev.tensor(out_ptr, [3, 2]), 0)
    close(read_tensor(dev, out_ptr, (3, 2)), a @ b)

    x = RNG.standard_normal((4, 3), dtype=np.float32)
    dims = lib.aclCreateIntArray(arr([0]), 1)
    sum_ptr = dev.malloc(3 * 4)
    run_op(lib, dev, "ReduceSum", dev.from_np(x), dims, False, FLOAT, dev.tensor(sum_ptr, [3]))
    lib.aclDestroyIntArray(dims)
    close(read_tensor(dev, sum_ptr, (3,)), x.sum(0))

    half_ptr = dev.malloc(12 * 2)
    run_op(lib, dev, "Cast", dev.from_np(x), FLOAT16, dev.tensor(half_ptr, [4, 3], FLOAT16))
    close(read_tensor(dev, half_ptr, (4, 3), np.float16), x.astype(np.float16))


def test_cat_of_fifty_tensors_works(lib, dev):
    parts = [np.full((1, 2), float(i), dtype=np.float32) for i in range(50)]
    handles = [dev.from_np(p) for p in parts]
    # The list owns its tensors: drop them from the per-test cleanup.
    dev.objs = [o for o in dev.objs if o[1] not in handles]
    lst = lib.aclCreateTensorList((vp * 50)(*handles), 50)
    dev.objs.append(("aclDestroyTensorList", lst))
    out_ptr = dev.malloc(100 * 4)
    run_op(lib, dev, "Cat", lst, 0, dev.tensor(out_ptr, [50, 2]))
    close(read_tensor(dev, out_ptr, (50, 2)), np.concatenate(parts))


# ------------------------------------------------------------------ enforcement


def test_null_pointers_are_161001(lib, dev):
    x = dev.from_np(np.ones(2, dtype=np.float32))
    st, _, _ = phase1(lib, "Abs", x, None)
    assert st == PARAM_NULLPTR
    msg = err(lib)
    assert "aclnnAbs" in msg and "out is NULL" in msg
    ex = ctypes.c_void_p()
    assert lib.aclnnAbsGetWorkspaceSize(x, x, None, ctypes.byref(ex)) == PARAM_NULLPTR
    assert lib.aclnnAbs(None, 0, None, None) == PARAM_NULLPTR


def test_unsupported_dtype_is_161002_naming_op_and_dtype(lib, dev):
    a = dev.from_np(np.ones((2, 2), dtype=np.float64), DOUBLE)
    out = dev.tensor(dev.malloc(32), [2, 2], DOUBLE)
    st, _, _ = phase1(lib, "Mm", a, a, out, 0)
    assert st == PARAM_INVALID
    msg = err(lib)
    assert "aclnnMm" in msg and "DOUBLE" in msg
    # Integer matmul is not supported either; integer add is.
    i = dev.from_np(np.ones((2, 2), dtype=np.int32), INT32)
    assert phase1(lib, "Mm", i, i, i, 0)[0] == PARAM_INVALID
    assert "INT32" in err(lib)
    st, _, ex = phase1(lib, "Add", i, i, dev.scalar(1, INT64), i)
    assert st == SUCCESS, err(lib)
    lib.aclDestroyAclOpExecutor(ex)


def test_shape_mismatch_is_161002(lib, dev):
    a = dev.from_np(np.ones((2, 3), dtype=np.float32))
    b = dev.from_np(np.ones((4, 3), dtype=np.float32))
    out = dev.tensor(dev.malloc(24), [2, 3])
    assert phase1(lib, "Mm", a, b, out, 0)[0] == PARAM_INVALID
    assert "aclnnMm" in err(lib)
    wrong_out = dev.tensor(dev.malloc(64), [4, 4])
    assert phase1(lib, "Add", a, a, dev.scalar(1.0), wrong_out)[0] == PARAM_INVALID


def test_view_outside_its_storage_or_allocation_is_rejected(lib, dev):
    ptr = dev.malloc(16 * 4)
    # A 4x4 view with row stride 5 reaches element 18 of a 16-element storage.
    assert dev.tensor(ptr, [4, 4], FLOAT, strides=[5, 1], storage=[16]) is None
    assert "storage" in err(lib)
    # Storage claimed larger than the allocation: the op sees it is not inside one allocation.
    big = dev.tensor(ptr, [32], FLOAT, storage=[32])
    out = dev.tensor(dev.malloc(32 * 4), [32])
    assert phase1(lib, "Abs", big, out)[0] == PARAM_INVALID
    assert "allocation" in err(lib)
    # Host memory is no device memory.
    host = ctypes.create_string_buffer(64)
    host_t = dev.tensor(ctypes.addressof(host), [16], FLOAT, storage=[16])
    assert phase1(lib, "Abs", host_t, out)[0] == PARAM_INVALID


def test_tensor_of_another_device_is_rejected(lib, dev):
    if device_count(lib) < 2:
        pytest.skip("needs 2 emulated NPUs")
    x1 = dev.from_np(np.ones(4, dtype=np.float32), device=1)
    out0 = dev.tensor(dev.malloc(16), [4])
    lib.aclrtSetDevice(0)
    assert phase1(lib, "Abs", x1, out0)[0] == PARAM_INVALID
    assert "device 1" in err(lib)


def test_list_of_51_tensors_is_rejected(lib, dev):
    handles = [dev.from_np(np.ones(1, dtype=np.float32)) for _ in range(51)]
    dev.objs = [o for o in dev.objs if o[1] not in handles]
    lst = lib.aclCreateTensorList((vp * 51)(*handles), 51)
    dev.objs.append(("aclDestroyTensorList", lst))
    out = dev.tensor(dev.malloc(51 * 4), [51])
    assert phase1(lib, "Cat", lst, 0, out)[0] == PARAM_INVALID
    msg = err(lib)
    assert "51" in msg and "50" in msg


def _mm(lib, dev):
    a = dev.from_np(np.eye(4, dtype=np.float32))
    out_ptr = dev.malloc(64)
    st, ws, ex = phase1(lib, "Mm", a, a, dev.tensor(out_ptr, [4, 4]), 0)
    assert st == SUCCESS, err(lib)
    assert ws > 0  # matmul asks for a workspace, so callers exercise the protocol
    return ws, ex, out_ptr


def test_executor_runs_once(lib, dev):
    ws, ex, _ = _mm(lib, dev)
    w = dev.malloc(ws)
    assert lib.aclnnMm(w, ws, ex, None) == SUCCESS, err(lib)
    assert lib.aclnnMm(w, ws, ex, None) == PARAM_INVALID
    assert "already launched" in err(lib)
    assert lib.aclrtSynchronizeStream(None) == SUCCESS


def test_executor_of_another_op_is_rejected(lib, dev):
    ws, ex, _ = _mm(lib, dev)
    assert lib.aclnnAdd(None, 0, ex, None) == PARAM_INVALID
    assert "aclnnMm" in err(lib)
    assert lib.aclDestroyAclOpExecutor(ex) == SUCCESS


def test_repeatable_executor_runs_until_destroyed(lib, dev):
    ws, ex, _ = _mm(lib, dev)
    w = dev.malloc(ws)
    assert lib.aclSetAclOpExecutorRepeatable(ex) == SUCCESS
    for _ in range(3):
        assert lib.aclnnMm(w, ws, ex, None) == SUCCESS, err(lib)
    assert lib.aclrtSynchronizeStream(None) == SUCCESS
    assert lib.aclDestroyAclOpExecutor(ex) == SUCCESS
    assert lib.aclnnMm(w, ws, ex, None) == PARAM_INVALID


def test_workspace_must_be_large_enough_and_on_the_streams_device(lib, dev):
    ws, ex, _ = _mm(lib, dev)
    assert lib.aclnnMm(dev.malloc(ws), ws - 1, ex, None) == PARAM_INVALID
    assert "workspaceSize" in err(lib)
    assert lib.aclnnMm(None, ws, ex, None) == PARAM_NULLPTR
    host = ctypes.create_string_buffer(ws)
    assert lib.aclnnMm(ctypes.addressof(host), ws, ex, None) == PARAM_INVALID
    if device_count(lib) >= 2:
        assert lib.aclnnMm(dev.malloc(ws, device=1), ws, ex, None) == PARAM_INVALID
        assert "device 1" in err(lib)
    # The executor survives rejected launches.
    assert lib.aclnnMm(dev.malloc(ws), ws, ex, None) == SUCCESS, err(lib)
    assert lib.aclrtSynchronizeStream(None) == SUCCESS


def test_op_runs_asynchronously_on_its_stream(lib, dev):
    x = RNG.standard_normal(8, dtype=np.float32)
    out_ptr = dev.upload(np.zeros(8, dtype=np.float32))
    s = dev.stream()
    gate = Gate(lib, s)
    st, ws, ex = phase1(lib, "Abs", dev.from_np(x), dev.tensor(out_ptr, [8]))
    assert st == SUCCESS, err(lib)
    assert lib.aclnnAbs(None, ws, ex, s) == SUCCESS, err(lib)
    assert not read_tensor(dev, out_ptr, (8,)).any()  # queued behind the gate
    gate.release()
    assert lib.aclrtSynchronizeStream(s) == SUCCESS, err(lib)
    close(read_tensor(dev, out_ptr, (8,)), np.abs(x))


def test_workspace_freed_before_the_stream_passes_it_is_a_violation(lib, dev):
    ws, ex, out_ptr = _mm(lib, dev)
    s = dev.stream()
    gate = Gate(lib, s)
    w = ctypes.c_void_p()
    assert lib.aclrtMalloc(ctypes.byref(w), ws, 0) == SUCCESS
    assert lib.aclnnMm(w.value, ws, ex, s) == SUCCESS, err(lib)
    before = lib.aclEmuViolationCount()
    assert lib.aclrtFree(w.value) == SUCCESS  # too early: the op has not run
    assert lib.aclEmuViolationCount() == before + 1
    gate.release()
    assert lib.aclrtSynchronizeStream(s) == RT_AICORE_EXCEPTION
    assert "aclnnMm" in err(lib)
    assert lib.aclrtSynchronizeStream(s) == SUCCESS


def test_fault_injection_reaches_the_ops(lib, dev):
    x = dev.from_np(np.ones(2, dtype=np.float32))
    assert lib.aclEmuInjectFault(b"aclnnAbsGetWorkspaceSize", 1, RUNTIME_ERROR) == 0
    assert phase1(lib, "Abs", x, x)[0] == RUNTIME_ERROR
    st, ws, ex = phase1(lib, "Abs", x, x)
    assert st == SUCCESS
    assert lib.aclEmuInjectFault(b"aclnnAbs", 1, RUNTIME_ERROR) == 0
    assert lib.aclnnAbs(None, ws, ex, None) == RUNTIME_ERROR
    assert lib.aclnnAbs(None, ws, ex, None) == SUCCESS, err(lib)
    assert lib.aclrtSynchronizeStream(None) == SUCCESS
    assert lib.aclEmuCallCount(b"aclnnAbsGetWorkspaceSize") == 2


def test_omitted_ops_are_not_exported(tmp_path):
    """ASCEND_EMU_OMIT leaves both entry points of an op out of libopapi.so (configure only: the
    version script is what the link uses)."""
    conf = _run(
        [
            "cmake",
            "-S",
            str(EMULATOR),
            "-B",
            str(tmp_path),
            "-DASCEND_EMU_OMIT=aclnnAbs;aclnnMm",
            f"-DPython_EXECUTABLE={sys.executable}",
        ]
    )
    assert conf.returncode == 0, conf.stdout + conf.stderr
    script = (tmp_path / "opapi.map").read_text()
    local = script.split("local:")[1]
    for sym in ("aclnnAbs;", "aclnnAbsGetWorkspaceSize;", "aclnnMm;", "aclnnMmGetWorkspaceSize;"):
        assert sym in local
    assert "aclnn*;" in script.split("local:")[0]
