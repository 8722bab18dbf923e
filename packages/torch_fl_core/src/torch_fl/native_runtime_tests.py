"""The device tests every CUDA-shaped native vendor's package runs against its SDK (emulated or
real), through torch: one suite, each vendor naming its dialect.

A vendor's ``tests/test_runtime.py``::

    from torch_fl.native_runtime_tests import *  # noqa: F403  (the shared tests)

    @pytest.fixture(scope="session")
    def dialect(musa):
        return Dialect(vendor="musa", runtime="musart", device="MUSA GPU", ...)

The tests take ``native`` (the vendor's device fixture, aliased from ``dialect.vendor``), ``emu``
(core's emulator fixture, :func:`torch_fl.testing.native_vendor_fixtures`) and ``dialect``.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

__all__ = [
    "Dialect",
    "native",
    "test_allocations_are_freed_on_their_own_device",
    "test_device_0_to_device_1_copy_moves_the_bytes",
    "test_events_time_and_streams_are_per_device",
    "test_failed_sdk_call_is_an_error_naming_call_device_and_status",
    "test_free_inside_an_allocation_is_an_invalid_pointer",
    "test_more_devices_than_pytorch_can_number_is_a_clear_error",
    "test_op_on_device_1_while_device_0_is_current",
    "test_out_of_memory_is_torch_out_of_memory",
    "test_probe_and_native_stream_are_in_the_table",
    "test_runtime_name_and_capabilities",
    "test_the_naive_cross_device_memcpy_would_have_left_stale_data",
    "test_the_vendor_says_it_runs_on_the_emulator",
    "test_view_as_real_and_complex_are_aliases",
]


@dataclasses.dataclass(frozen=True)
class Dialect:
    """What the shared tests need to know of one vendor's runtime and SDK."""

    vendor: str  # "gcu"
    runtime: str  # torch_fl._C.runtime_name(): "topsrt"
    device: str  # how messages name a device: "GCU card"
    capabilities: frozenset[str]  # the CAP_* names the runtime declares
    memcpy: str  # the SDK's synchronous copy ("topsMemcpy")
    cross_device_status: int  # what it answers for a D2D copy across devices
    peer_copy: str  # the async peer copy the runtime uses instead ("topsMemcpyPeerAsync")
    async_copy: str  # the async copy a D2H goes through ("topsMemcpyAsync")
    illegal_address: str  # the emulator's name of an illegal-address fault
    malloc: str  # the SDK's device allocation ("topsMalloc")
    emulator: str  # the emulator's name ("TopsRider emulator")
    device_count_env: str  # the emulator's device-count variable

    @property
    def package(self) -> str:
        return f"torch_fl_{self.vendor}"


ALL_CAPABILITIES = (
    "CAP_PEER_COPY",
    "CAP_EVENT_TIMING",
    "CAP_UNORDERED_PRODUCERS",
    "CAP_HOST_ADDRESSABLE_MEMORY",
    "CAP_PINNED_HOST_MEMORY",
)


@pytest.fixture
def native(request, dialect: Dialect):
    """The vendor's device fixture (``gcu``, ``musa``): the vendor active with its devices."""
    return request.getfixturevalue(dialect.vendor)


def _table_function(dialect: Dialect, field: str, restype, *argtypes):
    """A function of the runtime's table (the library core loaded), through ctypes."""
    import importlib

    from torch_fl.runtimes import abi

    lib_dir = importlib.import_module(dialect.package).library_dir()
    lib = ctypes.CDLL(str(lib_dir / f"lib{dialect.package}_runtime.so"))
    fn = abi.table_function(lib, field, restype, *argtypes)
    assert fn is not None, f"the {dialect.runtime} table has no {field}"
    return lib, fn


def test_runtime_name_and_capabilities(native, dialect: Dialect):
    import torch_fl

    assert torch_fl._C.runtime_name() == dialect.runtime
    caps = torch_fl._C.runtime_capabilities()
    declared = {name for name in ALL_CAPABILITIES if caps & getattr(torch_fl._C, name)}
    assert declared == set(dialect.capabilities)
    assert dialect.vendor in torch_fl._C.router_backends()


def test_probe_and_native_stream_are_in_the_table(native, dialect: Dialect):
    P = ctypes.POINTER
    v = dialect.vendor
    lib, probe = _table_function(
        dialect, "probe", ctypes.c_int, P(ctypes.c_int), ctypes.c_char_p, ctypes.c_size_t
    )
    for symbol in (f"tfl_{v}_probe", f"tfl_{v}_last_error"):
        assert not hasattr(lib, symbol), f"{symbol} left the ABI for the table (runtime ABI v1.2)"
    count, msg = ctypes.c_int(-1), ctypes.create_string_buffer(256)
    assert probe(ctypes.byref(count), msg, 256) == 0
    assert count.value == torch.flagos.device_count() and msg.value == b""
    _, stream = _table_function(
        dialect, "native_stream", ctypes.c_int, ctypes.c_void_p, ctypes.c_int, P(ctypes.c_void_p)
    )
    for device in (0, 1):
        default = ctypes.c_void_p()
        assert stream(None, device, ctypes.byref(default)) == 0 and default.value


def test_free_inside_an_allocation_is_an_invalid_pointer(native, dialect: Dialect):
    """free of a pointer inside an allocation, or host_free of memory host_malloc did not return,
    is INVALID_POINTER, and the allocation stays recorded."""
    P = ctypes.POINTER
    _, malloc = _table_function(
        dialect, "malloc", ctypes.c_int, P(ctypes.c_void_p), ctypes.c_size_t
    )
    _, free = _table_function(dialect, "free", ctypes.c_int, ctypes.c_void_p)
    _, host_free = _table_function(dialect, "host_free", ctypes.c_int, ctypes.c_void_p)
    _, last_error = _table_function(dialect, "last_error", ctypes.c_char_p)
    invalid_pointer = 4
    p = ctypes.c_void_p()
    assert malloc(ctypes.byref(p), 256) == 0
    assert free(p.value + 16) == invalid_pointer
    assert f"inside an allocation of {dialect.device} 0 but not its start".encode() in last_error()
    assert free(p) == 0
    buf = ctypes.create_string_buffer(64)
    assert host_free(ctypes.addressof(buf)) == invalid_pointer
    assert b"which host_malloc did not return" in last_error()


def test_device_0_to_device_1_copy_moves_the_bytes(native):
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


def test_op_on_device_1_while_device_0_is_current(native):
    x = torch.randn(5, 7)
    with torch.flagos.device(0):
        a = x.to("flagos:1")
        y = torch.abs(a) + 1
        assert y.device == torch.device("flagos", 1)
        assert torch.flagos.current_device() == 0
        torch.testing.assert_close(y.cpu(), x.abs() + 1)


def test_the_naive_cross_device_memcpy_would_have_left_stale_data(emu, native, dialect: Dialect):
    """What the runtime avoids: the SDK's plain memcpy (DeviceToDevice) across devices reports an
    error and moves nothing, so a caller ignoring the status keeps the destination's old bytes."""
    src = torch.arange(16, dtype=torch.float32, device="flagos:0")
    dst = torch.zeros(16, device="flagos:1")
    torch.flagos.synchronize(0)
    torch.flagos.synchronize(1)
    memcpy = getattr(emu.library(), dialect.memcpy)
    memcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    memcpy.restype = ctypes.c_int
    for current in (0, 1):
        with torch.flagos.device(current):
            status = memcpy(dst.data_ptr(), src.data_ptr(), 64, 3)
        assert status == dialect.cross_device_status
    assert torch.equal(dst.cpu(), torch.zeros(16))  # stale
    calls = emu.call_count(dialect.peer_copy)
    dst.copy_(src)  # the runtime's path: the peer copy from the source device
    assert emu.call_count(dialect.peer_copy) > calls
    assert torch.equal(dst.cpu(), torch.arange(16, dtype=torch.float32))


def test_failed_sdk_call_is_an_error_naming_call_device_and_status(emu, native, dialect: Dialect):
    x = torch.ones(4, device="flagos:1")
    torch.flagos.synchronize(1)
    with emu.fault(dialect.async_copy, dialect.illegal_address):
        with pytest.raises(RuntimeError) as info:
            x.cpu()
    msg = str(info.value)
    for part in (
        dialect.async_copy,
        f"{dialect.device} 1",
        dialect.illegal_address,
        dialect.runtime,
    ):
        assert part in msg, msg
    assert torch.equal(x.cpu(), torch.ones(4))  # usable afterwards


def test_out_of_memory_is_torch_out_of_memory(emu, native, dialect: Dialect):
    total = torch.flagos.mem_get_info(0)[1]
    with pytest.raises(torch.OutOfMemoryError, match=dialect.malloc):
        torch.empty(total + (1 << 20), dtype=torch.uint8, device="flagos:0")
    assert torch.ones(3, device="flagos:0").sum().item() == 3.0


def test_allocations_are_freed_on_their_own_device(emu, native):
    torch.flagos.empty_cache()
    before = [emu.live_allocations(0), emu.live_allocations(1)]
    t = torch.empty(1 << 20, device="flagos:1")
    assert emu.live_allocations(1) == before[1] + 1
    del t
    with torch.flagos.device(0):  # freed with device 1 current although device 0 is current here
        torch.flagos.empty_cache()
    assert [emu.live_allocations(0), emu.live_allocations(1)] == before


def test_events_time_and_streams_are_per_device(native):
    s = torch.flagos.Stream(device="flagos:1")
    start = torch.Event(device="flagos:1", enable_timing=True)
    end = torch.Event(device="flagos:1", enable_timing=True)
    with torch.flagos.stream(s):
        start.record()
        y = torch.ones(1000, device="flagos:1").sum()
        end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0
    assert y.item() == 1000.0


def test_view_as_real_and_complex_are_aliases(native):
    z = torch.randn(4, dtype=torch.complex64).to("flagos:0")
    r = torch.view_as_real(z)
    assert r.untyped_storage().data_ptr() == z.untyped_storage().data_ptr()
    back = torch.view_as_complex(r)
    assert back.untyped_storage().data_ptr() == z.untyped_storage().data_ptr()
    assert torch.equal(back.cpu(), z.cpu())


def test_the_vendor_says_it_runs_on_the_emulator(emu, native, dialect: Dialect):
    import importlib

    import torch_fl

    sdk = importlib.import_module(f"{dialect.package}.sdk")
    described = torch_fl.vendor().emulated
    assert isinstance(described, str) and dialect.emulator in described
    assert f"at {Path(sdk.loaded().runtime).parent.parent} " in described  # the one loaded
    env = {**os.environ, "FLAGOS_VENDOR": dialect.vendor}
    proc = subprocess.run(
        [sys.executable, "-m", "torch_fl"], capture_output=True, text=True, env=env, timeout=240
    )
    assert proc.returncode == 0, proc.stderr
    assert f"  emulated:  {described}" in proc.stdout.splitlines(), proc.stdout
    assert "(emulated)" in next(ln for ln in proc.stdout.splitlines() if ln.startswith("devices:"))


def test_more_devices_than_pytorch_can_number_is_a_clear_error(emu, native, dialect: Dialect):
    """PyTorch device indices are 8-bit: a runtime reporting more than 127 devices is refused at
    activation, naming the runtime, the count and the limit."""
    env = {**os.environ, "FLAGOS_VENDOR": dialect.vendor, dialect.device_count_env: "200"}
    proc = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.flagos.device_count())"],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert proc.returncode != 0, proc.stdout
    expected = f"runtime '{dialect.runtime}' reports 200 devices, more than the 127"
    assert expected in proc.stderr, proc.stderr
