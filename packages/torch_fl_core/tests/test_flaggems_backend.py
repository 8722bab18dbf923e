"""Core's FlagGems backend mechanism (torch_fl.routing.flaggems) against a fabricated flag_gems
package: names read without importing it, lazy import, conditions, the switch, errors that name the
operator and vendor, and a routed call served end to end on sim."""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch
from torch_fl.routing import flaggems


@pytest.fixture
def fake_gems(tmp_path, monkeypatch):
    """Writes a fake ``flag_gems`` package with the given body; resets core's cached table."""

    def make(body: str):
        pkg = tmp_path / "flag_gems"
        pkg.mkdir(exist_ok=True)
        (pkg / "__init__.py").write_text(textwrap.dedent(body))
        monkeypatch.syspath_prepend(str(tmp_path))
        return pkg

    monkeypatch.setattr(flaggems, "_table", None)
    monkeypatch.delenv("FLAGOS_FLAGGEMS", raising=False)
    monkeypatch.delenv("GEMS_VENDOR", raising=False)
    sys.modules.pop("flag_gems", None)
    yield make
    sys.modules.pop("flag_gems", None)
    monkeypatch.setattr(flaggems, "_table", None)


def test_names_read_from_source_without_import(fake_gems):
    fake_gems(
        """
        raise RuntimeError("must not be imported")
        _FULL_CONFIG = (
            ("abs", abs),
            ("add.Tensor", abs),
            ("_to_copy", abs, lambda: True),
            ("abs", abs),
        )
        """
    )
    assert flaggems.claimed_overloads() == ["_to_copy", "abs", "add.Tensor"]
    assert "flag_gems" not in sys.modules


def test_no_flag_gems_means_off(monkeypatch):
    monkeypatch.setattr(flaggems.importlib.util, "find_spec", lambda name: None)
    assert flaggems.register(vendor="x", gems_vendor="y", view_device=None) is False
    assert flaggems.status().startswith("off: flag_gems is not installed")


def test_table_honours_conditions(fake_gems):
    fake_gems(
        """
        def k(*a):
            return "k"
        _FULL_CONFIG = (("abs", k), ("neg", k, lambda: False), ("sin", k, lambda: True))
        """
    )
    assert sorted(flaggems.kernel_table()) == ["abs", "sin"]


def test_switch_and_vendor_precondition(fake_gems, monkeypatch):
    fake_gems("_FULL_CONFIG = (('abs', abs),)\n")
    monkeypatch.setenv("FLAGOS_FLAGGEMS", "0")
    assert flaggems.register(vendor="x", gems_vendor="y", view_device=None) is False
    assert flaggems.status() == "off: FLAGOS_FLAGGEMS=0"
    monkeypatch.delenv("FLAGOS_FLAGGEMS")
    ok = flaggems.register(
        vendor="x", gems_vendor="y", view_device=None, available=(False, "no hcu Triton")
    )
    assert ok is False and flaggems.status() == "off: no hcu Triton"


def test_lazy_kernel_errors_name_op_vendor_and_version(fake_gems):
    fake_gems(
        """
        __version__ = "0.0-test"
        _FULL_CONFIG = (("abs", lambda x: x),)
        """
    )
    with pytest.raises(
        RuntimeError, match=r"neg.*'flaggems'.*vendor 'v1'.*0\.0-test.*FLAGOS_OP_neg"
    ):
        flaggems.LazyKernel("neg", "v1")(torch.ones(1))
    assert flaggems.LazyKernel("abs", "v1")(5) == 5


def test_lazy_kernel_import_failure(fake_gems):
    fake_gems("raise ImportError('no triton here')\n_FULL_CONFIG = ()\n")
    with pytest.raises(RuntimeError, match=r"abs.*vendor 'v1'.*failed to import.*no triton here"):
        flaggems.LazyKernel("abs", "v1")(torch.ones(1))


@pytest.mark.parametrize("view_device", [None, "cpu"])
def test_routed_call_served_by_flaggems(fake_gems, tmp_path, view_device):
    from torch_fl import _C, routing

    if view_device == "cpu" and not (_C.runtime_capabilities() & _C.CAP_HOST_ADDRESSABLE_MEMORY):
        pytest.skip(f"runtime {_C.runtime_name()!r}: no CPU alias views of its memory")
    fake_gems(
        """
        import torch
        SEEN = []
        def abs_kernel(x):
            SEEN.append(x.device.type)
            return torch.where(x < 0, -x, x)
        _FULL_CONFIG = (("abs", abs_kernel),)
        """
    )
    before = _C.router_routes()
    assert flaggems.register(vendor="test", gems_vendor="testvendor", view_device=view_device)
    import os

    assert os.environ["GEMS_VENDOR"] == "testvendor"
    vendor_table = routing.active_table().path
    table = tmp_path / "gems.conf"
    table.write_text((f"include {vendor_table}\n" if vendor_table else "") + "abs = flaggems\n")
    try:
        routing.load_routes(path=table)
        _C.reset_dispatch_counts()
        x_cpu = torch.tensor([-1.5, 2.0, -3.0])
        y = torch.abs(x_cpu.to("flagos"))
        assert y.device.type == "flagos"
        torch.testing.assert_close(y.cpu(), x_cpu.abs())
        assert _C.dispatch_counts()["aten::abs"] == {"flaggems": 1}
        import flag_gems

        assert flag_gems.SEEN == [view_device or "flagos"]
    finally:
        routing.load_routes()
    assert _C.router_routes() == before


def test_routed_call_reports_import_failure_on_every_call(fake_gems, tmp_path):
    """With core views the router resolves the kernel itself (direct_call): a FlagGems that
    fails to import is an error naming the op on each call, never a cached non-kernel."""
    from torch_fl import _C, routing

    if not (_C.runtime_capabilities() & _C.CAP_HOST_ADDRESSABLE_MEMORY):
        pytest.skip(f"runtime {_C.runtime_name()!r}: no CPU alias views of its memory")
    # The claimed overloads are read from the source; importing it fails.
    fake_gems("raise ImportError('no triton here')\n_FULL_CONFIG = (('abs', abs),)\n")
    assert flaggems.register(vendor="test", gems_vendor="testvendor", view_device="cpu")
    vendor_table = routing.active_table().path
    table = tmp_path / "gems.conf"
    table.write_text((f"include {vendor_table}\n" if vendor_table else "") + "abs = flaggems\n")
    try:
        routing.load_routes(path=table)
        x = torch.tensor([-1.0, 2.0]).to("flagos")
        for _ in range(2):
            with pytest.raises(RuntimeError, match=r"aten::abs.*failed to import.*no triton here"):
                torch.abs(x)
    finally:
        routing.load_routes()
