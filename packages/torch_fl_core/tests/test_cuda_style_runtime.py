"""The kit's CUDA-style runtime (``torch_fl/kit/cuda_style_runtime.h``) on a fake SDK of CUDA's
shape (``tests/kit/cuda_style_driver.cpp``): two devices whose pointers are device-scoped, a call
log and an injectable fault. What every vendor runtime written as a dialect of it inherits is
checked call by call: the owning device made current and restored, only an allocation's start
freed, a copy kind that does not fit refused, copies between devices through the peer copy on a
stream of the source in the caller's stream order, SDK failures named (call, device, status
string and type, detail) with the status mapped, NOT_READY, host functions, the table's name and
its empty fields; and, for a dialect that declares CUDA's stream capture, the graph seat: the
SDK's capture errors passed on with what invalidated the capture, allocation and host functions
kept allowed while capturing, graphs launched on their device; and, for a dialect declaring the
optional members of ``cuda_style_hooks.h`` (CANN's rules), each of them. The real SDKs run in
torch-fl-gcu's, torch-fl-musa's and torch-fl-ascend's tests (their emulators).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
INCLUDE = HERE.parent / "include"


def _statuses() -> dict[str, int]:
    text = (INCLUDE / "torch_fl" / "runtime.h").read_text()
    return {m[1]: int(m[2]) for m in re.finditer(r"\b(TFL_\w+) = (\d+)", text)}


S = _statuses()


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict[str, tuple[int, str, list[str]]]:
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.fail("no C++ compiler (c++, g++, $CXX) to build the kit's test program")
    exe = tmp_path_factory.mktemp("cuda_style") / "driver"
    subprocess.run(
        [cxx, "-std=c++17", "-O1", "-Wall", "-Werror", f"-I{INCLUDE}", "-o", str(exe)]
        + [str(HERE / "kit" / "cuda_style_driver.cpp"), "-lpthread"],
        check=True,
        capture_output=True,
        text=True,
    )
    text = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    head, *blocks = text.split("== ")
    out: dict[str, tuple[int, str, list[str]]] = {"": (0, "", head.strip().splitlines())}
    for block in blocks:
        first, *lines = block.strip().splitlines()
        m = re.match(r"(.*?): (\d+) ?(.*)", first)
        assert m, first
        out[m.group(1)] = (int(m.group(2)), m.group(3), lines)
    return out


def test_the_table_names_the_runtime_and_leaves_graphs_and_ipc_empty(run):
    assert run[""][2] == ["table fakert caps 6 graphs 0 ipc 0"]
    assert run["device_count"][2] == ["count 2"]
    assert run["device_name 1"][2] == ["name Fake device 1"]
    assert run["device_name 2"][:2] == (
        S["TFL_ERROR_INVALID_DEVICE"],
        "fakert runtime: no FAKE dev 2",
    )


def test_memory_is_freed_with_its_owner_current_and_only_from_its_start(run):
    assert run["malloc on 1"][2] == ["SetDevice 1", "Malloc dev1"]
    st, msg, calls = run["free inside"]
    assert st == S["TFL_ERROR_INVALID_POINTER"]
    assert "inside an allocation of FAKE dev 1 but not its start" in msg
    assert calls[0] == f"pointer_info kind {S['TFL_POINTER_DEVICE']} device 1"
    assert not [c for c in calls if c.startswith("Free")]
    # Freed later with device 0 current: device 1 is made current, then 0 again.
    assert run["free p1"][2] == ["SetDevice 1", "Free dev1", "SetDevice 0", "current 0"]


def test_copies_run_on_the_deciding_pointers_device_and_refuse_a_kind_that_does_not_fit(run):
    st, msg, _ = run["h2d to 1 on the NULL stream of 0"]
    assert st == S["TFL_ERROR_INVALID_VALUE"]
    assert msg == (
        "fakert runtime: memcpy_async HostToDevice on FAKE dev 1 was given a stream of FAKE dev 0"
    )
    assert run["h2d to 1 on the NULL stream of 1"][2][-1] == "MemcpyAsync kind1 dev1"
    st, msg, _ = run["h2d with a device src"]
    assert st == S["TFL_ERROR_INVALID_MEMCPY_KIND"]
    assert re.fullmatch(
        r"fakert runtime: memcpy kind HostToDevice does not match dst 0x\w+ \(host\) and src "
        r"0x\w+ \(FAKE dev 1\)",
        msg,
    )
    # A synchronous copy from device 1 with 0 current: 1 current for it, then 0 again.
    assert run["sync d2h from 1"][2] == ["SetDevice 1", "Memcpy dev1", "SetDevice 0", "host hello"]


def test_a_copy_between_devices_on_the_destinations_stream_runs_in_its_stream_order(run):
    st, _, calls = run["d2d 1->0 on a stream of 0"]
    assert st == 0
    copy = calls.index("MemcpyPeerAsync 1->0 on stream of dev1")
    # The source's default stream waits for the caller's stream, and the caller's for it.
    assert "StreamWaitEvent dev1 on event of dev0" in calls[:copy]
    assert "StreamWaitEvent dev0 on event of dev1" in calls[copy:]
    assert calls[-1] == "SetDevice 0"
    st, msg, _ = run["peer async with wrong owners"]
    assert st == S["TFL_ERROR_INVALID_POINTER"]
    assert "is on FAKE dev 0 (expected FAKE dev 1)" in msg


def test_an_sdk_failure_names_the_call_device_status_and_detail(run):
    st, msg, calls = run["injected"]
    assert st == S["TFL_ERROR_DEVICE"]
    assert msg == (
        "fakeMemcpyAsync(...) on FAKE dev 0 failed: an illegal address (fakeError_t 700); "
        "DeviceToHost, 16 bytes"
    )
    assert calls == ["sticky 0"]  # the SDK's sticky error was cleared
    st, msg, _ = run["malloc fails"]
    assert st == S["TFL_ERROR_INVALID_VALUE"]
    assert msg == "fakeMalloc(...) on FAKE dev 0 failed: fake failure (fakeError_t 1); 32 bytes"


def test_queries_events_host_functions_and_native_streams(run):
    assert run["query pending"][0] == S["TFL_ERROR_NOT_READY"]
    assert run["query drained"][0] == 0
    assert run["elapsed"][2][-1] == "ms 1.5"
    assert run["unknown event flags"][:2] == (
        S["TFL_ERROR_INVALID_VALUE"],
        "event_create: unknown flags 8",
    )
    assert run["host fn"][2] == ["EventRecord dev0"]
    assert run["stream sync"][2] == ["host fn ran 1"]
    assert run["native default of 1"][2] == ["native device 1"]
    assert run["probe"][2] == ["probed 2"]


def test_a_dialect_with_stream_capture_fills_the_graph_seat(run):
    # TFL_CAP_PEER_COPY | TFL_CAP_EVENT_TIMING, and TFL_CAP_GRAPHS (1 << 5) from the template.
    assert run["graphs table"][2] == ["table fakegraphs caps 38 graphs 1"]
    assert run["capture on the default stream"][:2] == (
        S["TFL_ERROR_INVALID_VALUE"],
        "graph_capture_begin: the default stream cannot capture; capture on a created stream",
    )
    assert run["capture mode 7"][:2] == (
        S["TFL_ERROR_INVALID_VALUE"],
        "graph_capture_begin: unknown capture mode 7",
    )
    # Begun with the stream's device current, in the SDK's mode.
    assert run["capture begin"][2] == ["SetDevice 1", "BeginCapture dev1 mode 1", "SetDevice 0"]
    assert run["capture status"][2] == [f"status {S['TFL_CAPTURE_ACTIVE']}"]


def test_allocation_and_host_functions_stay_allowed_while_capturing(run):
    # The thread's capture mode relaxed around the SDK's allocation, restored after it.
    assert run["malloc while capturing"][2] == ["ExchangeMode 2", "Malloc dev0", "ExchangeMode 0"]
    # The SDK's stream callback, which the capture records (not an event the watcher waits on).
    assert run["host fn while capturing"][2] == [
        "SetDevice 1",
        "LaunchHostFunc captured",
        "SetDevice 0",
    ]


def test_a_forbidden_call_is_a_capture_error_and_ending_names_it(run):
    st, msg, lines = run["sync while capturing"]
    assert st == S["TFL_ERROR_CAPTURE"]
    forbidden = (
        "fakeStreamSynchronize(...) on FAKE dev 1 failed: not permitted when stream is capturing "
        "(fakeError_t 900)"
    )
    assert msg == forbidden + "; the graph capture on FAKE dev 1 is now invalidated"
    assert lines[-1] == f"status {S['TFL_CAPTURE_INVALIDATED']}"
    st, msg, lines = run["end of the invalidated capture"]
    assert st == S["TFL_ERROR_CAPTURE"]
    assert msg == (
        "fakeStreamEndCapture(...) on FAKE dev 1 failed: a previous error during capture "
        f"(fakeError_t 901); the capture was invalidated by: {forbidden}"
    )
    assert lines[-1] == f"graph 0 status {S['TFL_CAPTURE_NONE']}"


def test_a_graph_launches_on_its_device_and_is_instantiated_once(run):
    assert "MemcpyAsync captured" in run["captured copy"][2]
    assert "EndCapture dev1" in run["end"][2]
    st, msg, lines = run["launch on a stream of 0"]
    assert st == S["TFL_ERROR_INVALID_HANDLE"]
    assert msg == (
        "fakegraphs runtime: graph_launch of a graph captured on FAKE dev 1 on a stream of "
        "FAKE dev 0"
    )
    assert "Instantiate dev1 flags 0" in lines
    assert run["launch"][2] == [
        "SetDevice 1",
        "GraphLaunch of dev1 on stream of dev1",
        "SetDevice 0",
    ]
    assert run["launch again"][2] == run["launch"][2]
    assert run["destroy"][2] == ["SetDevice 1", "ExecDestroy", "GraphDestroy", "SetDevice 0"]
    st, msg, _ = run["destroy again"]
    assert st == S["TFL_ERROR_INVALID_HANDLE"]
    assert re.fullmatch(r"graph_destroy: unknown or destroyed graph 0x\w+", msg)


def test_a_dialects_init_runs_once_before_any_call_and_is_retried_after_a_failure(run):
    st, msg, calls = run["hooks init fails"]
    assert (st, msg, calls) == (S["TFL_ERROR_DEVICE"], "fakeInit on -1 gave 700 []", [])
    assert run["hooks init retried"][2] == ["Init"]
    # Its failure_text words every SDK failure, its device_name names the devices.
    assert run["hooks malloc fails"][:2] == (
        S["TFL_ERROR_INVALID_VALUE"],
        "fakeMalloc on 0 gave 1 [64 bytes]",
    )
    assert run["hooks device_name 1"][2] == ["name hooked 1"]
    # A forked child forgets the parent's allocations and initialises again.
    assert (
        run["hooks stream destroy"][2][-1]
        == f"pointer_info kind {S['TFL_POINTER_UNKNOWN']} device -1"
    )
    assert run["hooks after fork"][2] == ["Init"]


def test_a_dialect_checking_arguments_refuses_them_before_the_sdk(run):
    assert run["hooks set_device 2"][:2] == (
        S["TFL_ERROR_INVALID_DEVICE"],
        "fakehooks runtime: no FAKE dev 2",
    )
    assert run["hooks mem_get_info NULL"][0] == S["TFL_ERROR_INVALID_VALUE"]
    st, msg, calls = run["hooks memset past the end"]
    assert st == S["TFL_ERROR_INVALID_VALUE"] and calls == []
    assert re.fullmatch(
        r"fakehooks runtime: memset_async 0x\w+: 32 bytes at offset 8 overrun its allocation of "
        r"32 bytes on FAKE dev 0",
        msg,
    )
    assert run["hooks unknown kind"][:2] == (
        S["TFL_ERROR_INVALID_VALUE"],
        "fakehooks runtime: unknown memcpy kind 7",
    )


def test_a_dialect_with_unordered_copies_drains_streams_around_them(run):
    # Pageable host memory: copied synchronously once the stream drained; pinned stays async.
    assert run["hooks pageable h2d"][2] == ["StreamSynchronize dev0", "Memcpy dev0"]
    assert run["hooks pinned h2d"][2] == ["MemcpyAsync kind1 dev0"]
    # A synchronous copy between devices drains both default streams, then the peer copy runs
    # with the source current.
    calls = [c for c in run["hooks sync d2d 1->0"][2] if not c.startswith("StreamCreate")]
    assert calls == [
        "SetDevice 1",
        "SetDevice 0",
        "SetDevice 1",
        "StreamSynchronize dev1",
        "SetDevice 0",
        "StreamSynchronize dev0",
        "SetDevice 1",
        "MemcpyPeer 1->0",
        "SetDevice 0",
    ]
    assert run["hooks stream destroy"][2][:2] == ["StreamSynchronize dev0", "StreamDestroy dev0"]


def test_a_dialect_with_stream_callbacks_and_tracked_events(run):
    assert run["hooks host fn"][2] == ["LaunchHostFunc"]  # the SDK's callback, no watcher event
    assert run["hooks wait on a never-recorded event"][:3] == (0, "", [])
    assert run["hooks query a never-recorded event"][:3] == (0, "", [])
    assert run["hooks elapsed never recorded"][:2] == (
        S["TFL_ERROR_INVALID_VALUE"],
        "event_elapsed_ms: an event was never recorded",
    )
    assert run["hooks elapsed untimed"][:2] == (
        S["TFL_ERROR_INVALID_VALUE"],
        "event_elapsed_ms: an event was created without timing",
    )
    # Recorded on a stream of device 1, the event of device 0 is made again there.
    assert run["hooks record on a stream of 1"][2] == [
        "SetDevice 1",
        "EventCreate dev1 timing",
        "SetDevice 0",
        "SetDevice 1",
        "EventRecord dev1",
        "SetDevice 0",
    ]
    assert run["hooks wait on it"][2] == ["StreamWaitEvent dev0 on event of dev1"]
