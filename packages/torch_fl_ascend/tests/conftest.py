"""Tests of torch-fl-ascend. They run the ascend vendor (FLAGOS_VENDOR=ascend is set here before
torch is imported) against the CANN emulator the package was built with; toolkit-level tests load
the emulator's libraries directly.

The package finds the toolkit at run time through ASCEND_TOOLKIT_HOME (torch_fl_ascend.sdk). When
neither it nor ASCEND_HOME is set and the installed package was built against the emulator, it is
set here to the in-tree emulator prefix (emulator/prefix, where ``nox -s build-ascend`` installs
it), before torch is imported. The fixtures (``ascend``, ``emu``) are core's:
torch_fl.testing.native_vendor_fixtures.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("FLAGOS_VENDOR", "ascend")

EMULATOR_PREFIX = Path(__file__).resolve().parents[1] / "emulator" / "prefix"


def _emulator_home() -> None:
    try:
        from torch_fl_ascend import sdk, sdk_info  # import neither torch nor torch_fl
    except ImportError:  # not installed: the tests report it
        return
    env_vars, lib_dir, runtime = sdk.SPEC["env_vars"], sdk.SPEC["lib_dirs"][0], sdk.LIBRARIES[0]
    if any(os.environ.get(v, "").strip() for v in env_vars):
        return
    built_on_emulator = sdk_info().get("emulator", "").upper() == "TRUE"
    if built_on_emulator and (EMULATOR_PREFIX / lib_dir / runtime).is_file():
        os.environ[env_vars[0]] = str(EMULATOR_PREFIX)


_emulator_home()

from torch_fl.testing import native_vendor_fixtures, vendor_group_fixture  # noqa: E402

ascend, emu, _no_faults_left = native_vendor_fixtures("ascend")
group = vendor_group_fixture("ascend")  # the vendor tier, one rank
