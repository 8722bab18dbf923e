"""The sim collective library (include/torch_fl/collective.h) through its C ABI.

No torch: tfl_collective_get(1) and tfl_runtime_get(1) of libtorch_fl_sim.so are
reached with ctypes. Ranks are separate processes running this file
(`python test_sim_collective.py <scenario> <rank> <nranks> <ids> <timeout_ms>`),
each checking its results against a numpy reference built from every rank's
(deterministic) inputs; a few cases use threads as ranks in the test process.

Set TORCH_FL_SIM_LIBRARY to test a library outside the installed package.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    byref,
    c_char_p,
    c_int,
    c_size_t,
    c_uint32,
    c_uint64,
    c_void_p,
)
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

HERE = Path(__file__).resolve()
INCLUDE = HERE.parents[1] / "include" / "torch_fl"


def _load_sim_control() -> ModuleType:
    """torch_fl/runtimes/sim.py, loaded by path: importing torch_fl would import torch."""
    candidates = []
    spec = importlib.util.find_spec("torch_fl")  # does not run torch_fl/__init__.py
    if spec is not None and spec.submodule_search_locations:
        candidates += [Path(p) / "runtimes" / "sim.py" for p in spec.submodule_search_locations]
    candidates.append(HERE.parents[1] / "src" / "torch_fl" / "runtimes" / "sim.py")
    for path in candidates:
        if path.is_file():
            module_spec = importlib.util.spec_from_file_location("_torch_fl_sim_control", path)
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
            return module
    raise FileNotFoundError(f"torch_fl/runtimes/sim.py not found in {candidates}")


sim = _load_sim_control()

pytestmark = [pytest.mark.runtime, pytest.mark.sim_only]

# ---- statuses and enums (runtime.h, collective.h) ----------------------------

OK = 0
INVALID_VALUE = 1
INVALID_DEVICE = 2
INVALID_POINTER = 4
NOT_SUPPORTED = 7
INVALID_HANDLE = 8
TIMEOUT = 13
ABORTED = 14
H2D, D2H = 1, 2

F16, BF16, F32, F64, I8, U8, I32, I64, BOOL = range(9)
DTYPES = {
    F16: "f16",
    BF16: "bf16",
    F32: "f32",
    F64: "f64",
    I8: "i8",
    U8: "u8",
    I32: "i32",
    I64: "i64",
    BOOL: "bool",
}
SUM, PROD, MIN, MAX, AVG = range(5)
OPS = {SUM: "sum", PROD: "prod", MIN: "min", MAX: "max", AVG: "avg"}
FLOATING = {F16, BF16, F32, F64}
# How numpy holds each dtype (bf16 as its bits).
NP_DTYPE = {
    F16: np.float16,
    BF16: np.uint16,
    F32: np.float32,
    F64: np.float64,
    I8: np.int8,
    U8: np.uint8,
    I32: np.int32,
    I64: np.int64,
    BOOL: np.uint8,
}
COMM_ID = ctypes.c_uint8 * 8192  # tfl_comm_id

# ---- ctypes mirrors ----------------------------------------------------------

S = c_int  # tfl_status
HOST_FN = CFUNCTYPE(None, c_void_p)


def _x_list(header: str, macro: str) -> list[tuple[str, int, int]]:
    """(name, minor, returns_status) of an X-macro field list of a header."""
    text = (INCLUDE / header).read_text()
    body = text.split(f"#define {macro}(X)", 1)[1].split("\n\n", 1)[0]
    return [(n, int(m), int(r)) for n, m, r in re.findall(r"X\((\w+), (\d+), (\d)\)", body)]


# Only the runtime functions these tests call are typed; the others are
# pointer-sized slots, named from runtime.h's own list.
_RUNTIME_TYPES = {
    "status_name": CFUNCTYPE(c_char_p, S),
    "last_error": CFUNCTYPE(c_char_p),
    "device_count": CFUNCTYPE(S, POINTER(c_int)),
    "set_device": CFUNCTYPE(S, c_int),
    "malloc": CFUNCTYPE(S, POINTER(c_void_p), c_size_t),
    "free": CFUNCTYPE(S, c_void_p),
    "memcpy": CFUNCTYPE(S, c_void_p, c_void_p, c_size_t, c_int),
    "memset_async": CFUNCTYPE(S, c_void_p, c_int, c_size_t, c_void_p),
    "stream_create": CFUNCTYPE(S, POINTER(c_void_p), c_int),
    "stream_destroy": CFUNCTYPE(S, c_void_p),
    "stream_synchronize": CFUNCTYPE(S, c_void_p),
    "launch_host_func": CFUNCTYPE(S, c_void_p, HOST_FN, c_void_p),
    "graph_capture_begin": CFUNCTYPE(S, c_void_p, c_int),
    "graph_capture_end": CFUNCTYPE(S, c_void_p, POINTER(c_void_p)),
    "graph_destroy": CFUNCTYPE(S, c_void_p),
}


class RuntimeV1(Structure):
    _fields_ = [
        ("abi_version", c_uint32),
        ("struct_size", c_uint32),
        ("name", c_char_p),
        ("capabilities", c_uint64),
    ] + [
        (name, _RUNTIME_TYPES.get(name, c_void_p))
        for name, _, _ in _x_list("runtime.h", "TFL_RUNTIME_V1_FUNCTIONS")
    ]


class CollectiveV1(Structure):
    """tfl_collective_v1, field by field (test_header_matches_the_mirror checks it)."""

    _fields_ = [
        ("abi_version", c_uint32),
        ("struct_size", c_uint32),
        ("name", c_char_p),
        ("status_name", CFUNCTYPE(c_char_p, S)),
        ("last_error", CFUNCTYPE(c_char_p)),
        ("unique_id", CFUNCTYPE(S, POINTER(COMM_ID))),
        (
            "comm_init",
            CFUNCTYPE(S, POINTER(c_void_p), c_int, POINTER(COMM_ID), c_int, c_int, c_uint32),
        ),
        ("comm_split", CFUNCTYPE(S, c_void_p, c_int, c_int, POINTER(c_void_p))),
        ("comm_destroy", CFUNCTYPE(S, c_void_p)),
        ("comm_abort", CFUNCTYPE(S, c_void_p)),
        ("comm_async_error", CFUNCTYPE(S, c_void_p, POINTER(c_int))),
        ("comm_info", CFUNCTYPE(S, c_void_p, POINTER(c_int), POINTER(c_int), POINTER(c_int))),
        (
            "all_reduce",
            CFUNCTYPE(S, c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p),
        ),
        ("broadcast", CFUNCTYPE(S, c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p)),
        (
            "reduce",
            CFUNCTYPE(S, c_void_p, c_void_p, c_size_t, c_int, c_int, c_int, c_void_p, c_void_p),
        ),
        ("all_gather", CFUNCTYPE(S, c_void_p, c_void_p, c_size_t, c_int, c_void_p, c_void_p)),
        (
            "reduce_scatter",
            CFUNCTYPE(S, c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p),
        ),
        ("all_to_all", CFUNCTYPE(S, c_void_p, c_void_p, c_size_t, c_int, c_void_p, c_void_p)),
        ("send", CFUNCTYPE(S, c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p)),
        ("recv", CFUNCTYPE(S, c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p)),
        ("group_start", CFUNCTYPE(S)),
        ("group_end", CFUNCTYPE(S)),
        ("attach_runtime", CFUNCTYPE(S, c_void_p)),
    ]


@functools.cache
def _tables() -> tuple[RuntimeV1, CollectiveV1]:
    lib = sim.library()
    lib.tfl_runtime_get.argtypes = [c_uint32]
    lib.tfl_runtime_get.restype = POINTER(RuntimeV1)
    lib.tfl_collective_get.argtypes = [c_uint32]
    lib.tfl_collective_get.restype = POINTER(CollectiveV1)
    return lib.tfl_runtime_get(1).contents, lib.tfl_collective_get(1).contents


class Sim:
    """The runtime and collective tables with out-parameters as return values;
    a failing call raises with the status name and the library's message."""

    def __init__(self) -> None:
        self.rt, self.cl = _tables()

    def error(self) -> str:
        return self.cl.last_error().decode()

    def check(self, status: int) -> None:
        if status != OK:
            raise AssertionError(f"{self.cl.status_name(status).decode()}: {self.error()}")

    def malloc(self, size: int) -> int:
        p = c_void_p()
        self.check(self.rt.malloc(byref(p), size))
        return p.value or 0

    def stream(self) -> int:
        s = c_void_p()
        self.check(self.rt.stream_create(byref(s), 0))
        return s.value

    def upload(self, array: np.ndarray) -> int:
        data = np.ascontiguousarray(array)
        ptr = self.malloc(max(data.nbytes, 1))
        self.check(self.rt.memcpy(ptr, data.ctypes.data, data.nbytes, H2D))
        return ptr

    def download(self, ptr: int, count: int, dtype: int) -> np.ndarray:
        out = np.empty(count, NP_DTYPE[dtype])
        self.check(self.rt.memcpy(out.ctypes.data, ptr, out.nbytes, D2H))
        return out

    def unique_id(self) -> bytes:
        cid = COMM_ID()
        self.check(self.cl.unique_id(byref(cid)))
        return bytes(cid)

    def comm_init(self, nranks: int, cid: bytes, rank: int, device: int, timeout_ms: int) -> int:
        comm = c_void_p()
        self.check(self.comm_init_status(comm, nranks, cid, rank, device, timeout_ms))
        return comm.value

    def comm_init_status(
        self, comm: c_void_p, nranks: int, cid: bytes, rank: int, device: int, timeout_ms: int
    ) -> int:
        return self.cl.comm_init(
            byref(comm), nranks, byref(COMM_ID.from_buffer_copy(cid)), rank, device, timeout_ms
        )

    def async_error(self, comm: int) -> tuple[int, str]:
        err = c_int(-1)
        self.check(self.cl.comm_async_error(comm, byref(err)))
        return err.value, (self.error() if err.value != OK else "")


# ---- inputs and references ---------------------------------------------------


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, round to nearest even (as the library rounds)."""
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def inputs(rank: int, dtype: int, count: int, salt: int = 0) -> np.ndarray:
    """Rank `rank`'s deterministic input; every rank can rebuild every rank's."""
    rng = np.random.default_rng(7919 * rank + 101 * dtype + count + 13 * salt)
    if dtype in (F32, F64):
        return rng.standard_normal(count).astype(NP_DTYPE[dtype])
    if dtype in (F16, BF16):
        # Small integers and halves: exact in 16 bits, so a fold in float
        # and one rounding agree with the reference.
        values = (rng.integers(-6, 7, count) / 2).astype(np.float32)
        return values.astype(np.float16) if dtype == F16 else bf16_bits(values)
    if dtype == BOOL:
        return rng.integers(0, 2, count).astype(np.uint8)
    info = np.iinfo(NP_DTYPE[dtype])
    low, high = max(info.min, -1000), min(info.max, 1000)
    return rng.integers(low, high + 1, count).astype(NP_DTYPE[dtype])


def reduce_reference(arrays: list[np.ndarray], dtype: int, op: int) -> np.ndarray:
    """op over ranks, folded in rank order as collective.h's types define it."""
    if dtype == BOOL:
        stacked = np.stack(arrays).astype(bool)
        out = stacked.any(0) if op in (SUM, MAX) else stacked.all(0)
        return out.astype(np.uint8)
    work = [bf16_values(a) if dtype == BF16 else a for a in arrays]
    if dtype == F16:
        work = [a.astype(np.float32) for a in work]
    fold = {SUM: np.add, AVG: np.add, PROD: np.multiply, MIN: np.minimum, MAX: np.maximum}[op]
    with np.errstate(over="ignore"):
        acc = functools.reduce(fold, work[1:], work[0].copy())
    if op == AVG:
        acc = acc / acc.dtype.type(len(arrays))
    if dtype == F16:
        return acc.astype(np.float16)
    if dtype == BF16:
        return bf16_bits(acc)
    return acc.astype(NP_DTYPE[dtype])


def same(got: np.ndarray, want: np.ndarray, dtype: int) -> bool:
    if dtype == BF16:
        return np.array_equal(bf16_values(got), bf16_values(want))
    return np.array_equal(got, want)


# ---- the rank processes ------------------------------------------------------


class Rank:
    """One rank of a scenario: its communicator(s), device and stream."""

    def __init__(self, rank: int, nranks: int, ids: list[bytes], timeout_ms: int) -> None:
        self.sim = Sim()
        self.rank, self.nranks = rank, nranks
        count = c_int()
        self.sim.check(self.sim.rt.device_count(byref(count)))
        self.device = rank % count.value
        self.sim.check(self.sim.rt.set_device(self.device))
        self.comms = [self.sim.comm_init(nranks, cid, rank, self.device, timeout_ms) for cid in ids]
        self.comm = self.comms[0]
        self.stream = self.sim.stream()
        self.buffers: list[int] = []

    def upload(self, array: np.ndarray) -> int:
        ptr = self.sim.upload(array)
        self.buffers.append(ptr)
        return ptr

    def zeros(self, count: int, dtype: int) -> int:
        return self.upload(np.zeros(count, NP_DTYPE[dtype]))

    def sync(self) -> None:
        self.sim.check(self.sim.rt.stream_synchronize(self.stream))

    def release(self) -> None:
        for ptr in self.buffers:
            self.sim.check(self.sim.rt.free(ptr))
        self.buffers.clear()


def scenario_matrix(r: Rank) -> dict:
    """Every operation, dtype and reduction (small counts), plus counts that
    take several steps through the shared slots, and in-place forms."""
    sim, n, me, cl = r.sim, r.nranks, r.rank, r.sim.cl
    failures: list[str] = []
    cases = 0

    def expect(name: str, got: np.ndarray, want: np.ndarray, dtype: int) -> None:
        nonlocal cases
        cases += 1
        if not same(got, want, dtype):
            failures.append(f"{name} {DTYPES[dtype]}: got {got[:8]} want {want[:8]}")

    def run(st: int) -> None:
        sim.check(st)
        r.sync()

    for count in (7, 300_001):
        for dtype in DTYPES:
            if count > 7 and dtype != F32:
                continue  # the many-step cases: one dtype is enough
            everyone = [inputs(q, dtype, count) for q in range(n)]
            wide = [inputs(q, dtype, n * count, salt=1) for q in range(n)]
            for op in OPS:
                if op == AVG and dtype not in FLOATING:
                    send, recv = r.upload(everyone[me]), r.zeros(count, dtype)
                    st = cl.all_reduce(send, recv, count, dtype, op, r.comm, r.stream)
                    cases += 1
                    if st != NOT_SUPPORTED or f"no avg for {DTYPES[dtype]}" not in sim.error():
                        failures.append(f"avg {DTYPES[dtype]}: {st} {sim.error()}")
                    r.release()
                    continue
                tag = f"{OPS[op]} count {count}"
                # all_reduce
                send, recv = r.upload(everyone[me]), r.zeros(count, dtype)
                run(cl.all_reduce(send, recv, count, dtype, op, r.comm, r.stream))
                want = reduce_reference(everyone, dtype, op)
                expect(f"all_reduce {tag}", sim.download(recv, count, dtype), want, dtype)
                # in place
                run(cl.all_reduce(send, send, count, dtype, op, r.comm, r.stream))
                expect(f"all_reduce in place {tag}", sim.download(send, count, dtype), want, dtype)
                # reduce to the last rank
                root = n - 1
                send, recv = r.upload(everyone[me]), r.zeros(count, dtype)
                run(cl.reduce(send, recv, count, dtype, op, root, r.comm, r.stream))
                got = sim.download(recv, count, dtype)
                untouched = np.zeros(count, NP_DTYPE[dtype])
                expect(f"reduce {tag}", got, want if me == root else untouched, dtype)
                # reduce_scatter
                send, recv = r.upload(wide[me]), r.zeros(count, dtype)
                run(cl.reduce_scatter(send, recv, count, dtype, op, r.comm, r.stream))
                parts = [w[me * count : (me + 1) * count] for w in wide]
                want = reduce_reference(parts, dtype, op)
                expect(f"reduce_scatter {tag}", sim.download(recv, count, dtype), want, dtype)
                # in place: recv is this rank's block of send
                es = np.dtype(NP_DTYPE[dtype]).itemsize
                send = r.upload(wide[me])
                run(
                    cl.reduce_scatter(
                        send, send + me * count * es, count, dtype, op, r.comm, r.stream
                    )
                )
                got = sim.download(send, n * count, dtype)[me * count : (me + 1) * count]
                expect(f"reduce_scatter in place {tag}", got, want, dtype)
                r.release()
            # broadcast from rank 1 (recv only elsewhere: send may be NULL)
            root = 1 % n
            send = r.upload(everyone[me]) if me == root else None
            recv = r.zeros(count, dtype)
            run(cl.broadcast(send, recv, count, dtype, root, r.comm, r.stream))
            expect("broadcast", sim.download(recv, count, dtype), everyone[root], dtype)
            # all_gather, and in place
            send, recv = r.upload(everyone[me]), r.zeros(n * count, dtype)
            run(cl.all_gather(send, recv, count, dtype, r.comm, r.stream))
            want = np.concatenate(everyone)
            expect("all_gather", sim.download(recv, n * count, dtype), want, dtype)
            es = np.dtype(NP_DTYPE[dtype]).itemsize
            both = r.upload(np.concatenate([everyone[me]] * n))
            run(cl.all_gather(both + me * count * es, both, count, dtype, r.comm, r.stream))
            expect("all_gather in place", sim.download(both, n * count, dtype), want, dtype)
            # all_to_all
            send, recv = r.upload(wide[me]), r.zeros(n * count, dtype)
            run(cl.all_to_all(send, recv, count, dtype, r.comm, r.stream))
            want = np.concatenate([wide[q][me * count : (me + 1) * count] for q in range(n)])
            expect("all_to_all", sim.download(recv, n * count, dtype), want, dtype)
            # send/recv around the ring, in a group
            send, recv = r.upload(everyone[me]), r.zeros(count, dtype)
            sim.check(cl.group_start())
            sim.check(cl.send(send, count, dtype, (me + 1) % n, r.comm, r.stream))
            sim.check(cl.recv(recv, count, dtype, (me - 1) % n, r.comm, r.stream))
            run(cl.group_end())
            expect("send/recv", sim.download(recv, count, dtype), everyone[(me - 1) % n], dtype)
            r.release()
    # count 0: a no-op on every operation
    sim.check(cl.all_reduce(None, None, 0, F32, SUM, r.comm, r.stream))
    run(cl.all_gather(None, None, 0, F32, r.comm, r.stream))
    err, msg = sim.async_error(r.comm)
    if err != OK:
        failures.append(f"async error after the matrix: {err} {msg}")
    return {"cases": cases, "failures": failures}


def scenario_order(r: Rank) -> dict:
    """A collective enqueued behind a blocked stream returns at once and runs
    after the memset enqueued before it."""
    sim, cl, count = r.sim, r.sim.cl, 4096
    buf, out = r.zeros(count, U8), r.zeros(count, U8)
    gate = threading.Event()
    hold = HOST_FN(lambda _: gate.wait(10))
    sim.check(sim.rt.launch_host_func(r.stream, hold, None))
    sim.check(sim.rt.memset_async(buf, 3 + r.rank, count, r.stream))
    start = time.monotonic()
    sim.check(cl.all_reduce(buf, out, count, U8, SUM, r.comm, r.stream))
    call_s = time.monotonic() - start
    before = sim.download(out, count, U8)[:4].tolist()  # memcpy waits for the default stream only
    threading.Timer(0.3, gate.set).start()
    r.sync()
    got = sim.download(out, count, U8)
    want = sum(3 + q for q in range(r.nranks))
    return {
        "call_s": call_s,
        "before": before,
        "all_equal": bool((got == want).all()),
        "value": int(got[0]),
        "want": want,
    }


def scenario_ring(r: Rank) -> dict:
    """Groups of sends and receives bigger than a mailbox: a ring, every pair,
    and several messages to one peer kept in order."""
    sim, cl, n, me = r.sim, r.sim.cl, r.nranks, r.rank
    count = 200_003  # f32: ~800 KB, several mailbox steps
    failures = []
    mine = inputs(me, F32, count)
    send = r.upload(mine)
    recvs = [r.zeros(count, F32) for _ in range(n)]
    sim.check(cl.group_start())
    for q in range(n):  # all pairs, self included
        sim.check(cl.recv(recvs[q], count, F32, q, r.comm, r.stream))
    for q in reversed(range(n)):
        sim.check(cl.send(send, count, F32, q, r.comm, r.stream))
    sim.check(cl.group_end())
    r.sync()
    for q in range(n):
        if not np.array_equal(sim.download(recvs[q], count, F32), inputs(q, F32, count)):
            failures.append(f"all pairs: from rank {q}")
    # two messages to the next rank, received in order; nested groups
    a, b = r.upload(mine[:1000]), r.upload(mine[1000:3000])
    ra, rb = r.zeros(1000, F32), r.zeros(2000, F32)
    prev, nxt = (me - 1) % n, (me + 1) % n
    sim.check(cl.group_start())
    sim.check(cl.group_start())
    sim.check(cl.send(a, 1000, F32, nxt, r.comm, r.stream))
    sim.check(cl.send(b, 2000, F32, nxt, r.comm, r.stream))
    sim.check(cl.group_end())
    sim.check(cl.recv(ra, 1000, F32, prev, r.comm, r.stream))
    sim.check(cl.recv(rb, 2000, F32, prev, r.comm, r.stream))
    sim.check(cl.group_end())
    r.sync()
    theirs = inputs(prev, F32, count)
    if not np.array_equal(sim.download(ra, 1000, F32), theirs[:1000]):
        failures.append("ordered messages: first")
    if not np.array_equal(sim.download(rb, 2000, F32), theirs[1000:3000]):
        failures.append("ordered messages: second")
    # outside a group: even ranks send first, odd ranks receive first
    out = r.zeros(count, F32)
    for step in ("send", "recv") if me % 2 == 0 else ("recv", "send"):
        if step == "send":
            sim.check(cl.send(send, count, F32, nxt, r.comm, r.stream))
        else:
            sim.check(cl.recv(out, count, F32, prev, r.comm, r.stream))
    r.sync()
    if not np.array_equal(sim.download(out, count, F32), theirs):
        failures.append("ungrouped ring")
    err, msg = sim.async_error(r.comm)
    if err != OK:
        failures.append(f"async error: {msg}")
    return {"failures": failures}


def scenario_dead(r: Rank) -> dict:
    """The last rank exits after joining; the others' all_reduce fails within
    the timeout, and so does every later call."""
    if r.rank == r.nranks - 1:
        return {"exited": True}
    sim, cl = r.sim, r.sim.cl
    buf = r.upload(np.ones(16, np.float32))
    start = time.monotonic()
    sim.check(cl.all_reduce(buf, buf, 16, F32, SUM, r.comm, r.stream))
    r.sync()
    elapsed = time.monotonic() - start
    err, msg = sim.async_error(r.comm)
    later = cl.all_reduce(buf, buf, 16, F32, SUM, r.comm, r.stream)
    return {
        "elapsed": elapsed,
        "error": err,
        "message": msg,
        "later": later,
        "later_msg": sim.error(),
    }


def scenario_abort(r: Rank) -> dict:
    """Rank 0 aborts from another thread while its all_reduce waits for rank 1
    (timeout 30 s); rank 1, arriving late, fails at once."""
    sim, cl = r.sim, r.sim.cl
    buf = r.upload(np.ones(16, np.float32))
    if r.rank == 1:
        time.sleep(1.0)
    start = time.monotonic()
    if r.rank == 0:
        threading.Timer(0.3, lambda: sim.check(cl.comm_abort(r.comm))).start()
    sim.check(cl.all_reduce(buf, buf, 16, F32, SUM, r.comm, r.stream))
    r.sync()
    elapsed = time.monotonic() - start
    err, msg = sim.async_error(r.comm)
    later = cl.all_reduce(buf, buf, 16, F32, SUM, r.comm, r.stream)
    later_msg = sim.error()
    sim.check(cl.comm_destroy(r.comm))
    return {
        "elapsed": elapsed,
        "error": err,
        "message": msg,
        "later": later,
        "later_msg": later_msg,
    }


def scenario_mismatch(r: Rank) -> dict:
    """Arguments that differ between ranks fail on every rank, naming the rank."""
    sim, cl = r.sim, r.sim.cl
    count = 4 if r.rank == 0 else 8
    buf = r.upload(np.ones(8, np.float32))
    sim.check(cl.all_reduce(buf, buf, count, F32, SUM, r.comm, r.stream))
    r.sync()
    coll = sim.async_error(r.comm)
    # a receive that expects more than was sent (second communicator)
    comm = r.comms[1]
    if r.rank == 0:
        sim.check(cl.send(buf, 4, F32, 1, comm, r.stream))
    elif r.rank == 1:
        sim.check(cl.recv(buf, 8, F32, 0, comm, r.stream))
    r.sync()
    p2p = sim.async_error(comm)
    return {"collective": coll, "p2p": p2p}


def scenario_split(r: Rank) -> dict:
    """Split 3 ranks by parity with keys reversing the order, then leave rank 1
    out of a second split; each new communicator reduces among its ranks."""
    sim, cl, me = r.sim, r.sim.cl, r.rank
    out: dict = {}
    for name, color, key in (("parity", me % 2, -me), ("without_1", -1 if me == 1 else 5, me)):
        sub = c_void_p(7)
        sim.check(cl.comm_split(r.comm, color, key, byref(sub)))
        if sub.value is None:
            out[name] = None
            continue
        rank, nranks, device = c_int(), c_int(), c_int()
        sim.check(cl.comm_info(sub, byref(rank), byref(nranks), byref(device)))
        buf = r.upload(np.array([me + 1], np.int64))
        sim.check(cl.all_reduce(buf, buf, 1, I64, SUM, sub.value, r.stream))
        r.sync()
        total = int(sim.download(buf, 1, I64)[0])
        sim.check(cl.comm_destroy(sub))
        out[name] = [rank.value, nranks.value, device.value, total]
    # the parent still works after its splits
    buf = r.upload(np.array([me + 1], np.int64))
    sim.check(cl.all_reduce(buf, buf, 1, I64, SUM, r.comm, r.stream))
    r.sync()
    out["parent"] = int(sim.download(buf, 1, I64)[0])
    return out


def _rank_main(argv: list[str]) -> None:
    scenario, rank, nranks, ids, timeout_ms = argv
    r = Rank(int(rank), int(nranks), [bytes.fromhex(h) for h in ids.split(",")], int(timeout_ms))
    result = globals()[f"scenario_{scenario}"](r)
    print(json.dumps(result), flush=True)
    if result.get("exited"):
        os._exit(0)  # without destroying anything, as a crashed rank


def run_ranks(scenario: str, nranks: int, timeout_ms: int = 30000, ncomms: int = 1) -> list[dict]:
    s = Sim()
    ids = ",".join(s.unique_id().hex() for _ in range(ncomms))
    env = dict(os.environ)
    for key in ("FLAGOS_SIM_DEVICES", "FLAGOS_SIM_FAULTS", "FLAGOS_SIM_COMM_TIMEOUT"):
        env.pop(key, None)
    env[sim.LIBRARY_ENV] = sim.library_path()
    cmd = [sys.executable, str(HERE), scenario]
    procs = [
        subprocess.Popen(
            [*cmd, str(q), str(nranks), ids, str(timeout_ms)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for q in range(nranks)
    ]
    results = []
    for q, proc in enumerate(procs):
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, f"rank {q}: {err}"
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


# ---- the table and its header ------------------------------------------------


def test_table_header_fields() -> None:
    s = Sim()
    cl = s.cl
    assert cl.abi_version == 1
    assert cl.struct_size == ctypes.sizeof(CollectiveV1)
    assert cl.name == b"sim"
    assert not sim.library().tfl_collective_get(2), "an unknown ABI version must give NULL"
    for name, _, _ in _x_list("collective.h", "TFL_COLLECTIVE_V1_FUNCTIONS"):
        assert ctypes.cast(getattr(cl, name), c_void_p).value, f"sim leaves {name} NULL"
    assert cl.status_name(TIMEOUT) == b"TFL_ERROR_TIMEOUT"
    assert cl.status_name(ABORTED) == b"TFL_ERROR_ABORTED"


def test_header_matches_the_mirror(tmp_path: Path) -> None:
    """The X-macro list, the C layout (offsets, size) and CollectiveV1 agree."""
    listed = [name for name, _, _ in _x_list("collective.h", "TFL_COLLECTIVE_V1_FUNCTIONS")]
    assert [f[0] for f in CollectiveV1._fields_[3:]] == listed
    optional = re.findall(
        r"X\((\w+)\)",
        (INCLUDE / "collective.h")
        .read_text()
        .split("#define TFL_COLLECTIVE_V1_OPTIONAL(X)", 1)[1]
        .split("\n", 1)[0],
    )
    assert optional == ["comm_split"]
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to check the header's layout")
    src = tmp_path / "layout.c"
    src.write_text(
        "#include <stdio.h>\n#include <torch_fl/collective.h>\n"
        '#define P(name, minor, st) printf("%s %zu\\n", #name, offsetof(tfl_collective_v1, name));\n'
        "int main(void) {\n"
        '  printf("size %zu\\n", sizeof(tfl_collective_v1));\n'
        '  printf("v1_0 %u\\n", (unsigned)TFL_COLLECTIVE_V1_0_SIZE);\n'
        '  printf("id %zu\\n", sizeof(tfl_comm_id));\n'
        "  TFL_COLLECTIVE_V1_FUNCTIONS(P)\n  return 0;\n}\n"
    )
    exe = tmp_path / "layout"
    subprocess.run(
        [
            cc,
            "-std=c99",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            f"-I{INCLUDE.parent}",
            str(src),
            "-o",
            str(exe),
        ],
        check=True,
    )
    lines = dict(
        line.split()
        for line in subprocess.run(
            [str(exe)], check=True, capture_output=True, text=True
        ).stdout.splitlines()
    )
    assert int(lines.pop("size")) == ctypes.sizeof(CollectiveV1)
    # v1.0 ends after group_end: the fields v1.1 appended follow it.
    assert int(lines.pop("v1_0")) == CollectiveV1.group_end.offset + ctypes.sizeof(c_void_p)
    assert int(lines.pop("id")) == ctypes.sizeof(COMM_ID)
    for name, offset in lines.items():
        assert int(offset) == getattr(CollectiveV1, name).offset, name


# ---- in one process ----------------------------------------------------------


@pytest.fixture(scope="module")
def s() -> Sim:
    sim_ = Sim()
    sim_.check(sim_.rt.set_device(0))
    return sim_


@pytest.fixture
def solo(s: Sim):
    """A one-rank communicator on device 0 and a stream of device 0."""
    comm = s.comm_init(1, s.unique_id(), 0, 0, 5000)
    stream = s.stream()
    yield comm, stream
    s.check(s.rt.stream_destroy(stream))
    s.check(s.cl.comm_destroy(comm))


def test_one_rank_is_a_copy_and_comm_info(s: Sim, solo) -> None:
    comm, stream = solo
    rank, nranks, device = c_int(-1), c_int(-1), c_int(-1)
    s.check(s.cl.comm_info(comm, byref(rank), byref(nranks), byref(device)))
    assert (rank.value, nranks.value, device.value) == (0, 1, 0)
    s.check(s.cl.comm_info(comm, None, byref(nranks), None))
    data = inputs(0, I64, 33)
    send, recv = s.upload(data), s.upload(np.zeros(33, np.int64))
    s.check(s.cl.all_reduce(send, recv, 33, I64, PROD, comm, stream))
    s.check(s.rt.stream_synchronize(stream))
    assert np.array_equal(s.download(recv, 33, I64), data)
    assert s.async_error(comm) == (OK, "")
    for p in (send, recv):
        s.check(s.rt.free(p))


def test_threads_as_ranks(s: Sim) -> None:
    cid, n, count = s.unique_id(), 3, 1000
    results: dict[int, object] = {}

    def rank(q: int) -> None:
        try:
            sim_ = Sim()
            sim_.check(sim_.rt.set_device(q % 2))
            comm = sim_.comm_init(n, cid, q, q % 2, 10000)
            stream = sim_.stream()
            send = sim_.upload(inputs(q, F64, count))
            recv = sim_.upload(np.zeros(count, np.float64))
            sim_.check(sim_.cl.all_reduce(send, recv, count, F64, MAX, comm, stream))
            sim_.check(sim_.rt.stream_synchronize(stream))
            results[q] = sim_.download(recv, count, F64)
            sim_.check(sim_.cl.comm_destroy(comm))
            for p in (send, recv):  # the process's runtime is the tests' too: leave nothing live
                sim_.check(sim_.rt.free(p))
        except AssertionError as exc:
            results[q] = str(exc)

    threads = [threading.Thread(target=rank, args=(q,)) for q in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    want = reduce_reference([inputs(q, F64, count) for q in range(n)], F64, MAX)
    for q in range(n):
        assert isinstance(results[q], np.ndarray), results[q]
        assert np.array_equal(results[q], want)


def test_comm_init_times_out_naming_the_missing_rank(s: Sim) -> None:
    comm = c_void_p()
    start = time.monotonic()
    st = s.comm_init_status(comm, 3, s.unique_id(), 1, 0, 300)
    assert st == TIMEOUT
    assert time.monotonic() - start < 5
    assert "rank(s) 0, 2 never joined" in s.error() and "rank 1 of 3" in s.error()
    assert comm.value is None


def test_env_timeout_and_duplicate_rank(s: Sim, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLAGOS_SIM_COMM_TIMEOUT", "0.3")
    cid = s.unique_id()
    got: list[tuple[int, str]] = []

    def first() -> None:
        comm = c_void_p()
        got.append((s.comm_init_status(comm, 2, cid, 0, 0, 0), s.error()))

    t = threading.Thread(target=first)
    t.start()
    time.sleep(0.05)
    comm = c_void_p()
    dup = s.comm_init_status(comm, 2, cid, 0, 0, 0)
    dup_msg = s.error()
    t.join(10)
    assert dup == INVALID_VALUE and "rank 0 already joined" in dup_msg
    assert got[0][0] == TIMEOUT and "300 ms" in got[0][1]
    monkeypatch.setenv("FLAGOS_SIM_COMM_TIMEOUT", "soon")
    assert s.comm_init_status(comm, 1, s.unique_id(), 0, 0, 0) == INVALID_VALUE
    assert "FLAGOS_SIM_COMM_TIMEOUT=soon" in s.error()


def test_bad_arguments_name_the_problem(s: Sim, solo) -> None:
    comm, stream = solo
    cl = s.cl
    dev0 = s.malloc(64)
    dev1 = None
    count = c_int()
    s.check(s.rt.device_count(byref(count)))

    def fails(status: int, text: str, st: int) -> None:
        assert st == status, (s.cl.status_name(st), s.error())
        assert text in s.error(), s.error()

    c = c_void_p()
    cid = s.unique_id()
    fails(
        INVALID_VALUE,
        "comm is NULL",
        cl.comm_init(None, 1, byref(COMM_ID.from_buffer_copy(cid)), 0, 0, 0),
    )
    fails(INVALID_VALUE, "id is NULL", cl.comm_init(byref(c), 1, None, 0, 0, 0))
    fails(INVALID_VALUE, "nranks 0 < 1", s.comm_init_status(c, 0, cid, 0, 0, 0))
    fails(NOT_SUPPORTED, "at most 64 ranks", s.comm_init_status(c, 65, cid, 0, 0, 0))
    fails(INVALID_VALUE, "rank 2 is not in [0, 2)", s.comm_init_status(c, 2, cid, 2, 0, 0))
    fails(INVALID_DEVICE, "", s.comm_init_status(c, 1, cid, 0, 99, 0))
    fails(
        INVALID_VALUE,
        "not made by the sim unique_id",
        s.comm_init_status(c, 1, bytes(8192), 0, 0, 0),
    )
    fails(INVALID_VALUE, "id is NULL", cl.unique_id(None))

    fails(
        INVALID_VALUE,
        "dtype 99 is not a tfl_dtype",
        cl.all_reduce(dev0, dev0, 4, 99, SUM, comm, stream),
    )
    fails(
        INVALID_VALUE,
        "op 7 is not a tfl_reduce_op",
        cl.all_reduce(dev0, dev0, 4, F32, 7, comm, stream),
    )
    fails(NOT_SUPPORTED, "no avg for i32", cl.all_reduce(dev0, dev0, 4, I32, AVG, comm, stream))
    fails(
        NOT_SUPPORTED, "no avg for bool", cl.reduce_scatter(dev0, dev0, 4, BOOL, AVG, comm, stream)
    )
    fails(
        INVALID_VALUE,
        "overflows size_t",
        cl.all_reduce(dev0, dev0, 1 << 62, F64, SUM, comm, stream),
    )
    fails(INVALID_VALUE, "runs past the end", cl.all_reduce(dev0, dev0, 17, F32, SUM, comm, stream))
    fails(
        INVALID_POINTER, "send buffer is NULL", cl.all_reduce(None, dev0, 4, F32, SUM, comm, stream)
    )
    host = np.zeros(16, np.float32)
    fails(
        INVALID_POINTER,
        "not device memory",
        cl.all_reduce(host.ctypes.data, dev0, 4, F32, SUM, comm, stream),
    )
    fails(INVALID_VALUE, "root 1 is not a rank", cl.broadcast(dev0, dev0, 4, F32, 1, comm, stream))
    fails(INVALID_VALUE, "peer -1 is not a rank", cl.send(dev0, 4, F32, -1, comm, stream))
    fails(INVALID_VALUE, "overlap", cl.all_to_all(dev0, dev0 + 4, 4, F32, comm, stream))
    fails(INVALID_VALUE, "no group_start", cl.group_end())
    fails(
        INVALID_HANDLE,
        "unknown or destroyed communicator",
        cl.all_reduce(dev0, dev0, 4, F32, SUM, 0x1234, stream),
    )
    fails(INVALID_VALUE, "error is NULL", cl.comm_async_error(comm, None))
    if count.value >= 2:
        s.check(s.rt.set_device(1))
        dev1 = s.malloc(64)
        other_stream = s.stream()
        s.check(s.rt.set_device(0))
        fails(
            INVALID_POINTER,
            "is on flagos sim device 1, but the communicator's device is 0",
            cl.all_reduce(dev1, dev0, 4, F32, SUM, comm, stream),
        )
        fails(
            INVALID_HANDLE,
            "is a stream of flagos sim device 1",
            cl.all_reduce(dev0, dev0, 4, F32, SUM, comm, other_stream),
        )
        s.check(s.rt.stream_destroy(other_stream))
        s.check(s.rt.free(dev1))
    # a group runs on one stream
    second = s.stream()
    s.check(cl.group_start())
    s.check(cl.all_reduce(dev0, dev0, 4, F32, SUM, comm, stream))
    fails(NOT_SUPPORTED, "one stream", cl.all_reduce(dev0, dev0, 4, F32, SUM, comm, second))
    s.check(cl.group_end())
    # collectives are not captured into device graphs
    s.check(s.rt.graph_capture_begin(second, 2))
    fails(NOT_SUPPORTED, "cannot be captured", cl.all_reduce(dev0, dev0, 4, F32, SUM, comm, second))
    graph = c_void_p()
    s.check(s.rt.graph_capture_end(second, byref(graph)))
    s.check(s.rt.graph_destroy(graph))
    s.check(s.rt.stream_synchronize(stream))
    s.check(s.rt.stream_destroy(second))
    assert s.async_error(comm) == (OK, "")
    s.check(s.rt.free(dev0))
    # comm_split of one rank: itself, or nothing for a negative color
    fails(INVALID_VALUE, "out is NULL", cl.comm_split(comm, 0, 0, None))
    sub = c_void_p(1)
    s.check(cl.comm_split(comm, -1, 0, byref(sub)))
    assert sub.value is None
    s.check(cl.comm_split(comm, 3, 0, byref(sub)))
    nranks = c_int()
    s.check(cl.comm_info(sub, None, byref(nranks), None))
    assert nranks.value == 1
    # a destroyed communicator
    s.check(cl.comm_destroy(sub))
    fails(INVALID_HANDLE, "unknown or destroyed communicator", cl.comm_destroy(sub))
    fails(INVALID_HANDLE, "unknown or destroyed communicator", cl.comm_split(sub, 0, 0, byref(c)))


# ---- ranks as processes ------------------------------------------------------


@pytest.mark.parametrize("nranks", [2, 3, 4])
def test_every_operation_dtype_and_reduction(nranks: int) -> None:
    for q, result in enumerate(run_ranks("matrix", nranks)):
        assert result["failures"] == [], f"rank {q}"
        assert result["cases"] >= 280


def test_comm_split_by_color_and_key() -> None:
    r0, r1, r2 = run_ranks("split", 3)
    # parity: {0, 2} with keys 0, -2 -> parent rank 2 is new rank 0; {1} alone
    assert r0["parity"] == [1, 2, 0, 4]
    assert r2["parity"] == [0, 2, 0, 4]
    assert r1["parity"] == [0, 1, 1, 2]
    assert r1["without_1"] is None
    assert r0["without_1"] == [0, 2, 0, 4] and r2["without_1"] == [1, 2, 0, 4]
    assert r0["parent"] == r1["parent"] == r2["parent"] == 6


def test_collective_runs_in_stream_order() -> None:
    for result in run_ranks("order", 2):
        assert result["call_s"] < 2, "the call must only enqueue (the stream waits up to 10 s)"
        assert result["before"] == [0, 0, 0, 0], "nothing ran before the stream reached it"
        assert result["all_equal"] and result["value"] == result["want"]


@pytest.mark.parametrize("nranks", [2, 3])
def test_grouped_sends_and_receives_do_not_deadlock(nranks: int) -> None:
    for q, result in enumerate(run_ranks("ring", nranks, timeout_ms=20000)):
        assert result["failures"] == [], f"rank {q}"


def test_a_rank_that_exits_is_a_timeout_not_a_hang() -> None:
    results = run_ranks("dead", 3, timeout_ms=1000)
    assert results[2] == {"exited": True}
    survivors = results[:2]
    for result in survivors:
        assert result["elapsed"] < 10, result
        assert result["error"] in (TIMEOUT, ABORTED), result
        assert result["later"] == result["error"], "later calls fail at once"
        assert "failed earlier" in result["later_msg"]
    # the first to give up names the missing rank; a later one names the first
    timed_out = [r for r in survivors if r["error"] == TIMEOUT]
    assert timed_out, survivors
    assert "waiting for rank(s) 2" in timed_out[0]["message"]
    assert "timed out after 1000 ms in all_reduce #1" in timed_out[0]["message"]


def test_comm_abort_from_another_thread_unblocks_every_rank() -> None:
    first, second = run_ranks("abort", 2, timeout_ms=30000)
    assert first["elapsed"] < 5 and first["error"] == ABORTED, first
    assert "comm_abort" in first["message"]
    assert first["later"] == ABORTED
    assert second["elapsed"] < 5 and second["error"] == ABORTED, second
    assert "rank 0 broke the communicator" in second["message"]
    assert second["later"] == ABORTED


def test_mismatched_arguments_name_the_rank() -> None:
    results = run_ranks("mismatch", 2, timeout_ms=10000, ncomms=2)
    for result in results:
        status, message = result["collective"]
        assert status == INVALID_VALUE, result
        assert (
            "rank 1 called all_reduce(count 8, f32, sum) but rank 0 called all_reduce(count 4"
            in message
        )
    assert results[0]["p2p"] == [OK, ""], "the send itself completed"
    status, message = results[1]["p2p"]
    assert status == INVALID_VALUE
    assert "expects 32 bytes, but rank 0 sent 16" in message


if __name__ == "__main__":
    _rank_main(sys.argv[1:])
