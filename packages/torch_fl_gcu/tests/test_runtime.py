"""The topsrt runtime under the flagos device: device-scoped pointers, peer copies, errors."""

from __future__ import annotations

import ctypes

import pytest
import torch

pytestmark = pytest.mark.gcu


def test_runtime_is_topsrt_with_its_capabilities(gcu):
    import torch_fl

    assert torch_fl._C.runtime_name() == "topsrt"
    caps = torch_fl._C.runtime_capabilities()
    assert caps & torch_fl._C.CAP_UNORDERED_PRODUCERS
    assert caps & torch_fl._C.CAP_PEER_COPY
    assert not caps & torch_fl._C.CAP_HOST_ADDRESSABLE_MEMORY  # GCU memory is device-scoped
    assert "gcu" in torch_fl._C.router_backends()


def _table_function(field: str, restype, *argtypes):
    """A function of the topsrt runtime's table (the library core loaded), through ctypes."""
    from torch_fl.runtimes import abi
    from torch_fl_gcu import library_dir

    lib = ctypes.CDLL(str(library_dir() / "libtorch_fl_gcu_runtime.so"))
    fn = abi.table_function(lib, field, restype, *argtypes)
    assert fn is not None, f"the topsrt table has no {field}"
    return lib, fn


def test_probe_and_native_stream_are_in_the_table(gcu):
    P = ctypes.POINTER
    lib, probe = _table_function(
        "probe", ctypes.c_int, P(ctypes.c_int), ctypes.c_char_p, ctypes.c_size_t
    )
    for symbol in ("tfl_gcu_probe", "tfl_gcu_tops_stream", "tfl_gcu_last_error"):
        assert not hasattr(lib, symbol), f"{symbol} left the ABI for the table (runtime ABI v1.2)"
    count, msg = ctypes.c_int(-1), ctypes.create_string_buffer(256)
    assert probe(ctypes.byref(count), msg, 256) == 0
    assert count.value == torch.flagos.device_count() and msg.value == b""
    _, native = _table_function(
        "native_stream", ctypes.c_int, ctypes.c_void_p, ctypes.c_int, P(ctypes.c_void_p)
    )
    for device in (0, 1):
        default = ctypes.c_void_p()
        assert native(None, device, ctypes.byref(default)) == 0 and default.value
        # What Triton launches and topsaten calls enqueue on: the runtime's default stream.
        assert torch.ops.torch_fl._native_stream(device) == default.value
    side = torch.flagos.Stream(device="flagos:1")
    with torch.flagos.stream(side):
        handle = torch.ops.torch_fl._native_stream(1)
    assert handle and handle != torch.ops.torch_fl._native_stream(1)


def test_free_takes_only_what_malloc_and_host_malloc_returned(gcu):
    """One rule with ascend: free of a pointer inside an allocation, or host_free of memory
    host_malloc did not return, is INVALID_POINTER (topsFree of an inside pointer used to run,
    leaving the allocation recorded)."""
    P = ctypes.POINTER
    _, malloc = _table_function("malloc", ctypes.c_int, P(ctypes.c_void_p), ctypes.c_size_t)
    _, free = _table_function("free", ctypes.c_int, ctypes.c_void_p)
    _, host_free = _table_function("host_free", ctypes.c_int, ctypes.c_void_p)
    _, last_error = _table_function("last_error", ctypes.c_char_p)
    invalid_pointer = 4
    p = ctypes.c_void_p()
    assert malloc(ctypes.byref(p), 256) == 0
    assert free(p.value + 16) == invalid_pointer
    assert b"inside an allocation of GCU card 0 but not its start" in last_error()
    assert free(p) == 0
    buf = ctypes.create_string_buffer(64)
    assert host_free(ctypes.addressof(buf)) == invalid_pointer
    assert b"which host_malloc did not return" in last_error()


def test_device_0_to_device_1_copy_moves_the_bytes(gcu):
    x = torch.arange(64, dtype=torch.float32).reshape(8, 8)
    a = x.to("flagos:0")
    b = torch.full((8, 8), -1.0, device="flagos:1")
    b.copy_(a)
    assert torch.equal(b.cpu(), x)
    c = a.to("flagos:1")
    assert c.device == torch.device("flagos", 1)
    assert torch.equal(c.cpu(), x)
    d = c.t().to("flagos:0")  # strided, the other way
    assert torch.equal(d.cpu(), x.t())


def test_op_on_device_1_while_device_0_is_current(gcu):
    x = torch.randn(5, 7)
    with torch.flagos.device(0):
        a = x.to("flagos:1")
        y = torch.abs(a) + 1
        assert y.device == torch.device("flagos", 1)
        assert torch.flagos.current_device() == 0
        torch.testing.assert_close(y.cpu(), x.abs() + 1)


def test_the_naive_topsmemcpy_path_would_have_left_stale_data(emu, gcu):
    """What the runtime avoids: topsMemcpy(DeviceToDevice) across cards reports an error and moves
    nothing, so a caller ignoring the status keeps the destination's old bytes."""
    src = torch.arange(16, dtype=torch.float32, device="flagos:0")
    dst = torch.zeros(16, device="flagos:1")
    torch.flagos.synchronize(0)
    torch.flagos.synchronize(1)
    lib = emu.library()
    lib.topsMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    lib.topsMemcpy.restype = ctypes.c_int
    for current in (0, 1):
        with torch.flagos.device(current):
            status = lib.topsMemcpy(dst.data_ptr(), src.data_ptr(), 64, 3)
        assert status == 17  # topsErrorInvalidDevicePointer
    assert torch.equal(dst.cpu(), torch.zeros(16))  # stale
    calls = emu.call_count("topsMemcpyPeerAsync")
    dst.copy_(src)  # the runtime's path: topsMemcpyPeerAsync from the source card
    assert emu.call_count("topsMemcpyPeerAsync") > calls
    assert torch.equal(dst.cpu(), torch.arange(16, dtype=torch.float32))


def test_failed_sdk_call_is_an_error_naming_call_card_and_status(emu, gcu):
    x = torch.ones(4, device="flagos:1")
    torch.flagos.synchronize(1)
    with emu.fault("topsMemcpyAsync", "topsErrorIllegalAddress"):
        with pytest.raises(RuntimeError) as info:
            x.cpu()
    msg = str(info.value)
    for part in ("topsMemcpyAsync", "GCU card 1", "topsErrorIllegalAddress", "topsrt"):
        assert part in msg, msg
    assert torch.equal(x.cpu(), torch.ones(4))  # usable afterwards


def test_out_of_memory_is_torch_out_of_memory(emu, gcu):
    total = torch.flagos.mem_get_info(0)[1]
    with pytest.raises(torch.OutOfMemoryError, match="topsMalloc"):
        torch.empty(total + (1 << 20), dtype=torch.uint8, device="flagos:0")
    assert torch.ones(3, device="flagos:0").sum().item() == 3.0


def test_allocations_are_freed_on_their_own_card(emu, gcu):
    torch.flagos.empty_cache()
    before = [emu.live_allocations(0), emu.live_allocations(1)]
    t = torch.empty(1 << 20, device="flagos:1")
    assert emu.live_allocations(1) == before[1] + 1
    del t
    with torch.flagos.device(0):  # freed with card 1 current although card 0 is current here
        torch.flagos.empty_cache()
    assert [emu.live_allocations(0), emu.live_allocations(1)] == before


def test_events_time_and_streams_are_per_device(gcu):
    s = torch.flagos.Stream(device="flagos:1") if hasattr(torch.flagos, "Stream") else None
    start = torch.Event(device="flagos:1", enable_timing=True)
    end = torch.Event(device="flagos:1", enable_timing=True)
    start.record()
    torch.ones(1000, device="flagos:1").sum()
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0
    del s


def test_view_as_real_and_complex_are_aliases(gcu):
    z = torch.randn(4, dtype=torch.complex64).to("flagos:0")
    r = torch.view_as_real(z)
    assert r.untyped_storage().data_ptr() == z.untyped_storage().data_ptr()
    back = torch.view_as_complex(r)
    assert back.untyped_storage().data_ptr() == z.untyped_storage().data_ptr()
    assert torch.equal(back.cpu(), z.cpu())


def test_the_vendor_says_it_runs_on_the_emulator(emu, gcu):
    import os
    import subprocess
    import sys
    from pathlib import Path

    import torch_fl
    from torch_fl_gcu import sdk

    described = torch_fl.vendor().emulated
    assert isinstance(described, str) and "TopsRider emulator" in described
    assert f"at {Path(sdk.loaded().runtime).parent.parent} " in described  # the one loaded
    env = {**os.environ, "FLAGOS_VENDOR": "gcu"}
    proc = subprocess.run(
        [sys.executable, "-m", "torch_fl"], capture_output=True, text=True, env=env, timeout=240
    )
    assert proc.returncode == 0, proc.stderr
    assert f"  emulated:  {described}" in proc.stdout.splitlines(), proc.stdout
    assert "(emulated)" in next(ln for ln in proc.stdout.splitlines() if ln.startswith("devices:"))


def test_more_devices_than_pytorch_can_number_is_a_clear_error(emu, gcu):
    """PyTorch device indices are 8-bit: a runtime reporting more than 127 devices is refused at
    activation, naming the runtime, the count and the limit (it used to wrap to a negative
    device_count)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "FLAGOS_VENDOR": "gcu", "TOPS_EMU_DEVICE_COUNT": "200"}
    proc = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.flagos.device_count())"],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert proc.returncode != 0, proc.stdout
    assert "runtime 'topsrt' reports 200 devices, more than the 127" in proc.stderr, proc.stderr
