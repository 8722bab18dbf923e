"""Tests of torch-fl-gcu. They run the gcu vendor (FLAGOS_VENDOR=gcu is set here before torch is
imported) against the TopsRider emulator the package was built with; SDK-level tests load the
emulator's libraries directly."""

from __future__ import annotations

import os

os.environ.setdefault("FLAGOS_VENDOR", "gcu")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def gcu():
    import torch
    import torch_fl

    if torch_fl.vendor().name != "gcu":
        pytest.fail(f"these tests need the gcu vendor, got {torch_fl.vendor().name!r}")
    if not torch.flagos.is_available():
        pytest.fail("gcu vendor active but no device: " + torch_fl.vendors.active().absent_reason)
    return torch.flagos


@pytest.fixture(scope="session")
def emu(gcu):
    from torch_fl_gcu import emulator

    if not emulator.available():
        pytest.skip("torch-fl-gcu was built against a real TopsRider SDK, not the emulator")
    emulator.clear_faults()
    return emulator


@pytest.fixture(autouse=True)
def _no_faults_left():
    yield
    try:
        from torch_fl_gcu import emulator

        if emulator.available():
            emulator.clear_faults()
    except Exception:  # noqa: BLE001 -- a package that failed to build reports elsewhere
        pass
