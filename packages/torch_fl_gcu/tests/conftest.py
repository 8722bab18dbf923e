"""Tests of torch-fl-gcu. They run the gcu vendor (FLAGOS_VENDOR=gcu is set here before torch is
imported) against the TopsRider emulator the package was built with; SDK-level tests load the
emulator's libraries directly.

The package finds the SDK at run time through TOPS_HOME (torch_fl_gcu.sdk). When TOPS_HOME is
unset and the installed package was built against the emulator, it is set here to the in-tree
emulator prefix (emulator/prefix, where ``nox -s build-gcu`` installs it), before torch is imported.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("FLAGOS_VENDOR", "gcu")

EMULATOR_PREFIX = Path(__file__).resolve().parents[1] / "emulator" / "prefix"


def _emulator_tops_home() -> None:
    if os.environ.get("TOPS_HOME", "").strip():
        return
    try:
        from torch_fl_gcu import sdk_info  # imports neither torch nor torch_fl
    except ImportError:  # not installed: the tests report it
        return
    built_on_emulator = sdk_info().get("emulator", "").upper() == "TRUE"
    if built_on_emulator and (EMULATOR_PREFIX / "lib" / "libtopsrt.so").is_file():
        os.environ["TOPS_HOME"] = str(EMULATOR_PREFIX)


_emulator_tops_home()

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
