"""torch_npu claims PrivateUse1 for itself: with torch-fl in the same process, whichever comes
second fails with one error naming both packages, and nothing is left half registered."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.versions

# A stand-in with torch_npu's first effect: it names PrivateUse1 "npu" as it is imported.
FAKE_TORCH_NPU = """
import torch
torch.utils.rename_privateuse1_backend("npu")
REGISTERED = True
"""


@pytest.fixture
def fake_npu(tmp_path):
    pkg = tmp_path / "torch_npu"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(FAKE_TORCH_NPU)
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
