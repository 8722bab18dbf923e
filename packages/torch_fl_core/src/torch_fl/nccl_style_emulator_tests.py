"""The tests every SDK emulator's NCCL-style collective library passes (the emulator kit's
``emu_kit/nccl_style.h`` under the SDK's names: the TopsRider emulator's ECCL, the MUSA
emulator's MCCL): one suite, each vendor naming its dialect.

The library is tested by itself through ctypes in separate processes (no torch, no torch_fl):
ranks exchange data for real, a count that differs between ranks fails every rank naming the one
that differs, a rank that never joins fails the others within the timeout, a second rank on one
device and another device's buffer or stream are refused at the call, and 64-bit types and
groups mixing kinds of operation work or are refused as the dialect says.

A vendor's ``tests/test_emulator_<library>.py``::

    from torch_fl.nccl_style_emulator_tests import *  # noqa: F403  (the shared tests)

    @pytest.fixture(scope="session")
    def ccl():
        return CclDialect(PREFIX, "musa", runtime="musa", library="mccl", device="MUSA GPU", ...)

:func:`run_ranks` runs a scenario of :data:`RANK` for a vendor's own tests.
"""

from __future__ import annotations

import dataclasses
import json
import textwrap
import time
from pathlib import Path

import pytest

from torch_fl.testing import run_rank_scripts

__all__ = [
    "CclDialect",
    "run_ranks",
    "test_64bit_types_move_and_reduce_as_the_library_says",
    "test_a_count_that_differs_fails_every_rank_naming_it",
    "test_a_rank_that_never_joins_times_out",
    "test_another_devices_buffer_or_stream_is_refused_at_the_call",
    "test_groups_mixing_kinds_run_or_are_refused_as_the_library_says",
    "test_one_rank_per_device_and_ranks_as_threads",
    "test_two_ranks_reduce_for_real",
]

SUCCESS, INVALID_ARGUMENT, INVALID_USAGE, REMOTE_ERROR = 0, 4, 5, 6


@dataclasses.dataclass(frozen=True)
class CclDialect:
    """What a vendor's emulated NCCL-style library is called and what it takes. The emulator's
    libraries and settings follow the kit's names: ``lib<runtime>rt.so``, ``lib<library>.so``,
    ``<RUNTIME>_EMU_DEVICE_COUNT``, ``<RUNTIME>_EMU_<LIBRARY>_TIMEOUT``."""

    prefix: Path  # the emulator's install tree (lib/ holds both libraries)
    vendor: str  # "gcu": how to build it (nox -s build-gcu)
    runtime: str  # the runtime's prefix: "tops" (libtopsrt.so, topsMalloc, topsEmuCallCount)
    library: str  # the collective library's prefix: "eccl" (libeccl.so, ecclAllReduce, ...)
    device: str  # how its messages name a device: "GCU"
    reduces_64bit: bool  # False: 64-bit types in broadcast and all-gather only
    mixed_groups: bool  # False: a group aggregates one kind of operation

    @property
    def lib(self) -> Path:
        return self.prefix / "lib"

    @property
    def timeout_env(self) -> str:
        return f"{self.runtime.upper()}_EMU_{self.library.upper()}_TIMEOUT"

    @property
    def device_count_env(self) -> str:
        return f"{self.runtime.upper()}_EMU_DEVICE_COUNT"


RANK = textwrap.dedent(
    """
    import ctypes, json, os, sys, threading, time
    from ctypes import POINTER, byref, c_char_p, c_int, c_size_t, c_void_p

    cfg, scenario, rank, world, idfile = json.loads(sys.argv[1]), *sys.argv[2:6]
    rank, world = int(rank), int(world)
    rt = ctypes.CDLL(cfg["lib"] + "/lib" + cfg["runtime"] + "rt.so", mode=ctypes.RTLD_GLOBAL)
    ccl = ctypes.CDLL(cfg["lib"] + "/lib" + cfg["library"] + ".so")

    def R(name):
        return getattr(rt, cfg["runtime"] + name)

    def C(name):
        return getattr(ccl, cfg["library"] + name)

    R("Malloc").argtypes = [POINTER(c_void_p), c_size_t]
    R("Memcpy").argtypes = [c_void_p, c_void_p, c_size_t, c_int]
    R("StreamCreate").argtypes = [POINTER(c_void_p)]
    R("StreamSynchronize").argtypes = [c_void_p]
    R("StreamQuery").argtypes = [c_void_p]
    R("EmuCallCount").argtypes = [c_char_p]
    R("EmuCallCount").restype = ctypes.c_uint64
    class Id(ctypes.Structure):  # passed by value, as the library's unique id is
        _fields_ = [("internal", ctypes.c_char * 128)]
    C("CommInitRank").argtypes = [POINTER(c_void_p), c_int, Id, c_int]
    C("GetLastError").restype = c_char_p
    C("GetLastError").argtypes = [c_void_p]
    args7 = [c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p]
    C("AllReduce").argtypes = args7
    C("Broadcast").argtypes = args7
    C("Send").argtypes = [c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p]
    C("Recv").argtypes = [c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p]
    C("CommGetAsyncError").argtypes = [c_void_p, POINTER(c_int)]
    out = {"rank": rank}

    def message(comm=None):
        text = C("GetLastError")(comm)
        return text.decode() if text else ""

    def report():
        print(json.dumps(out))
        sys.exit(0)

    uid = Id()
    if rank == 0:
        assert C("GetUniqueId")(byref(uid)) == 0
        with open(idfile + ".tmp", "wb") as f:
            f.write(bytes(uid))
        os.rename(idfile + ".tmp", idfile)
    else:
        while not os.path.exists(idfile):
            time.sleep(0.01)
        ctypes.memmove(byref(uid), open(idfile, "rb").read(), 128)
    if scenario == "never_joins" and rank == 1:
        report()
    assert R("SetDevice")(0) == 0
    comm = c_void_p()
    if scenario == "two_ranks_one_device":
        # Rank 0 on device 0 in a thread; rank 1 tries device 0 too, then joins from device 1.
        ranks = {}
        def rank0():
            R("SetDevice")(0)
            c = c_void_p()
            ranks[0] = C("CommInitRank")(byref(c), 2, uid, 0)
        t = threading.Thread(target=rank0)
        t.start()
        # Rank 0 is inside CommInitRank (counted on entry; it claims its device right after).
        name = (cfg["library"] + "CommInitRank").encode()
        deadline = time.monotonic() + 30
        while R("EmuCallCount")(name) < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)
        out["same_device"] = C("CommInitRank")(byref(comm), 2, uid, 1)
        out["msg"] = message()
        assert R("SetDevice")(1) == 0
        out["other_device"] = C("CommInitRank")(byref(comm), 2, uid, 1)
        t.join()
        out["rank0"] = ranks[0]
        report()
    start = time.monotonic()
    out["init"] = C("CommInitRank")(byref(comm), world, uid, rank)
    out["init_s"] = time.monotonic() - start
    if out["init"] != 0:
        out["msg"] = message()
        report()
    stream = c_void_p()
    if scenario == "other_device_stream":
        assert R("SetDevice")(1) == 0
    assert R("StreamCreate")(byref(stream)) == 0
    assert R("SetDevice")(0) == 0
    n = 999 if scenario == "mismatch" and rank == 1 else 1000
    dtype = {"int64": 4, "float64": 8}.get(scenario, 7)
    ctype = {4: ctypes.c_int64, 7: ctypes.c_float, 8: ctypes.c_double}[dtype]
    size = ctypes.sizeof(ctype)

    def device_buffer(value, device=0):
        buf = c_void_p()
        assert R("SetDevice")(device) == 0
        assert R("Malloc")(byref(buf), n * size) == 0
        assert R("SetDevice")(0) == 0
        if device == 0:
            host = (ctype * n)(*([ctype(value).value] * n))
            assert R("Memcpy")(buf, host, n * size, 1) == 0
        return buf

    def read(buf):
        host = (ctype * n)()
        assert R("Memcpy")(host, buf, n * size, 2) == 0
        return [host[0], host[n - 1]]

    def finish(*results):
        # Synchronize, then the communicator's asynchronous error, else what the buffers hold.
        R("StreamSynchronize")(stream)
        err = c_int(0)
        assert C("CommGetAsyncError")(comm, byref(err)) == 0
        out["async"] = err.value
        if err.value:
            out["msg"] = message(comm)
        else:
            out["values"] = [read(b) for b in results]
        report()

    buf = device_buffer(rank + 1, device=1 if scenario == "other_device_buffer" else 0)
    if scenario == "mixed_group":
        # An all-reduce, and each rank's data sent to its peer: two kinds of operation.
        mine, theirs, peer = device_buffer(rank + 1), device_buffer(0), (rank + 1) % world
        assert C("GroupStart")() == 0
        assert C("AllReduce")(buf, buf, n, dtype, 0, comm, stream) == 0
        assert C("Send")(mine, n, dtype, peer, comm, stream) == 0
        assert C("Recv")(theirs, n, dtype, peer, comm, stream) == 0
        out["call"] = C("GroupEnd")()
        if out["call"] != 0:
            out["msg"] = message()
            report()
        finish(buf, theirs)
    if scenario == "two_streams_group":
        other = c_void_p()
        assert R("StreamCreate")(byref(other)) == 0
        assert C("GroupStart")() == 0
        assert C("AllReduce")(buf, buf, n, dtype, 0, comm, stream) == 0
        assert C("AllReduce")(buf, buf, n, dtype, 0, comm, other) == 0
        out["call"] = C("GroupEnd")()
        out["msg"] = message()
        report()
    if scenario == "held_stream":
        # The call is queued behind the stream's earlier work and returns before it ran.
        assert R("EmuHoldStream")(stream) == 0
        out["call"] = C("AllReduce")(buf, buf, n, dtype, 0, comm, stream)
        out["queued"] = R("StreamQuery")(stream)
        out["before"] = read(buf)
        assert R("EmuReleaseStream")(stream) == 0
        finish(buf)
    if scenario in ("int64", "float64"):
        out["broadcast"] = C("Broadcast")(buf, buf, n, dtype, 0, comm, stream)
    out["call"] = C("AllReduce")(buf, buf, n, dtype, 0, comm, stream)
    if out["call"] != 0:
        out["msg"] = message()
        report()
    finish(buf)
    """
)


def run_ranks(
    ccl: CclDialect, tmp_path: Path, scenario: str, world: int, timeout_s: int = 30
) -> list[dict]:
    """Each rank's report of ``scenario`` of :data:`RANK` on ``world`` ranks (processes)."""
    library = ccl.lib / f"lib{ccl.library}.so"
    if not library.is_file():
        pytest.fail(f"{library} is missing: build the emulator (nox -s build-{ccl.vendor})")
    cfg = {"lib": str(ccl.lib), "runtime": ccl.runtime, "library": ccl.library}
    idfile = str(tmp_path / "uid")
    return run_rank_scripts(
        RANK,
        world,
        lambda r: [json.dumps(cfg), scenario, str(r), str(world), idfile],
        env={ccl.timeout_env: str(timeout_s), ccl.device_count_env: "2"},
    )


def test_two_ranks_reduce_for_real(ccl, tmp_path):
    for out in run_ranks(ccl, tmp_path, "allreduce", 2):
        assert out["init"] == SUCCESS and out["call"] == SUCCESS and out["async"] == 0, out
        assert out["values"] == [[3.0, 3.0]], out


def test_a_count_that_differs_fails_every_rank_naming_it(ccl, tmp_path):
    for out in run_ranks(ccl, tmp_path, "mismatch", 2):
        assert out["call"] == SUCCESS  # enqueued: the ranks compare when it runs
        assert out["async"] == INVALID_ARGUMENT, out
        assert "rank 1 called all_reduce(count 999" in out["msg"], out


def test_a_rank_that_never_joins_times_out(ccl, tmp_path):
    start = time.monotonic()
    out = run_ranks(ccl, tmp_path, "never_joins", 2, timeout_s=2)[0]
    assert out["init"] == REMOTE_ERROR, out
    assert "rank(s) 1 never joined" in out["msg"], out
    assert 1.5 < out["init_s"] < 20 and time.monotonic() - start < 40, out


def test_one_rank_per_device_and_ranks_as_threads(ccl, tmp_path):
    (out,) = run_ranks(ccl, tmp_path, "two_ranks_one_device", 1)
    assert out["same_device"] == INVALID_USAGE, out
    assert f"{ccl.device} 0 already holds a rank" in out["msg"], out
    assert out["other_device"] == SUCCESS and out["rank0"] == SUCCESS, out


@pytest.mark.parametrize(
    "scenario, words",
    [
        ("other_device_buffer", "not inside one live allocation of {device} 0"),
        ("other_device_stream", "the stream is on {device} 1"),
    ],
)
def test_another_devices_buffer_or_stream_is_refused_at_the_call(ccl, tmp_path, scenario, words):
    (out,) = run_ranks(ccl, tmp_path, scenario, 1)
    assert out["call"] == INVALID_ARGUMENT, out
    assert words.format(device=ccl.device) in out["msg"], out


@pytest.mark.parametrize("scenario", ["int64", "float64"])
def test_64bit_types_move_and_reduce_as_the_library_says(ccl, tmp_path, scenario):
    for out in run_ranks(ccl, tmp_path, scenario, 2):
        assert out["broadcast"] == SUCCESS, out
        if ccl.reduces_64bit:
            assert out["call"] == SUCCESS and out["async"] == 0, out
            assert out["values"] == [[2, 2]], out  # rank 0's 1 broadcast to both, then summed
        else:
            assert out["call"] == INVALID_ARGUMENT, out
            only = f"only {ccl.library}Broadcast and {ccl.library}AllGather take 64-bit types"
            assert f"{scenario} data: {only}" in out["msg"], out


def test_groups_mixing_kinds_run_or_are_refused_as_the_library_says(ccl, tmp_path):
    for out in run_ranks(ccl, tmp_path, "mixed_group", 2):
        if ccl.mixed_groups:
            assert out["call"] == SUCCESS and out["async"] == 0, out
            peer = (out["rank"] + 1) % 2
            assert out["values"] == [[3.0, 3.0], [peer + 1.0, peer + 1.0]], out
        else:
            assert out["call"] == INVALID_USAGE, out
            assert "a group aggregates one kind of operation" in out["msg"], out
