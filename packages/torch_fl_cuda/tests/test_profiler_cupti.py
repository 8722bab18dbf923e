"""torch.profiler on the cuda vendor: device time from CUPTI's rows for the boxed CUDA kernels.

The vendor declares ``profiler_activity = ProfilerActivity.CUDA``, so a profile of ``flagos``
also records the CUDA activity and core's own runtime-event timing is off (docs/profiler.md).
Torch reports those kernel rows with device type PrivateUse1 (``flagos``) once a PrivateUse1
backend is registered (its ``deviceTypeFromActivity``), CUDA otherwise: both are accepted.

All marked ``gpu``: they need a GPU with the cuda vendor active (``FLAGOS_VENDOR=cuda``).
"""

from __future__ import annotations

import json

import pytest
import torch
from torch.autograd import DeviceType, ProfilerActivity
from torch.profiler import profile

pytestmark = [pytest.mark.gpu, pytest.mark.cuda]

KERNEL_DEVICES = (DeviceType.CUDA, DeviceType.PrivateUse1)


def _subtree(event):
    yield event
    for child in event.cpu_children:
        yield from _subtree(child)


def _kernels_under(event) -> list:
    return [k for e in _subtree(event) for k in e.kernels]


def _outermost(events, name: str) -> list:
    """CPU rows of ``name`` not nested in another (box:cuda may record the op again inside its
    route row)."""

    def nested(e) -> bool:
        p = e.cpu_parent
        while p is not None:
            if p.name == name:
                return True
            p = p.cpu_parent
        return False

    return [
        e for e in events if e.name == name and e.device_type == DeviceType.CPU and not nested(e)
    ]


def _matmul(x: torch.Tensor) -> torch.Tensor:
    return x @ x


@pytest.fixture
def x():
    from torch_fl import _C, profiler_activity

    assert profiler_activity.installed_activity() is ProfilerActivity.CUDA
    assert profiler_activity.in_force(), (
        f"torch {torch.__version__} does not list ProfilerActivity.CUDA in "
        f"_supported_activities(): {torch.autograd._supported_activities()}"
    )
    assert not _C.kineto_session_enabled()  # CUPTI only: nothing counted twice
    t = torch.randn(512, 512, device="flagos")
    _matmul(t).sum().item()  # warm-up outside the profile (cuBLAS handle and workspace)
    torch.flagos.synchronize()
    return t


def test_matmul_kernel_rows_under_aten_mm(x, tmp_path):
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], record_shapes=True
    ) as prof:
        _matmul(x)
        torch.flagos.synchronize()
    assert ProfilerActivity.CUDA in prof.profiler.kineto_activities
    events = prof.events()

    device_rows = [e for e in events if e.device_type in KERNEL_DEVICES]
    assert device_rows, f"no device rows; rows: {sorted({e.name for e in events})[:40]}"
    mm = _outermost(events, "aten::mm")
    assert len(mm) == 1, [e.name for e in events if e.device_type == DeviceType.CPU]
    kernels = _kernels_under(mm[0])
    assert kernels, f"no kernel linked under aten::mm; device rows: {device_rows}"
    assert mm[0].device_time_total > 0
    # Each linked kernel is one of the profile's device rows (CUPTI's, not a runtime-event
    # interval of core: those are named "<op> [<backend>]" and are off here).
    device_names = {e.name for e in device_rows}
    assert {k.name for k in kernels} <= device_names, (kernels, device_names)
    assert not any(k.name.startswith("mm [") for k in kernels), kernels

    route = [e for e in _subtree(mm[0]) if e.name.startswith("flagos::")]
    assert route and route[0].kwinputs.get("flagos_backend"), route

    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    events_json = trace["traceEvents"] if isinstance(trace, dict) else trace
    # CUPTI's kernels are "kernel" events on the GPU's rows; core's intervals would be too, but
    # they are off (checked above), so these are CUPTI's.
    trace_kernels = [ev for ev in events_json if ev.get("cat") == "kernel"]
    assert trace_kernels, sorted({ev.get("cat") for ev in events_json if ev.get("cat")})
    assert any(
        isinstance(ev.get("args"), dict) and ev["args"].get("flagos_backend") for ev in events_json
    ), "the trace carries no flagos_backend metadata"


def test_autograd_profiler_use_device_flagos(x):
    with torch.autograd.profiler.profile(use_device="flagos", use_kineto=True) as prof:
        _matmul(x)
        torch.flagos.synchronize()
    assert ProfilerActivity.CUDA in prof.kineto_activities
    mm = _outermost(prof.function_events, "aten::mm")
    assert mm and all(e.device_time_total > 0 for e in mm), mm
