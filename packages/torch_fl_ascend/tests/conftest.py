"""Tests of torch-fl-ascend. They run the ascend vendor (FLAGOS_VENDOR=ascend is set here before
torch is imported) against the CANN emulator the package was built with; toolkit-level tests load
the emulator's libraries directly.

The package finds the toolkit at run time through ASCEND_TOOLKIT_HOME (torch_fl_ascend.sdk). When
neither it nor ASCEND_HOME is set and the installed package was built against the emulator, it is
set here to the in-tree emulator prefix (emulator/prefix, where ``nox -s build-ascend`` installs
it), before torch is imported.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("FLAGOS_VENDOR", "ascend")

EMULATOR_PREFIX = Path(__file__).resolve().parents[1] / "emulator" / "prefix"


def _emulator_toolkit_home() -> None:
    if any(os.environ.get(v, "").strip() for v in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME")):
        return
    try:
        from torch_fl_ascend import sdk_info  # imports neither torch nor torch_fl
    except ImportError:  # not installed: the tests report it
        return
    built_on_emulator = sdk_info().get("emulator", "").upper() == "TRUE"
    if built_on_emulator and (EMULATOR_PREFIX / "lib64" / "libascendcl.so").is_file():
        os.environ["ASCEND_TOOLKIT_HOME"] = str(EMULATOR_PREFIX)


_emulator_toolkit_home()

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def ascend():
    import torch
    import torch_fl

    if torch_fl.vendor().name != "ascend":
        pytest.fail(f"these tests need the ascend vendor, got {torch_fl.vendor().name!r}")
    if not torch.flagos.is_available():
        pytest.fail(
            "ascend vendor active but no device: " + torch_fl.vendors.active().absent_reason
        )
    return torch.flagos


@pytest.fixture(scope="session")
def emu(ascend):
    from torch_fl_ascend import emulator

    if not emulator.available():
        pytest.skip("torch-fl-ascend was built against a real CANN toolkit, not the emulator")
    emulator.clear_faults()
    return emulator


@pytest.fixture(autouse=True)
def _no_faults_left():
    yield
    try:
        from torch_fl_ascend import emulator

        if emulator.available():
            emulator.clear_faults()
    except Exception:  # noqa: BLE001 -- a package that failed to build reports elsewhere
        pass
