"""First contact: what a user sees on a configuration mistake (a short message naming the variable
or file and the fix, not a chained traceback), whether the devices are emulated, and that
torch-fl's own exit work stays out of the dispatch log. Each case runs in a child interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("flagos")

#: An uncaught configuration mistake prints at most this many lines (message + how to get by).
SHORT = 3


def _env(**env: str | None) -> dict[str, str]:
    out = {
        k: v
        for k, v in os.environ.items()
        if k not in ("FLAGOS_BACKEND_CONFIG", "FLAGOS_LOG") and not k.startswith("FLAGOS_OP_")
    }
    for key, value in env.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def _run(code: str, **env: str | None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=_env(**env),
        timeout=240,
    )


def _installed() -> tuple[str, ...]:
    from torch_fl import vendors

    selection = vendors.active()
    assert selection is not None
    return selection.installed


def _assert_short(proc: subprocess.CompletedProcess, *needles: str) -> list[str]:
    assert proc.returncode != 0, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "Failed to load the backend extension" not in proc.stderr, proc.stderr
    assert 1 <= len(lines) <= SHORT, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines
    return lines


# ---------------------------------------------------------------------------------------------
# configuration mistakes at `import torch`
# ---------------------------------------------------------------------------------------------


def test_unknown_vendor_is_one_short_message():
    proc = _run("import torch", FLAGOS_VENDOR="nonsense")
    lines = _assert_short(
        proc,
        "FLAGOS_VENDOR='nonsense' names no installed vendor",
        f"Installed vendors: {', '.join(_installed())}",
        "unset FLAGOS_VENDOR",
    )
    assert lines[0].startswith("torch-fl: "), lines
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in lines[-1]


def test_unknown_vendor_is_still_an_exception_for_programs():
    code = """
        try:
            import torch
        except RuntimeError as exc:
            print("CAUGHT", "FLAGOS_VENDOR='nonsense'" in str(exc.__cause__))
    """
    proc = _run(code, FLAGOS_VENDOR="nonsense", TORCH_DEVICE_BACKEND_AUTOLOAD=None)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["CAUGHT True"]
    code = """
        try:
            import torch_fl
        except RuntimeError as exc:
            print("CAUGHT", type(exc).__name__, "FLAGOS_VENDOR='nonsense'" in str(exc))
    """
    proc = _run(code, FLAGOS_VENDOR="nonsense", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["CAUGHT VendorSelectionError True"]


def test_import_torch_fl_alone_is_one_short_message():
    proc = _run("import torch_fl", FLAGOS_VENDOR="nonsense", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    _assert_short(proc, "FLAGOS_VENDOR='nonsense'")


def test_full_traceback_under_python_dev_mode():
    proc = subprocess.run(
        [sys.executable, "-X", "dev", "-c", "import torch"],
        capture_output=True,
        text=True,
        env=_env(FLAGOS_VENDOR="nonsense"),
        timeout=240,
    )
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr and "VendorSelectionError" in proc.stderr


def test_bad_route_table_is_a_short_message(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("abs = warp_drive\n")
    proc = _run("import torch", FLAGOS_BACKEND_CONFIG=str(conf))
    _assert_short(proc, f"{conf.resolve()}:1: unknown backend 'warp_drive' for abs")


def _absent_backend(kind: str) -> str:
    """A backend torch-fl knows by name that nothing in this process registers."""
    if kind == "box":
        return "box:mps"  # a device type torch knows; no runtime gives mps views of flagos memory
    import torch_fl

    return next(v for v in ("ascend", "gcu", "dcu") if v != torch_fl.vendor().name)


@pytest.mark.parametrize("kind", ["box", "other-vendor"])
def test_an_absent_backend_says_why_instead_of_unknown(kind):
    # A backend that exists but is absent here is not a misspelling: say why, as a list does.
    backend = _absent_backend(kind)
    proc = _run("import torch", FLAGOS_OP_mm=backend)
    _assert_short(
        proc,
        f"FLAGOS_OP_mm={backend}: backend {backend!r} is not available for mm: not registered",
        "valid backends here: ",
        f"'{backend}, cpu' falls back",
    )
    assert "unknown backend" not in proc.stderr, proc.stderr


def test_a_bad_sim_device_count_names_the_variable_not_an_sdk():
    proc = _run("import torch", FLAGOS_VENDOR="sim", FLAGOS_SIM_DEVICES="abc")
    _assert_short(
        proc,
        "FLAGOS_SIM_DEVICES='abc' is not a device count in 0..",
        "sim is built into torch-fl-core",
        "fix or unset FLAGOS_SIM_DEVICES",
    )
    assert "SDK" not in proc.stderr and "uninstall" not in proc.stderr, proc.stderr


def test_a_sim_device_index_out_of_range_says_how_to_get_more():
    code = """
        import torch
        for use in (torch.flagos.set_device, torch.flagos.synchronize,
                    torch.flagos.memory_allocated):
            try:
                use(5)
            except RuntimeError as exc:
                print(exc)
    """
    proc = _run(code, FLAGOS_VENDOR="sim", FLAGOS_SIM_DEVICES="2")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 3, proc.stdout
    for line in lines:
        assert "vendor 'sim' has 2 device(s)" in line, line
        assert "FLAGOS_SIM_DEVICES=6" in line, line


def test_a_misspelled_variable_warns_without_torch_fl_source(tmp_path):
    # The warning points at the user's `import torch`, not at a line inside torch-fl.
    script = tmp_path / "train.py"
    script.write_text("import torch\n")
    proc = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=_env(FLAGOS_VENDER="sim"),
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0] == (
        f"{script}:1: UserWarning: FLAGOS_VENDER is not a variable torch-fl reads "
        "(did you mean FLAGOS_VENDOR? known: docs/environment.md)"
    ), proc.stderr
    assert lines[1:] == ["  import torch"], proc.stderr


def _fake_vendor(site: Path, name: str, module_text: str) -> Path:
    """A vendor package ``fake_<name>`` installed into ``site`` (entry point included)."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"fake_{name}.py").write_text(textwrap.dedent(module_text))
    info = site / f"fake_{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: fake-{name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[torch_fl.vendors]\n{name} = fake_{name}:vendor\n")
    return site


def _pythonpath(site: Path) -> str:
    return os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)


def test_vendor_whose_runtime_library_does_not_load_is_a_short_message(tmp_path):
    site = _fake_vendor(
        tmp_path / "site",
        "nosdk",
        """
        from torch_fl.vendors import Vendor

        class NoSdk(Vendor):
            name = "nosdk"
            def is_present(self):
                return True
            def runtime_library(self):
                return "/nonexistent/nosdk/lib/libnosdk_runtime.so"

        vendor = NoSdk()
        """,
    )
    proc = _run("import torch", FLAGOS_VENDOR="nosdk", PYTHONPATH=_pythonpath(site))
    lines = _assert_short(
        proc,
        "vendor 'nosdk'",
        "/nonexistent/nosdk/lib/libnosdk_runtime.so",
        "Install the vendor's SDK",
        "FLAGOS_VENDOR",
    )
    assert "Exception raised from" not in proc.stderr and "frame #" not in proc.stderr, lines


def test_vendor_package_that_fails_to_import_is_a_short_message(tmp_path):
    site = _fake_vendor(
        tmp_path / "site", "broken", "import nosdk_python_bindings  # noqa: F401\nvendor = None\n"
    )
    proc = _run("import torch", FLAGOS_VENDOR="broken", PYTHONPATH=_pythonpath(site))
    _assert_short(
        proc,
        "the vendor package fake-broken failed to load",
        "No module named 'nosdk_python_bindings'",
        "FLAGOS_VENDOR",
    )


def test_a_bug_keeps_its_traceback(tmp_path):
    # Not a configuration mistake: the vendor's activate() hook is fine, its route_table() raises.
    site = _fake_vendor(
        tmp_path / "site",
        "buggy",
        """
        from torch_fl.vendors import Vendor
        from torch_fl.vendors.sim import vendor as sim

        class Buggy(Vendor):
            name = "buggy"
            def is_present(self):
                return True
            def runtime_library(self):
                return sim.runtime_library()
            def route_table(self):
                raise ZeroDivisionError("a bug in the vendor package")

        vendor = Buggy()
        """,
    )
    proc = _run("import torch", FLAGOS_VENDOR="buggy", PYTHONPATH=_pythonpath(site))
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr and "ZeroDivisionError: a bug" in proc.stderr


# ---------------------------------------------------------------------------------------------
# python -m torch_fl says when the devices are emulated
# ---------------------------------------------------------------------------------------------


def test_info_says_whether_the_devices_are_emulated():
    import torch_fl

    vendor = torch_fl.vendor()
    assert hasattr(type(vendor), "emulated"), "Vendor.emulated is not declared"
    emulated = vendor.emulated
    assert emulated is None or (isinstance(emulated, str) and emulated)
    proc = _run("import runpy; runpy.run_module('torch_fl', run_name='__main__')")
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip().startswith("emulated:")]
    if emulated is None:
        assert lines == [], proc.stdout
    else:
        assert lines == [f"  emulated:  {emulated}"], proc.stdout
        devices = next(ln for ln in proc.stdout.splitlines() if ln.startswith("devices:"))
        assert devices.endswith("(emulated)"), devices


# ---------------------------------------------------------------------------------------------
# the exit hook's own tensor work
# ---------------------------------------------------------------------------------------------


def test_exit_hook_work_is_not_in_the_dispatch_log():
    code = """
        import sys, torch
        x = torch.arange(4.0, device="flagos").neg()
        x.abs().sum().item()
        sys.stderr.write("SCRIPT-END\\n")
        sys.stderr.flush()
    """
    proc = _run(code, FLAGOS_LOG="dispatch,fallback")
    assert proc.returncode == 0, proc.stderr
    log = proc.stderr.splitlines()
    assert "SCRIPT-END" in log, proc.stderr
    assert any(ln.startswith("[flagos dispatch] ") for ln in log), "nothing was logged at all"
    after = log[log.index("SCRIPT-END") + 1 :]
    assert after == [], f"logged after the script's last op: {after}"
