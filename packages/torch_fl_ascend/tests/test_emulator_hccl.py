"""The CANN emulator's HCCL (libhccl.so) enforces HCCL's contract, tested on the library itself
through ctypes in separate processes (no torch, no torch_fl): ranks exchange data for real, a
count that differs between ranks fails every rank naming the one that differs, a rank that never
joins is HCCL_E_TIMEOUT within HCCL_EXEC_TIMEOUT, and a buffer or stream of another device, or a
type HCCL does not reduce, is refused at the call.
"""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest
from torch_fl.testing import run_rank_scripts

pytestmark = pytest.mark.ascend

PREFIX = Path(__file__).resolve().parents[1] / "emulator" / "prefix"
HCCL_SUCCESS, HCCL_E_PARA, HCCL_E_PTR, HCCL_E_NOT_SUPPORT, HCCL_E_TIMEOUT = 0, 1, 2, 5, 9
FP32, FP64 = 4, 10

RANK = textwrap.dedent(
    """
    import ctypes, json, os, sys, time
    from ctypes import POINTER, byref, c_char_p, c_float, c_int, c_uint32, c_uint64, c_void_p

    lib64, scenario, rank, world, idfile = sys.argv[1:6]
    rank, world = int(rank), int(world)
    acl = ctypes.CDLL(lib64 + "/libascendcl.so", mode=ctypes.RTLD_GLOBAL)
    hccl = ctypes.CDLL(lib64 + "/libhccl.so")
    acl.aclGetRecentErrMsg.restype = c_char_p
    acl.aclrtMalloc.argtypes = [POINTER(c_void_p), ctypes.c_size_t, c_int]
    acl.aclrtMemcpy.argtypes = [c_void_p, ctypes.c_size_t, c_void_p, ctypes.c_size_t, c_int]
    hccl.HcclCommInitRootInfo.argtypes = [c_uint32, c_void_p, c_uint32, POINTER(c_void_p)]
    hccl.HcclAllReduce.argtypes = [c_void_p, c_void_p, c_uint64, c_int, c_int, c_void_p, c_void_p]
    hccl.HcclGetCommAsyncError.argtypes = [c_void_p, POINTER(c_int)]
    out = {"rank": rank}

    def message():
        text = acl.aclGetRecentErrMsg()
        return text.decode() if text else ""

    assert acl.aclInit(None) == 0
    assert acl.aclrtSetDevice(0) == 0
    root = ctypes.create_string_buffer(4108)
    if rank == 0:
        assert hccl.HcclGetRootInfo(root) == 0
        with open(idfile + ".tmp", "wb") as f:
            f.write(root.raw)
        os.rename(idfile + ".tmp", idfile)
    else:
        while not os.path.exists(idfile):
            time.sleep(0.01)
        ctypes.memmove(root, open(idfile, "rb").read(), 4108)
    if scenario == "never_joins" and rank == 1:
        print(json.dumps(out))
        sys.exit(0)
    comm = c_void_p()
    start = time.monotonic()
    out["init"] = hccl.HcclCommInitRootInfo(world, root, rank, byref(comm))
    out["init_s"] = time.monotonic() - start
    if out["init"] != 0:
        out["msg"] = message()
        print(json.dumps(out))
        sys.exit(0)
    stream = c_void_p()
    assert acl.aclrtCreateStream(byref(stream)) == 0
    n = 999 if scenario == "mismatch" and rank == 1 else 1000
    dtype = 10 if scenario == "fp64" else 4
    size = 8 if dtype == 10 else 4
    buf = c_void_p()
    if scenario == "other_device_buffer":
        assert acl.aclrtSetDevice(1) == 0
    assert acl.aclrtMalloc(byref(buf), n * size, 0) == 0
    if scenario == "other_device_stream":
        assert acl.aclrtSetDevice(1) == 0
        assert acl.aclrtCreateStream(byref(stream)) == 0
    assert acl.aclrtSetDevice(0) == 0
    host = (c_float * n)(*([float(rank + 1)] * n))
    if dtype == 4 and scenario != "other_device_buffer":
        assert acl.aclrtMemcpy(buf, n * 4, host, n * 4, 1) == 0
    out["call"] = hccl.HcclAllReduce(buf, buf, n, dtype, 0, comm, stream)
    if out["call"] != 0:
        out["msg"] = message()
        print(json.dumps(out))
        sys.exit(0)
    acl.aclrtSynchronizeStream(stream)
    err = c_int(0)
    assert hccl.HcclGetCommAsyncError(comm, byref(err)) == 0
    out["async"] = err.value
    if err.value:
        out["msg"] = message()
    else:
        assert acl.aclrtMemcpy(host, n * 4, buf, n * 4, 2) == 0
        out["first"], out["last"] = host[0], host[n - 1]
    print(json.dumps(out))
    """
)


def _ranks(tmp_path: Path, scenario: str, world: int, timeout_s: int = 30) -> list[dict]:
    lib = PREFIX / "lib64"
    if not (lib / "libhccl.so").is_file():
        pytest.fail(
            f"{lib / 'libhccl.so'} is missing: build the CANN emulator (nox -s build-ascend)"
        )
    idfile = str(tmp_path / "root")
    return run_rank_scripts(
        RANK,
        world,
        lambda r: [str(lib), scenario, str(r), str(world), idfile],
        env={"HCCL_EXEC_TIMEOUT": str(timeout_s), "ASCEND_EMU_DEVICES": "2"},
    )


def test_two_ranks_reduce_for_real(tmp_path):
    for out in _ranks(tmp_path, "allreduce", 2):
        assert out["init"] == HCCL_SUCCESS and out["call"] == HCCL_SUCCESS and out["async"] == 0
        assert out["first"] == out["last"] == 3.0, out


def test_a_count_that_differs_fails_every_rank_naming_it(tmp_path):
    for out in _ranks(tmp_path, "mismatch", 2):
        assert out["call"] == HCCL_SUCCESS  # queued: the ranks compare when it runs
        assert out["async"] != HCCL_SUCCESS, out
        assert "rank 1 called all_reduce(count 999" in out["msg"], out


def test_a_rank_that_never_joins_times_out(tmp_path):
    start = time.monotonic()
    out = _ranks(tmp_path, "never_joins", 2, timeout_s=2)[0]
    assert out["init"] == HCCL_E_TIMEOUT, out
    assert "rank(s) 1 never joined" in out["msg"], out
    assert 1.5 < out["init_s"] < 20 and time.monotonic() - start < 40, out


@pytest.mark.parametrize(
    "scenario, code, words",
    [
        ("other_device_buffer", HCCL_E_PTR, "device 1"),
        ("other_device_stream", HCCL_E_PARA, "device 1"),
        ("fp64", HCCL_E_NOT_SUPPORT, "fp64"),
    ],
)
def test_refused_at_the_call(tmp_path, scenario, code, words):
    (out,) = _ranks(tmp_path, scenario, 1)
    assert out["call"] == code, out
    assert "HcclAllReduce" in out["msg"] and words in out["msg"], out
