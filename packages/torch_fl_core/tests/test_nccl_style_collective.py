"""The kit's collective library (``torch_fl/kit/sdk_collective.h``) in its NCCL-style dialect
(``nccl_style_collective.h``), on a fake NCCL-shaped SDK library that logs its calls
(``tests/kit/fake_ccl.cpp``), in the three group modes a vendor can choose: groups passed to the
library (NCCL), groups kept and issued one library group per run of one kind (ECCL), and a
library without groups whose sends and receives go as one batch (HCCL's mode). What a vendor's dialect decides is checked call by call: the
types and reductions the library gets, copies as bytes, the 64-bit refusal before anything is
queued, all_to_all as one group of sends and receives, the SDK's failures and an abort, and the
library missing altogether. The real libraries run in torch-fl-gcu's tests (the TopsRider
emulator's ECCL) and torch-fl-cuda's on the H200 (NCCL).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
F32, U8 = 7, 1  # NCCL's type values
SUM, MAX, MIN = 0, 2, 3


def _compiler() -> str:
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.fail("no C++ compiler (c++, g++, $CXX) to build the kit's test programs")
    return cxx


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("nccl_style")
    cxx = _compiler()
    run = dict(check=True, capture_output=True, text=True)
    subprocess.run(
        [cxx, "-std=c++17", "-shared", "-fPIC", "-O1", "-Wl,-soname,libfakeccl.so"]
        + ["-o", str(out / "libfakeccl.so"), str(HERE / "kit" / "fake_ccl.cpp")],
        **run,
    )
    for mixed, batched in ((0, 0), (1, 0), (0, 1)):
        subprocess.run(
            [cxx, "-std=c++17", "-O1", f"-DMIXED_GROUPS={mixed}", "-DREDUCES_64BIT=0"]
            + [f"-DBATCHED={batched}"]
            + [f"-I{HERE.parent / 'include'}", "-o", str(out / f"driver{mixed + 2 * batched}")]
            + [str(HERE / "kit" / "nccl_style_driver.cpp"), "-ldl"],
            **run,
        )
    return out


def _scenarios(built: Path, mixed: int, *extra: str) -> dict[str, tuple[int, str, list[str]]]:
    """scenario -> (tfl_status, last_error, the fake library's calls)."""
    text = subprocess.run(
        [str(built / f"driver{mixed}"), str(built / "libfakeccl.so"), *extra],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    out: dict[str, tuple[int, str, list[str]]] = {}
    for block in text.split("== ")[1:]:
        head, *calls = block.strip().splitlines()
        m = re.match(r"(.*?): (\d+) ?(.*)", head)
        assert m, head
        out[m.group(1)] = (int(m.group(2)), m.group(3), calls)
    return out


@pytest.mark.parametrize("mixed", [0, 1], ids=["one-kind-groups", "mixed-groups"])
def test_types_reductions_and_copies(built, mixed):
    s = _scenarios(built, mixed)
    assert s["before attach"][0] != 0 and "no runtime attached" in s["before attach"][1]
    assert s["comm_init"][2] == ["CommInitRank 1/2 id7"]  # the unique id's bytes travel
    call = "AllReduce count=4 type={} op={} stream=0x5 depth=0"
    assert s["all_reduce f32 sum"][2] == [call.format(F32, SUM)]
    # bool: bytes, "and" as MIN, "or" as MAX
    assert s["all_reduce bool min"][2] == [call.format(U8, MIN)]
    assert s["all_reduce bool sum"][2] == [call.format(U8, MAX)]
    # Refused before anything reaches the library, saying why.
    assert (
        s["all_reduce i32 avg"][:3:2] == (7, [])
        and "floating types only" in s["all_reduce i32 avg"][1]
    )
    assert (
        s["all_reduce i64 sum"][:3:2] == (7, [])
        and "no 64-bit type (int64)" in s["all_reduce i64 sum"][1]
    )
    # A library failure: its status mapped (a remote error is an abort), its words and the rank.
    status, message, _ = s["all_reduce fails"]
    assert status == 14 and "rank 1 of 2 (flagos:1, FAKE): FAKE error 6 (remote error)" in message
    # Copies move bytes: 3 float64 are 24 uint8, whatever the library's 64-bit support.
    assert s["broadcast f64"][2] == ["Broadcast count=24 type=1 root=1 depth=0"]
    # all_to_all: one send and one receive per rank, in a library group of their own.
    assert s["all_to_all"][2] == [
        "GroupStart",
        "Send count=8 type=1 peer=0 depth=1",
        "Recv count=8 type=1 peer=0 depth=1",
        "Send count=8 type=1 peer=1 depth=1",
        "Recv count=8 type=1 peer=1 depth=1",
        "GroupEnd",
    ]
    # A root or peer the communicator lacks is refused before the library sees it.
    bad = s["send to a rank it lacks"]
    assert bad[0] == 1 and "(flagos:1, FAKE) has no rank 2" in bad[1] and bad[2] == []
    assert s["group_end alone"][0] != 0 and "no group_start" in s["group_end alone"][1]
    assert s["comm_abort"][2] == ["CommAbort"]
    assert s["after abort"][0] == 14 and "was aborted" in s["after abort"][1]
    assert s["after abort"][2] == []
    assert s["comm_destroy"] == (0, "", [])  # an aborted communicator was released by the abort


def test_groups_of_several_kinds(built):
    body = [
        "AllReduce count=4 type=7 op=0 stream=0x5 depth=1",
        "AllReduce count=5 type=7 op=0 stream=0x5 depth=1",
        "AllGather count=32 type=1 depth=1",
        "Send count=16 type=1 peer=0 depth=1",
        # all_to_all inside a group joins it (no group of its own)
        "Send count=1 type=1 peer=0 depth=1",
        "Recv count=1 type=1 peer=0 depth=1",
        "Send count=1 type=1 peer=1 depth=1",
        "Recv count=1 type=1 peer=1 depth=1",
        "Recv count=16 type=1 peer=0 depth=1",
        "AllReduce count=6 type=7 op=2 stream=0x5 depth=1",
    ]
    # NCCL's dialect: the library groups whatever the caller grouped.
    assert _scenarios(built, 1)["group of three kinds"] == (
        0,
        "",
        ["GroupStart", *body, "GroupEnd"],
    )
    # ECCL's: one library group per run of one kind, in issue order (sends, receives and
    # all-to-alls are one kind), so every rank issues the same sequence of groups.
    runs = [body[0:2], body[2:3], body[3:9], body[9:10]]
    expected = [line for run in runs for line in ["GroupStart", *run, "GroupEnd"]]
    assert _scenarios(built, 0)["group of three kinds"] == (0, "", expected)


def test_a_missing_library_says_why_on_every_call(built):
    text = subprocess.run(
        [str(built / "driver0"), "unused", "missing"],
        check=True,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"},
    ).stdout
    assert "libfakeccl.so cannot be loaded" in text and "build tests/kit/fake_ccl.cpp" in text


def test_a_library_without_groups_batches_sends_and_receives(built):
    # HCCL's mode: all_to_all is one batch of a send and a receive per rank; a group's
    # collectives run one by one in issue order, and each run of sends, receives and
    # all-to-alls on one communicator and stream is one batch.
    s = _scenarios(built, 2)
    assert s["all_to_all"] == (0, "", ["BatchSendRecv S8@0 R8@0 S8@1 R8@1"])
    assert s["group of three kinds"] == (
        0,
        "",
        [
            "AllReduce count=4 type=7 op=0 stream=0x5 depth=0",
            "AllReduce count=5 type=7 op=0 stream=0x5 depth=0",
            "AllGather count=32 type=1 depth=0",
            "BatchSendRecv S16@0 S1@0 R1@0 S1@1 R1@1 R16@0",
            "AllReduce count=6 type=7 op=2 stream=0x5 depth=0",
        ],
    )
    assert s["broadcast f64"][2] == ["Broadcast count=24 type=1 root=1 depth=0"]
    assert s["group_end alone"][0] != 0 and "no group_start" in s["group_end alone"][1]
