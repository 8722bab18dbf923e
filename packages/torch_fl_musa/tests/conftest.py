"""Tests of torch-fl-musa. They run the musa vendor (FLAGOS_VENDOR=musa is set here before torch is
imported) against the MUSA emulator the package was built with; SDK-level tests load the
emulator's libraries directly.

The package finds the SDK at run time through MUSA_HOME (torch_fl_musa.sdk). When MUSA_HOME is
unset and the installed package was built against the emulator, it is set here to the in-tree
emulator prefix (emulator/prefix, where ``nox -s build-musa`` installs it), before torch is imported.
The fixtures (``musa``, ``emu``, ``group``) are core's: torch_fl.testing.native_vendor_fixtures
and vendor_group_fixture.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("FLAGOS_VENDOR", "musa")

EMULATOR_PREFIX = Path(__file__).resolve().parents[1] / "emulator" / "prefix"


def _emulator_home() -> None:
    try:
        from torch_fl_musa import sdk, sdk_info  # import neither torch nor torch_fl
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

musa, emu, _no_faults_left = native_vendor_fixtures("musa")
group = vendor_group_fixture("musa")  # the vendor tier, one rank
