"""The cuda vendor's own tests. Those marked ``gpu`` need a CUDA build of torch, a GPU and the cuda
vendor active (``FLAGOS_VENDOR=cuda``); elsewhere they skip with the reason. The rest run on any
machine (CI has no GPU)."""

from __future__ import annotations

import pytest
import torch


def _cuda_vendor_active() -> tuple[bool, str]:
    if torch.version.cuda is None:
        return False, f"torch {torch.__version__} is a CPU build"
    if torch.cuda.device_count() == 0:
        return False, "no CUDA device"
    import torch_fl.vendors

    sel = torch_fl.vendors.active()
    if sel is None or sel.name != "cuda":
        return False, f"the active flagos vendor is {sel.name if sel else None!r}, not 'cuda'"
    return True, ""


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a GPU and the cuda vendor active")


def pytest_collection_modifyitems(config, items):
    ok, why = _cuda_vendor_active()
    if ok:
        return
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=f"cuda vendor not active: {why}"))
