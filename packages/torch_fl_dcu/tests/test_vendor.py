"""The dcu vendor object on a machine without DTK: what it reports, and the same delegate
runtime, box:cuda and collective profile as the cuda vendor."""

from __future__ import annotations

import importlib.metadata

import pytest
from conftest import run_python
from torch.autograd import ProfilerActivity
from torch_fl_dcu.vendor import ROUTE_TABLE, vendor

pytestmark = pytest.mark.dcu


def test_entry_point_names_the_vendor():
    eps = {ep.name: ep for ep in importlib.metadata.entry_points(group="torch_fl.vendors")}
    assert eps["dcu"].value == "torch_fl_dcu.vendor:vendor"
    assert eps["dcu"].load() is vendor and vendor.name == "dcu"


def test_delegate_runtime_and_cuda_abi():
    assert vendor.runtime_library() == "delegate:cuda"
    assert vendor.collective_profile() == "cuda-abi"
    assert vendor.compile_scheduling == "triton" and vendor.triton_target == "cuda"
    assert vendor.profiler_activity is ProfilerActivity.CUDA  # roctracer on DTK's torch
    assert vendor.route_table() == ROUTE_TABLE


def test_absent_on_cpu_torch_without_bundle_says_why():
    assert vendor.platform() == "none"
    assert vendor.is_present() is False
    why = vendor.why_absent()
    assert "not DTK's hipified torch" in why and "no DTK bundle" in why


def test_chosen_without_device_reports_zero_devices_and_why():
    code = (
        "import torch\n"
        "print('N', torch.flagos.device_count())\n"
        "try:\n    torch.empty(1, device='flagos')\nexcept Exception as e:\n    print('ERR', e)\n"
    )
    done = run_python(code, None, {"FLAGOS_VENDOR": "dcu"})
    assert done.returncode == 0, done.stderr
    assert "N 0" in done.stdout
    assert "'dcu'" in done.stdout and "not DTK's hipified torch" in done.stdout


def test_bundle_without_device_reports_hip_reason(bundle):
    code = (
        "import torch\nfrom torch_fl_dcu.vendor import vendor\n"
        "print('P', vendor.platform()); print('WHY', vendor.why_absent())\n"
    )
    done = run_python(code, bundle, {"FLAGOS_VENDOR": "dcu", "FLAGOS_DCU_SKIP_RUNTIME_CHECK": "1"})
    assert done.returncode == 0, done.stderr
    assert "P bundle" in done.stdout
    assert "no HIP runtime" in done.stdout or "hipGetDeviceCount" in done.stdout
