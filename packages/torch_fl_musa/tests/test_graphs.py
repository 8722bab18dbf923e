"""Device graphs on MUSA: torch.flagos graphs over the runtime's graph seat, which the kit's
CUDA-style runtime fills from MUSA's stream capture (musaStreamBeginCapture, musaGraphLaunch).
muDNN kernels, copies and scalar operands are captured and replayed with new inputs, on either
GPU; a call the capture forbids fails with MUSA's status, and ending the capture names it. Core's
contract suite (tests/contract/test_graphs.py) runs on musa as well."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.musa


CAP_GRAPHS = 1 << 5  # runtime.h's TFL_CAP_GRAPHS


def test_musa_records_device_graphs(musa):
    import torch_fl

    assert torch.flagos.graphs.supported()
    assert int(torch_fl._C.runtime_capabilities()) & CAP_GRAPHS


@pytest.mark.parametrize("device", [0, 1])
def test_mudnn_kernels_replay_with_new_inputs(musa, device):
    with torch.flagos.device(device):
        x = torch.randn(16, 16, device="flagos")
        w = torch.randn(16, 16, device="flagos")
        torch.relu(x @ w)  # warm up outside the capture
        g = torch.flagos.Graph()
        with torch.flagos.graph(g):
            # `* 2 + 1`: CPU scalars, filled in on the device while capturing.
            y = torch.relu(x @ w) * 2 + 1
        for _ in range(3):
            x.copy_(torch.randn(16, 16))
            g.replay()
            torch.testing.assert_close(y.cpu(), torch.relu(x.cpu() @ w.cpu()) * 2 + 1)


def test_accelerator_graph_captures_on_musa(musa):
    if not hasattr(torch.accelerator, "Graph"):
        pytest.skip(f"torch {torch.__version__} has no torch.accelerator.Graph (torch >= 2.12)")
    x = torch.zeros(64, device="flagos")
    g = torch.accelerator.Graph()
    with torch.Stream(device="flagos"), g:
        x += 1
    g.replay()
    g.replay()
    assert x.cpu().eq(2).all()


@pytest.mark.parametrize(
    "call, musa_call",
    [
        (lambda: torch.flagos.current_stream().synchronize(), "musaStreamSynchronize"),
        (lambda: torch.flagos.synchronize(), "musaDeviceSynchronize"),
    ],
    ids=["stream", "device"],
)
def test_a_forbidden_call_is_named_when_the_capture_ends(musa, call, musa_call):
    x = torch.ones(8, device="flagos")
    g = torch.flagos.Graph()
    with pytest.raises(RuntimeError) as info:
        with torch.flagos.graph(g):
            x.add_(1)
            call()
    text = str(info.value)
    assert "musaStreamEndCapture" in text and "musaErrorStreamCaptureInvalidated" in text
    assert f"invalidated by: {musa_call}(...) on MUSA GPU 0 failed" in text
    assert "musaErrorStreamCaptureUnsupported" in text
    assert not torch.flagos.is_current_stream_capturing()
    g.reset()
    assert x.cpu().eq(1).all()  # the capture ran nothing; the device still works
