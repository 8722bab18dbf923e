"""The vendors' own PyTorch plugins (torch_npu, torch_musa, torch_gcu) claim PrivateUse1 for
themselves: with torch-fl in the same process, whichever comes second fails with one error naming
both packages and the torch-fl vendor to use instead, and nothing is left half registered."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.versions

# Stand-ins with each plugin's first effect: it renames PrivateUse1 as it is imported.
FAKE_PLUGIN = """
import torch
torch.utils.rename_privateuse1_backend({backend!r})
REGISTERED = True
"""
PLUGINS = {
    "torch_npu": ("npu", "ascend"),
    "torch_musa": ("musa", "musa"),
    "torch_gcu": ("gcu", "gcu"),
}


@pytest.fixture
def fake_npu(tmp_path):
    pkg = tmp_path / "torch_npu"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(FAKE_PLUGIN.format(backend="npu"))
    return tmp_path


def _run(code: str, path, **env) -> subprocess.CompletedProcess:
    # The stand-in goes first on the path; the rest of the path still finds torch-fl.
    search = os.pathsep.join(p for p in (str(path), os.environ.get("PYTHONPATH", "")) if p)
    full = {**os.environ, "FLAGOS_VENDOR": "sim", "PYTHONPATH": search, **env}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full,
        timeout=240,
    )


def _names_both(text: str) -> None:
    assert "torch_npu" in text and "torch-fl" in text and "PrivateUse1" in text, text
    assert "Segmentation" not in text


def test_torch_npu_imported_after_torch_fl_is_refused_before_it_runs(fake_npu):
    out = _run(
        """
        import sys, torch
        try:
            import torch_npu
        except ImportError as exc:
            print("REFUSED", exc)
        assert "torch_npu" not in sys.modules
        assert torch._C._get_privateuse1_backend_name() == "flagos"
        print(torch.ones(3, device="flagos").sum().item())
        """,
        fake_npu,
    )
    assert out.returncode == 0, out.stderr
    assert "REFUSED" in out.stdout
    _names_both(out.stdout)
    assert "torch-fl was loaded first" in out.stdout
    assert out.stdout.strip().endswith("3.0")


def test_torch_fl_after_torch_npu_fails_naming_both(fake_npu):
    # torch_npu first: its `import torch` autoloads torch-fl while torch_npu is importing.
    out = _run("import torch_npu", fake_npu)
    assert out.returncode != 0
    _names_both(out.stderr)
    assert "torch_npu was imported first" in out.stderr


def test_torch_fl_imported_explicitly_after_torch_npu_fails_naming_both(fake_npu):
    out = _run(
        """
        import torch, torch_npu
        assert torch._C._get_privateuse1_backend_name() == "npu"
        try:
            import torch_fl
        except ImportError as exc:
            print("REFUSED", exc)
        assert not hasattr(torch, "flagos"), "torch-fl left a device module behind"
        print("npu kept:", torch._C._get_privateuse1_backend_name())
        """,
        fake_npu,
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
    )
    assert out.returncode == 0, out.stderr
    _names_both(out.stdout)
    assert "npu kept: npu" in out.stdout


def test_without_torch_npu_installed_nothing_changes(tmp_path):
    out = _run(
        """
        import importlib.util, torch
        assert importlib.util.find_spec("torch_npu") is None
        try:
            import torch_npu
        except ModuleNotFoundError as exc:
            print("absent:", exc)
        """,
        tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "absent: No module named 'torch_npu'" in out.stdout


@pytest.mark.parametrize("module", sorted(PLUGINS))
def test_every_vendor_plugin_is_refused_naming_the_vendor_to_use(tmp_path, module):
    from torch_fl import conflicts

    backend, vendor = PLUGINS[module]
    claimant = conflicts.CLAIMANTS[module]
    assert (claimant[1], claimant[3]) == (backend, vendor)
    pkg = tmp_path / module
    pkg.mkdir()
    (pkg / "__init__.py").write_text(FAKE_PLUGIN.format(backend=backend))
    after = _run(
        f"import torch\ntry:\n    import {module}\nexcept ImportError as e:\n    print(e)", tmp_path
    )
    assert after.returncode == 0, after.stderr
    before = _run(f"import {module}", tmp_path)
    assert before.returncode != 0
    for text in (after.stdout, before.stderr):
        assert module in text and "PrivateUse1" in text, text
        assert f"torch-fl-{vendor}'s flagos device (FLAGOS_VENDOR={vendor})" in text, text
