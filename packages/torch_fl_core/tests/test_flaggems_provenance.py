"""``# flaggems-measured:``: flaggems choices demoted where the installed FlagGems was not measured."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch_fl  # noqa: F401  (sets up flagos)
from torch_fl.routing import activation, provenance
from torch_fl.routing.route_table import RouteTableError, parse_file
from torch_fl.routing.validation import Catalog, validate

PRAGMA = "# flaggems-measured: flag_gems git:3c6f7537d on Enflame S60, torch 2.10\n"
TABLE = PRAGMA + "mm = flaggems, box:cpu, cpu\nabs = flaggems, cpu\nmul.out = box:cpu\n"


class FlagGemsCatalog(Catalog):
    """flaggems is registered and serves everything, as on a machine with FlagGems."""

    kernels = {"cpu": None, "flaggems": None, "box:cpu": {"aten::abs", "aten::mm", "aten::mul.out"}}

    def core_native_ops(self) -> frozenset[str]:
        return frozenset()

    def backends(self) -> list[str]:
        return sorted(self.kernels)

    def has_kernel(self, backend: str, op: str) -> bool:
        ops = self.kernels[backend]
        return ops is None or op in ops


@pytest.fixture
def installed(monkeypatch):
    """Set the installed FlagGems version the loader sees; a fresh warned-once record."""
    monkeypatch.setattr(provenance, "_warned", set())

    def set_version(version: str | None) -> None:
        monkeypatch.setattr(provenance, "installed_flaggems_version", lambda: version)

    return set_version


def _table(tmp_path: Path, text: str = TABLE):
    path = tmp_path / "vendor.conf"
    path.write_text(text)
    return parse_file(path)


def test_pragma_is_parsed_with_its_fields(tmp_path):
    table = _table(tmp_path)
    (measured,) = table.flaggems_measured.values()
    assert (measured.spec, measured.device, measured.torch, measured.line) == (
        "git:3c6f7537d",
        "Enflame S60",
        "2.10",
        1,
    )
    assert str(measured) == "flag_gems git:3c6f7537d on Enflame S60, torch 2.10"
    bare = _table(tmp_path, "# flaggems-measured: flag_gems 5.0.x\nmm = cpu\n")
    assert next(iter(bare.flaggems_measured.values())).spec == "5.0.x"


def test_malformed_pragma_is_an_error_at_its_line(tmp_path):
    with pytest.raises(RouteTableError) as err:
        _table(tmp_path, "mm = cpu\n# flaggems-measured: FlagGems latest\n")
    assert err.value.line == 2 and "flag_gems <5.0.2 | 5.4.x | git:<revision>>" in err.value.message


@pytest.mark.parametrize(
    "spec, version, expected",
    [
        ("git:3c6f7537d", "5.4.0rc2.post1+g3c6f7537d", True),
        ("git:3c6f7537d", "0.0+g3c6f7537d2d5d3aa", True),
        ("git:3c6f7537d", "5.4.0rc2.post1+ge7b4a865f", False),
        ("git:3c6f7537d", "5.0.2", False),
        ("5.0.x", "5.0.2", True),
        ("5.0.x", "5.1.0", False),
        ("5.0.2", "5.0.2", True),
        ("5.0.2", "5.0.2.post1", True),
        ("5.0.2", "5.0.3", False),
    ],
)
def test_spec_matches(spec, version, expected):
    assert provenance.spec_matches(spec, version) is expected


def test_other_installed_version_demotes_with_one_notice(tmp_path, installed):
    installed("5.0.2")
    table = _table(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert provenance.demote_unmeasured(table, environ={}) == 2
        assert provenance.demote_unmeasured(_table(tmp_path), environ={}) == 2  # no 2nd notice
    notices = [w for w in caught if "flag_gems" in str(w.message)]
    assert len(notices) == 1
    text = str(notices[0].message)
    assert "measured on flag_gems git:3c6f7537d on Enflame S60, torch 2.10" in text
    assert "installed flag_gems is 5.0.2" in text and "FLAGOS_FLAGGEMS_UNMEASURED=1" in text
    validate(table, FlagGemsCatalog())
    routes = table.resolve()
    assert routes["aten::mm"].backend == "box:cpu"
    assert routes["aten::abs"].backend == "cpu"
    assert routes["aten::mul.out"].backend == "box:cpu"
    mm = next(r for r in table.rules if r.op == "aten::mm")
    assert mm.skipped_choices[0][0] == "flaggems"
    assert "installed flag_gems is 5.0.2" in mm.skipped_choices[0][1]


def test_opt_in_keeps_flaggems(tmp_path, installed):
    installed("5.0.2")
    table = _table(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert provenance.demote_unmeasured(table, environ={provenance.UNMEASURED_VAR: "1"}) == 0
    validate(table, FlagGemsCatalog())
    assert table.resolve()["aten::mm"].backend == "flaggems"


def test_measured_version_keeps_flaggems(tmp_path, installed):
    installed("5.4.0rc2.post1+g3c6f7537d")
    table = _table(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert provenance.demote_unmeasured(table, environ={}) == 0
    validate(table, FlagGemsCatalog())
    assert table.resolve()["aten::abs"].backend == "flaggems"


def test_without_flaggems_nothing_is_demoted(tmp_path, installed):
    installed(None)
    table = _table(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert provenance.demote_unmeasured(table, environ={}) == 0
    assert next(r for r in table.rules if r.op == "aten::mm").choices[0] == "flaggems"


def test_table_without_the_pragma_is_untouched(tmp_path, installed):
    installed("5.0.2")
    table = _table(tmp_path, TABLE.replace(PRAGMA, ""))
    assert provenance.demote_unmeasured(table, environ={}) == 0


def test_load_routes_demotes(tmp_path, installed):
    installed("5.0.2")
    path = tmp_path / "vendor.conf"
    path.write_text(TABLE)
    try:
        with pytest.warns(RuntimeWarning, match="installed flag_gems is 5.0.2"):
            active = activation.load_routes(path=path, environ={}, catalog=FlagGemsCatalog())
        assert active.routes["aten::mm"].backend == "box:cpu"
        assert "measured on flag_gems git:3c6f7537d" in active.describe()
    finally:
        activation.load_routes()
