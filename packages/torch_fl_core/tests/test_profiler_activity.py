"""The vendor's native profiler activity in flagos profiles (torch_fl.profiler_activity), on CPU.

A test vendor declares ``ProfilerActivity.CUDA`` and this torch is made to report it supported: a
CPU build of Kineto has no CUPTI and ignores the activity, so the profile runs and what is checked
is the activity set torch is handed and that core's own runtime-event timing stays off meanwhile.
The kernel rows themselves need a GPU: packages/torch_fl_cuda/tests/test_profiler_cupti.py.
"""

from __future__ import annotations

import pytest
import torch
import torch_fl
from torch.autograd import ProfilerActivity, ProfilerState
from torch.autograd.profiler import profile as autograd_profile
from torch.profiler import profile
from torch_fl import _C
from torch_fl import profiler_activity as pa
from torch_fl.vendors import Vendor

CUDA = ProfilerActivity.CUDA
PU1 = ProfilerActivity.PrivateUse1


class _TracedVendor(Vendor):
    name = "traced"
    profiler_activity = CUDA


@pytest.fixture
def clean():
    """No activity installed during the test; the process's own state put back afterwards."""
    cls = torch.autograd.profiler.profile
    saved = (pa._installed, cls.__init__, _C.kineto_session_enabled())
    pa.uninstall()
    yield
    pa.uninstall()
    pa._installed, cls.__init__ = saved[0], saved[1]
    _C.set_kineto_session_enabled(saved[2])


@pytest.fixture
def cuda_supported(clean, monkeypatch):
    monkeypatch.setattr(pa, "_supported_activities", lambda: {ProfilerActivity.CPU, PU1, CUDA})


def _device_rows(prof) -> list:
    return [e for e in prof.events() if e.device_type.name != "CPU"]


def _mm_profile(activities) -> profile:
    x = torch.randn(64, 64, device="flagos")
    (x @ x).sum()  # warm-up
    with profile(activities=activities) as prof:
        x @ x
        torch.flagos.synchronize()
    return prof


def test_the_default_declares_none():
    assert Vendor.profiler_activity is None
    assert _TracedVendor().profiler_activity is CUDA


def test_sim_installs_nothing():
    if torch_fl.vendor().profiler_activity is not None:
        pytest.skip(f"vendor {torch_fl.vendor().name!r} declares a profiler activity")
    assert pa.installed_activity() is None and not pa.in_force()
    assert not hasattr(torch.autograd.profiler.profile.__init__, pa._ORIGINAL)
    assert _C.kineto_session_enabled()
    prof = autograd_profile(use_device="flagos", use_kineto=True)
    assert CUDA not in prof.kineto_activities


def test_flagos_profiles_record_the_declared_activity(cuda_supported):
    pa.install(_TracedVendor.profiler_activity, vendor="traced")
    assert pa.installed_activity() is CUDA

    kineto = autograd_profile(use_device="flagos", use_kineto=True)
    assert {ProfilerActivity.CPU, CUDA} <= kineto.kineto_activities
    assert kineto.profiler_kind != ProfilerState.KINETO_PRIVATEUSE1_FALLBACK
    # In force from the first profile on: core's Kineto session is off for the process.
    assert pa.in_force() and not _C.kineto_session_enabled()

    legacy = autograd_profile(use_device="flagos", use_kineto=False)
    assert legacy.profiler_kind == ProfilerState.KINETO_PRIVATEUSE1_FALLBACK
    assert CUDA not in legacy.kineto_activities  # the stubs time every op: no second source
    assert CUDA not in autograd_profile().kineto_activities  # not a flagos profile
    autograd_profile(enabled=False)  # returns early in torch: the hook must cope

    prof = _mm_profile([ProfilerActivity.CPU, PU1])
    assert CUDA in prof.profiler.kineto_activities
    # CPU Kineto has no CUPTI, and core's runtime events are off: no device rows, no device time.
    assert _device_rows(prof) == []
    mm = [e for e in prof.events() if e.name == "aten::mm"]
    assert mm and all(e.device_time_total == 0 for e in mm), mm


def test_uninstall_gives_torch_back_its_init(cuda_supported):
    original = torch.autograd.profiler.profile.__init__
    pa.install(CUDA)
    pa.install(CUDA)  # idempotent: one wrapper
    wrapped = torch.autograd.profiler.profile.__init__
    assert getattr(wrapped, pa._ORIGINAL) is original
    assert pa.in_force() and not _C.kineto_session_enabled()
    pa.uninstall()
    assert torch.autograd.profiler.profile.__init__ is original
    assert pa.installed_activity() is None and _C.kineto_session_enabled()
    if _C.kineto_session_available():
        # Core's runtime events time the call again.
        prof = _mm_profile([ProfilerActivity.CPU, PU1])
        mm = [e for e in prof.events() if e.name == "aten::mm"]
        assert mm and all(e.device_time_total > 0 for e in mm), mm


def test_unsupported_activity_leaves_profiles_alone(clean, monkeypatch):
    # A torch without the tracer (a CPU wheel has no CUPTI): core's runtime events stay in use.
    monkeypatch.setattr(pa, "_supported_activities", lambda: {ProfilerActivity.CPU, PU1})
    pa.install(CUDA)
    prof = autograd_profile(use_device="flagos", use_kineto=True)
    assert CUDA not in prof.kineto_activities
    assert not pa.in_force() and _C.kineto_session_enabled()


def test_a_declaration_that_is_not_an_activity_is_refused(clean):
    with pytest.raises(TypeError, match="vendor 'typo' declares profiler_activity='CUDA'"):
        pa.install("CUDA", vendor="typo")  # type: ignore[arg-type]
    assert pa.installed_activity() is None
