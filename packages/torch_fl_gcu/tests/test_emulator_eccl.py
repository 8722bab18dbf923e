"""The TopsRider emulator's ECCL (libeccl.so) enforces ECCL's contract, tested on the library
itself through ctypes in separate processes (no torch, no torch_fl): ranks exchange data for
real, a count that differs between ranks fails every rank naming the one that differs, a rank
that never joins fails the others within the timeout, and a buffer or stream of another card, a
64-bit reduction, a group of two kinds of operation and a second rank on one card are refused
at the call.
"""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest
from torch_fl.testing import run_rank_scripts

pytestmark = pytest.mark.gcu

PREFIX = Path(__file__).resolve().parents[1] / "emulator" / "prefix"
SUCCESS, INVALID_ARGUMENT, INVALID_USAGE, REMOTE_ERROR = 0, 4, 5, 6

RANK = textwrap.dedent(
    """
    import ctypes, json, os, sys, threading, time
    from ctypes import POINTER, byref, c_char_p, c_float, c_int, c_size_t, c_void_p

    lib, scenario, rank, world, idfile = sys.argv[1:6]
    rank, world = int(rank), int(world)
    rt = ctypes.CDLL(lib + "/libtopsrt.so", mode=ctypes.RTLD_GLOBAL)
    eccl = ctypes.CDLL(lib + "/libeccl.so")
    rt.topsMalloc.argtypes = [POINTER(c_void_p), c_size_t]
    rt.topsMemcpy.argtypes = [c_void_p, c_void_p, c_size_t, c_int]
    rt.topsStreamCreate.argtypes = [POINTER(c_void_p)]
    class Id(ctypes.Structure):  # passed by value, as ecclUniqueId is
        _fields_ = [("internal", ctypes.c_char * 128)]
    eccl.ecclCommInitRank.argtypes = [POINTER(c_void_p), c_int, Id, c_int]
    eccl.ecclGetLastError.restype = c_char_p
    eccl.ecclGetLastError.argtypes = [c_void_p]
    args7 = [c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p]
    eccl.ecclAllReduce.argtypes = args7
    eccl.ecclBroadcast.argtypes = args7
    eccl.ecclSend.argtypes = [c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p]
    eccl.ecclCommGetAsyncError.argtypes = [c_void_p, POINTER(c_int)]
    out = {"rank": rank}

    def message(comm=None):
        text = eccl.ecclGetLastError(comm)
        return text.decode() if text else ""

    uid = Id()
    if rank == 0:
        assert eccl.ecclGetUniqueId(byref(uid)) == 0
        with open(idfile + ".tmp", "wb") as f:
            f.write(bytes(uid))
        os.rename(idfile + ".tmp", idfile)
    else:
        while not os.path.exists(idfile):
            time.sleep(0.01)
        ctypes.memmove(byref(uid), open(idfile, "rb").read(), 128)
    if scenario == "never_joins" and rank == 1:
        print(json.dumps(out))
        sys.exit(0)
    assert rt.topsSetDevice(0) == 0
    comm = c_void_p()
    if scenario == "two_ranks_one_card":
        # Rank 0 on card 0 in a thread; rank 1 tries card 0 too, then joins from card 1.
        ranks = {}
        def rank0():
            rt.topsSetDevice(0)
            c = c_void_p()
            ranks[0] = eccl.ecclCommInitRank(byref(c), 2, uid, 0)
        rt.topsEmuCallCount.argtypes = [c_char_p]
        rt.topsEmuCallCount.restype = ctypes.c_uint64
        t = threading.Thread(target=rank0)
        t.start()
        # Rank 0 is inside ecclCommInitRank (counted on entry; it claims its card right after).
        deadline = time.monotonic() + 30
        while rt.topsEmuCallCount(b"ecclCommInitRank") < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)
        out["same_card"] = eccl.ecclCommInitRank(byref(comm), 2, uid, 1)
        out["msg"] = message()
        assert rt.topsSetDevice(1) == 0
        out["other_card"] = eccl.ecclCommInitRank(byref(comm), 2, uid, 1)
        t.join()
        out["rank0"] = ranks[0]
        print(json.dumps(out))
        sys.exit(0)
    start = time.monotonic()
    out["init"] = eccl.ecclCommInitRank(byref(comm), world, uid, rank)
    out["init_s"] = time.monotonic() - start
    if out["init"] != 0:
        out["msg"] = message()
        print(json.dumps(out))
        sys.exit(0)
    stream = c_void_p()
    if scenario == "other_card_stream":
        assert rt.topsSetDevice(1) == 0
    assert rt.topsStreamCreate(byref(stream)) == 0
    assert rt.topsSetDevice(0) == 0
    n = 999 if scenario == "mismatch" and rank == 1 else 1000
    dtype = {"int64": 4, "float64": 8}.get(scenario, 7)
    buf = c_void_p()
    if scenario == "other_card_buffer":
        assert rt.topsSetDevice(1) == 0
    assert rt.topsMalloc(byref(buf), n * 8) == 0
    assert rt.topsSetDevice(0) == 0
    host = (c_float * n)(*([float(rank + 1)] * n))
    if scenario != "other_card_buffer":
        assert rt.topsMemcpy(buf, host, n * 4, 1) == 0
    if scenario == "mixed_group":
        assert eccl.ecclGroupStart() == 0
        assert eccl.ecclAllReduce(buf, buf, n, 7, 0, comm, stream) == 0
        assert eccl.ecclSend(buf, n, 7, 0, comm, stream) == 0
        out["call"] = eccl.ecclGroupEnd()
        out["msg"] = message()
        print(json.dumps(out))
        sys.exit(0)
    if scenario == "int64":
        out["broadcast"] = eccl.ecclBroadcast(buf, buf, n, dtype, 0, comm, stream)
    out["call"] = eccl.ecclAllReduce(buf, buf, n, dtype, 0, comm, stream)
    if out["call"] != 0:
        out["msg"] = message()
        print(json.dumps(out))
        sys.exit(0)
    rt.topsStreamSynchronize(stream)
    err = c_int(0)
    assert eccl.ecclCommGetAsyncError(comm, byref(err)) == 0
    out["async"] = err.value
    if err.value:
        out["msg"] = message(comm)
    else:
        assert rt.topsMemcpy(host, buf, n * 4, 2) == 0
        out["first"], out["last"] = host[0], host[n - 1]
    print(json.dumps(out))
    """
)


def _ranks(tmp_path: Path, scenario: str, world: int, timeout_s: int = 30) -> list[dict]:
    lib = PREFIX / "lib"
    if not (lib / "libeccl.so").is_file():
        pytest.fail(
            f"{lib / 'libeccl.so'} is missing: build the TopsRider emulator (nox -s build-gcu)"
        )
    idfile = str(tmp_path / "uid")
    return run_rank_scripts(
        RANK,
        world,
        lambda r: [str(lib), scenario, str(r), str(world), idfile],
        env={"TOPS_EMU_ECCL_TIMEOUT": str(timeout_s), "TOPS_EMU_DEVICE_COUNT": "2"},
    )


def test_two_ranks_reduce_for_real(tmp_path):
    for out in _ranks(tmp_path, "allreduce", 2):
        assert out["init"] == SUCCESS and out["call"] == SUCCESS and out["async"] == 0, out
        assert out["first"] == out["last"] == 3.0, out


def test_a_count_that_differs_fails_every_rank_naming_it(tmp_path):
    for out in _ranks(tmp_path, "mismatch", 2):
        assert out["call"] == SUCCESS  # enqueued: the ranks compare when it runs
        assert out["async"] == INVALID_ARGUMENT, out
        assert "rank 1 called all_reduce(count 999" in out["msg"], out


def test_a_rank_that_never_joins_times_out(tmp_path):
    start = time.monotonic()
    out = _ranks(tmp_path, "never_joins", 2, timeout_s=2)[0]
    assert out["init"] == REMOTE_ERROR, out
    assert "rank(s) 1 never joined" in out["msg"], out
    assert 1.5 < out["init_s"] < 20 and time.monotonic() - start < 40, out


def test_one_rank_per_card_and_ranks_as_threads(tmp_path):
    (out,) = _ranks(tmp_path, "two_ranks_one_card", 1)
    assert out["same_card"] == INVALID_USAGE and "GCU 0 already holds a rank" in out["msg"], out
    assert out["other_card"] == SUCCESS and out["rank0"] == SUCCESS, out


@pytest.mark.parametrize(
    "scenario, code, words",
    [
        ("other_card_buffer", INVALID_ARGUMENT, "not inside one live allocation of GCU 0"),
        ("other_card_stream", INVALID_ARGUMENT, "the stream is on GCU 1"),
        ("float64", INVALID_ARGUMENT, "only ecclBroadcast and ecclAllGather take 64-bit types"),
        ("mixed_group", INVALID_USAGE, "a group aggregates one kind of operation"),
    ],
)
def test_refused_at_the_call(tmp_path, scenario, code, words):
    (out,) = _ranks(tmp_path, scenario, 1)
    assert out["call"] == code, out
    assert words in out["msg"], out


def test_64bit_types_move_in_broadcast(tmp_path):
    (out,) = _ranks(tmp_path, "int64", 1)
    assert out["broadcast"] == SUCCESS and out["call"] == INVALID_ARGUMENT, out
    assert "int64 data" in out["msg"], out
