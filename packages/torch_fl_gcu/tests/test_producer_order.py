"""Two producers on one stream (docs/gcu.md, "Two producers on one stream").

On the S60 a topsaten op queued behind a Triton kernel on the same stream does not see that
kernel's output, and a blocking device-to-host copy reads ahead of it too. The emulator reproduces
it (topsEmuLaunchForeign: a second producer's work that SDK work overtakes); the runtime declares
CAP_UNORDERED_PRODUCERS and core drains the stream at the producer boundary. These tests run a
Triton-like Python backend and show the stale reads without the barrier and the right bytes with it.
"""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.gcu


def _triton_like_exp(self):
    """Like a Triton launch: enqueue the result write on the flagos current stream and return."""
    from torch_fl_gcu import emulator

    out = torch.zeros_like(self)  # served by gcu (topsatenZero), before the launch
    host = torch.exp(self.detach().cpu()).contiguous()
    stream = torch.ops.torch_fl._native_stream(out.device.index)
    emulator.launch_foreign(stream, out.data_ptr(), host.numpy().tobytes())
    return out


@pytest.fixture
def triton_exp(emu, tmp_path):
    import torch_fl
    from torch_fl import routing

    routing.register_python_backend("triton_emu", {"exp": _triton_like_exp})
    vendor_table = routing.active_table().path
    table = tmp_path / "with_triton.conf"
    table.write_text(f"include {vendor_table}\nexp = triton_emu\n")
    routing.load_routes(path=table)
    yield
    torch_fl._C.set_producer_barrier(True)
    for d in range(torch.flagos.device_count()):
        torch.flagos.synchronize(d)
    routing.load_routes()


def _barriers() -> int:
    import torch_fl

    return int(torch_fl._C.producer_barrier_count())


def test_runtime_declares_unordered_producers(gcu):
    import torch_fl

    assert torch_fl._C.runtime_capabilities() & torch_fl._C.CAP_UNORDERED_PRODUCERS


@pytest.mark.parametrize("device", [0, 1])
def test_native_kernel_after_triton_sees_its_output(triton_exp, emu, device):
    x = torch.randn(64)
    a = x.to(f"flagos:{device}")
    y = torch.exp(a)  # triton_emu: queued, not done
    assert emu.pending_foreign(device) == 1
    before = _barriers()
    z = torch.abs(y)  # gcu: topsaten consumer -> core drains the stream first
    assert _barriers() == before + 1
    torch.testing.assert_close(z.cpu(), torch.exp(x).abs())
    # Only at the producer boundary: native work after native work adds no barrier.
    w = torch.abs(z) + 1
    assert _barriers() == before + 1
    torch.testing.assert_close(w.cpu(), torch.exp(x).abs() + 1)


def test_without_the_barrier_the_native_kernel_reads_stale_data(triton_exp, emu, gcu):
    import torch_fl

    x = torch.randn(64)
    a = x.to("flagos:0")
    torch_fl._C.set_producer_barrier(False)
    y = torch.exp(a)
    z = torch.abs(y)  # topsatenAbs runs ahead of the queued kernel: reads the zeros
    torch_fl._C.set_producer_barrier(True)
    torch.flagos.synchronize(0)
    assert torch.equal(z.cpu(), torch.zeros(64)), "the emulator should reproduce the S60 hazard"
    torch.testing.assert_close(y.cpu(), torch.exp(x))  # the kernel itself did run, later


def test_blocking_device_to_host_copy_waits_for_triton(triton_exp, emu, gcu):
    import torch_fl

    x = torch.randn(32)
    a = x.to("flagos:0")
    torch_fl._C.set_producer_barrier(False)
    stale = torch.exp(a).cpu()
    torch_fl._C.set_producer_barrier(True)
    assert torch.equal(stale, torch.zeros(32)), "without the barrier D2H reads ahead of the kernel"
    fresh = torch.exp(a).cpu()
    torch.testing.assert_close(fresh, torch.exp(x))
    assert torch.exp(a).sum().item() == pytest.approx(float(torch.exp(x).sum()), rel=1e-5)


def test_single_producer_chains_insert_no_barrier(gcu):
    """gcu -> gcu chains (one producer) stay barrier-free."""
    before = _barriers()
    x = torch.randn(16, device="flagos:0")
    for _ in range(3):
        x = torch.abs(x) * 2
    x.cpu()
    assert _barriers() == before
