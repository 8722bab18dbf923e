"""The runtime ABI across versions: runtimes built against the frozen v1.0, v1.1 and v1.2 headers
(tests/abi/runtime_v1_*.h) load into today's core and run, without the later fields; tables
shorter than v1.0 or missing a v1.0 function are refused with the reason; the table's names come
from the header's one list (and Python's mirror of it); the v1.2 fields (native_stream, probe)
work on the sim runtime and are reported missing on older ones, as are v1.3's device graphs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.runtime

HERE = Path(__file__).resolve().parent
HEADER = HERE.parent / "include" / "torch_fl" / "runtime.h"
SHIM = HERE / "abi" / "older_runtime.c"


def _header_functions(path: Path) -> list[tuple[str, int]]:
    text = path.read_text()
    block = text[text.index("#define TFL_RUNTIME_V1_FUNCTIONS(X)") :]
    block = block[: block.index("\n\n")]
    return [(n, int(m)) for n, m in re.findall(r"X\((\w+), (\d+), [01]\)", block)]


def _compile(tmp_path: Path, name: str, *defines: str) -> Path:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.fail("no C compiler (cc, gcc, $CC) to build an older runtime: install one")
    out = tmp_path / f"lib{name}.so"
    cmd = [cc, "-shared", "-fPIC", "-O1", "-o", str(out), str(SHIM), "-ldl", *defines]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out


def _sim_library() -> str:
    from torch_fl.runtimes import sim

    return sim.library_path()


def _compile_v1_1(tmp_path: Path) -> Path:
    return _compile(
        tmp_path, "v11", '-DTFL_TEST_HEADER="runtime_v1_1.h"', '-DTFL_TEST_NAME="sim-v1.1"'
    )


def _compile_v1_2(tmp_path: Path) -> Path:
    return _compile(
        tmp_path, "v12", '-DTFL_TEST_HEADER="runtime_v1_2.h"', '-DTFL_TEST_NAME="sim-v1.2"'
    )


CHILD = textwrap.dedent(
    """
    import json
    import torch
    import torch_fl
    from multiprocessing.reduction import ForkingPickler

    C = torch_fl._C
    x = torch.arange(6.0, device="flagos:1")
    out = {
        "runtime": C.runtime_name(),
        "sum": (x * 2).sum().item(),
        "struct_size": C.runtime_struct_size(),
        "v1_0_size": C.runtime_v1_0_size(),
        "present": {name: present for name, _, _, _, present in C.runtime_fields()},
        "shares": C.runtime_shares_memory(),
    }
    try:
        ForkingPickler.dumps(x)
        out["pickled"] = True
    except RuntimeError as exc:
        out["pickle_error"] = str(exc)
    try:
        out["native_stream"] = torch.ops.torch_fl._native_stream(1)
    except RuntimeError as exc:
        out["native_stream_error"] = str(exc)
    out["graphs_supported"] = torch.flagos.graphs.supported()
    try:
        torch.flagos.Graph()
        out["graph"] = True
    except RuntimeError as exc:
        out["graph_error"] = str(exc)
    print(json.dumps(out))
    """
)


def _run_with(library: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.update(
        FLAGOS_VENDOR="sim",
        TORCH_FL_SIM_LIBRARY=str(library),
        TFL_TEST_SIM_LIBRARY=_sim_library(),
    )
    return subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120
    )


def test_a_v1_0_runtime_runs_on_this_core(tmp_path):
    proc = _run_with(_compile(tmp_path, "v10"))
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["runtime"] == "sim-v1.0" and got["sum"] == 30.0
    assert got["struct_size"] == got["v1_0_size"]
    later = [name for name, minor in _header_functions(HEADER) if minor > 0]
    assert later and not any(got["present"][name] for name in later), got["present"]
    assert all(got["present"][name] for name, minor in _header_functions(HEADER) if minor == 0)
    # Without the v1.1 IPC functions, flagos tensors cannot be shared: the error says why.
    assert got["shares"] is False
    message = got["pickle_error"]
    assert "cannot be shared between processes" in message and ".cpu()" in message
    assert "runtime ABI v1.0" in message and "ipc_get_handle" in message, message
    _assert_no_native_stream(got, "sim-v1.0")
    _assert_no_graphs(got, "sim-v1.0")


def _assert_no_native_stream(got: dict, name: str) -> None:
    message = got["native_stream_error"]
    assert "flagos:1" in message and f"runtime '{name}'" in message, message
    assert "native_stream (runtime ABI v1.2" in message, message


def _assert_no_graphs(got: dict, name: str) -> None:
    # The shim copies sim's capabilities, TFL_CAP_GRAPHS included: core must go by the fields
    # the table has, not by the bit alone.
    assert got["graphs_supported"] is False, got
    message = got["graph_error"]
    assert f"runtime '{name}'" in message and "runtime ABI v1.3" in message, message


def test_a_v1_1_runtime_runs_on_this_core(tmp_path):
    proc = _run_with(_compile_v1_1(tmp_path))
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["runtime"] == "sim-v1.1" and got["sum"] == 30.0
    fields = _header_functions(HEADER)
    assert all(got["present"][name] for name, minor in fields if minor <= 1)
    later = [name for name, minor in fields if minor > 1]
    assert later and not any(got["present"][name] for name in later), got["present"]
    # v1.1's IPC works; v1.2's native stream is refused with the reason.
    assert got["shares"] is True and got.get("pickled") is True, got
    _assert_no_native_stream(got, "sim-v1.1")
    _assert_no_graphs(got, "sim-v1.1")


def test_a_v1_2_runtime_runs_on_this_core(tmp_path):
    proc = _run_with(_compile_v1_2(tmp_path))
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["runtime"] == "sim-v1.2" and got["sum"] == 30.0
    fields = _header_functions(HEADER)
    assert all(got["present"][name] for name, minor in fields if minor <= 2)
    later = [name for name, minor in fields if minor > 2]
    assert later and not any(got["present"][name] for name in later), got["present"]
    # v1.1's IPC and v1.2's native stream work; v1.3's device graphs are refused with the reason.
    assert got["shares"] is True and got.get("pickled") is True, got
    assert got.get("native_stream"), got
    _assert_no_graphs(got, "sim-v1.2")


def test_probe_runtime_uses_the_table_then_the_older_symbol(tmp_path, monkeypatch):
    from torch_fl.vendors.sdk import probe_runtime

    # The built-in sim runtime has the v1.2 probe, the symbol is not needed (a fresh process:
    # sim reads FLAGOS_SIM_DEVICES once).
    script = (
        "import json, sys; from torch_fl.vendors.sdk import probe_runtime as p; "
        "print(json.dumps([p(sys.argv[1]), p(sys.argv[1], 'tfl_no_such_symbol')]))"
    )
    for devices, message in (("3", ""), ("0", "the sim runtime has no devices")):
        env = dict(os.environ, FLAGOS_SIM_DEVICES=devices, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
        proc = subprocess.run(
            [sys.executable, "-c", script, _sim_library()],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        got = json.loads(proc.stdout.strip().splitlines()[-1])
        assert got[0] == got[1] and got[0][0] == int(devices), got
        assert got[0][1].startswith(message), got
    # A v1.1 table has none: the runtime's own export answers, else there is no probe.
    monkeypatch.setenv("TFL_TEST_SIM_LIBRARY", _sim_library())
    older = _compile_v1_1(tmp_path)
    assert probe_runtime(older, "tfl_test_probe") == (3, "probed off the table")
    count, message = probe_runtime(older)
    assert count == 0 and "predates runtime ABI v1.2" in message, message


def test_python_table_mirror_matches_the_header():
    from torch_fl.runtimes import abi

    assert list(abi.FUNCTIONS) == _header_functions(HEADER)


def test_a_table_shorter_than_v1_0_is_refused(tmp_path):
    proc = _run_with(_compile(tmp_path, "short", "-DTFL_TEST_SHORTER_BY=8"))
    assert proc.returncode != 0
    assert "of at least" in proc.stderr and "(the v1.0 table)" in proc.stderr, proc.stderr


def test_a_v1_0_function_left_null_is_refused(tmp_path):
    proc = _run_with(_compile(tmp_path, "null", "-DTFL_TEST_NULL_FIELD=memset_async"))
    assert proc.returncode != 0
    assert "leaves the v1.0 function memset_async NULL" in proc.stderr, proc.stderr


def test_native_stream_is_the_current_streams_sdk_handle(flagos):
    """sim's SDK handle is its own stream object: the default stream's is what the table gives
    for a NULL stream, and another current stream has another, stable handle."""
    import ctypes

    import torch
    from torch_fl.runtimes import abi

    lib = ctypes.CDLL(_sim_library())
    native = abi.table_function(
        lib,
        "native_stream",
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.POINTER(ctypes.c_void_p),
    )
    assert native is not None
    for device in (0, 1):
        out = ctypes.c_void_p()
        assert native(None, device, ctypes.byref(out)) == 0
        assert torch.ops.torch_fl._native_stream(device) == out.value
    default = torch.ops.torch_fl._native_stream(0)
    side = torch.flagos.Stream(device="flagos:0")
    with torch.flagos.stream(side):
        handle = torch.ops.torch_fl._native_stream(0)
        assert handle not in (0, default)
        assert torch.ops.torch_fl._native_stream(0) == handle
    assert torch.ops.torch_fl._native_stream(0) == default
    with pytest.raises(RuntimeError, match="invalid device ordinal 7"):
        torch.ops.torch_fl._native_stream(7)


def test_table_fields_come_from_the_header_list(flagos):
    from torch_fl import _C

    fields = _C.runtime_fields()
    assert [(name, minor) for name, minor, *_ in fields] == _header_functions(HEADER)
    offsets = [offset for _, _, offset, _, _ in fields]
    assert offsets == sorted(offsets), "the list is in table order"
    v1_0 = [f for f in fields if f[1] == 0]
    assert _C.runtime_v1_0_size() == v1_0[-1][2] + v1_0[-1][3]
    # The built-in sim runtime is built against today's header: it has every field.
    assert _C.runtime_struct_size() >= fields[-1][2] + fields[-1][3]
    assert all(present for *_, present in fields)
    assert _C.runtime_abi_minor() == max(minor for _, minor in _header_functions(HEADER))


@pytest.mark.parametrize("minor", [1, 2])
def test_frozen_header_list_is_a_prefix_of_today(minor):
    """A frozen v1.N header's field list is today's up to its last field, which is v1.N's."""
    frozen = _header_functions(HERE / "abi" / f"runtime_v1_{minor}.h")
    today = _header_functions(HEADER)
    assert frozen and today[: len(frozen)] == frozen
    assert max(m for _, m in frozen) == minor
    assert all(m > minor for _, m in today[len(frozen) :])


def test_frozen_v1_0_header_is_a_prefix_of_today():
    """Every v1.0 function keeps its name and place in today's header, and only v1.0 ones."""
    text = (HERE / "abi" / "runtime_v1_0.h").read_text()
    body = text[text.index("typedef struct tfl_runtime_v1 {") : text.index("} tfl_runtime_v1;")]
    frozen = re.findall(r"\(\*(\w+)\)\(", body)
    today = _header_functions(HEADER)
    assert [n for n, _ in today[: len(frozen)]] == frozen
    assert {minor for _, minor in today[: len(frozen)]} == {0}
    assert all(minor > 0 for _, minor in today[len(frozen) :])
