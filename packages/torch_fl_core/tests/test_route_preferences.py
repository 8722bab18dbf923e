"""Preference lists (``op = a, b, c``) against a fake router catalog, backend spellings, and the
FLAGOS_FORCE_BACKEND / FLAGOS_FALLBACK_BUDGET / unknown-variable parsing."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch_fl  # noqa: F401  (sets up flagos)
from torch_fl.routing import environment
from torch_fl.routing.route_table import (
    RouteTableError,
    canonical_backend,
    parse_file,
    parse_text,
)
from torch_fl.routing.validation import Catalog, validate

pytestmark = pytest.mark.routing


class FakeCatalog(Catalog):
    """cpu serves everything; box:cpu a few overloads; gcu is registered but lacks mm."""

    kernels = {
        "cpu": None,
        "box:cpu": {"aten::abs", "aten::mm", "aten::mul.out"},
        "gcu": {"aten::abs", "aten::mul.out"},
    }

    def core_native_ops(self) -> frozenset[str]:
        return frozenset({"aten::view"})

    def backends(self) -> list[str]:
        return sorted(self.kernels)

    def has_kernel(self, backend: str, op: str) -> bool:
        ops = self.kernels[backend]
        return ops is None or op in ops


def _load(tmp_path: Path, text: str, name: str = "t.conf"):
    path = tmp_path / name
    path.write_text(text)
    return path, validate(parse_file(path), FakeCatalog())


def test_list_parses_with_choices_and_location(tmp_path):
    table = parse_text("mm = flaggems, gcu, cpu  # FlagGems first\nabs[int64] = gcu,cpu\n")
    mm, abs_ = table.rules
    assert (mm.choices, mm.backend, mm.line) == (("flaggems", "gcu", "cpu"), "flaggems", 1)
    assert str(mm) == "mm = flaggems, gcu, cpu"
    assert (abs_.dtypes, abs_.choices) == (("int64",), ("gcu", "cpu"))
    single = parse_text("abs = cpu\n").rules[0]
    assert single.choices == () and str(single) == "abs = cpu"


def test_first_unavailable_choice_is_skipped_with_why(tmp_path):
    _, table = _load(tmp_path, "mm = flaggems, gcu, box:cpu, cpu\nabs = gcu, cpu\n")
    mm, abs_ = table.rules
    assert mm.backend == "box:cpu"
    assert [c for c, _ in mm.skipped_choices] == ["flaggems", "gcu"]
    assert mm.skipped_choices[0][1] == "not registered in this process"
    assert mm.skipped_choices[1][1] == "backend has no kernel for mm"
    assert (abs_.backend, abs_.skipped_choices) == ("gcu", ())
    assert table.resolve()["aten::mm"].backend == "box:cpu"


def test_lists_keep_later_wins_and_dtype_rules(tmp_path):
    _, table = _load(
        tmp_path,
        "mm = cpu\nmm = flaggems, box:cpu\nmm[int64] = ascend, cpu\nmm[int64] = gcu, none\n",
    )
    route = table.resolve()["aten::mm"]
    assert route.backend == "box:cpu"
    assert route.dtype_rules == ((("int64",), "cpu"), (("int64",), "cpu"))
    _, table = _load(tmp_path, "mm[int64] = gcu, cpu\nmm = flaggems, box:cpu\n", name="u.conf")
    # A later plain rule replaces the dtype rules before it, as for single backends.
    assert table.resolve()["aten::mm"] == table.resolve()["aten::mm"].__class__(
        "aten::mm", "box:cpu"
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("mm = flaggems, gcux, cpu", "unknown backend 'gcux' in 'flaggems, gcux, cpu' for mm: "),
        ("mm = flaggems, ascend", "no backend of 'flaggems, ascend' is available for mm ("),
        ("mm = cpu,", "empty backend in the preference list 'cpu,'"),
        ("mm = cpu, a b", "cannot parse 'mm = cpu, a b'"),
        ("mm = cpu, b!d", "'b!d' is not a backend name"),
        ("view = flaggems, cpu", "view is served natively by core"),
    ],
)
def test_bad_lists_name_file_and_line(tmp_path, line, message):
    path = tmp_path / "t.conf"
    path.write_text(f"abs = cpu\n{line}\n")
    with pytest.raises(RouteTableError) as err:
        validate(parse_file(path), FakeCatalog())
    assert str(err.value).startswith(f"{path}:2: {message}"), str(err.value)


def test_all_unavailable_in_a_generated_table(tmp_path):
    # A registered backend lacking the kernel depends on the torch the table was made for:
    # skipped in a generated table; a list of backends none of which is registered stays an error.
    gen = "# generated-for: torch 1.0\nabs = cpu\nmm = gcu, flaggems\n"
    _, table = _load(tmp_path, gen)
    assert [r.op for r, _ in table.skipped] == ["aten::mm"]
    path = tmp_path / "g.conf"
    path.write_text("# generated-for: torch 1.0\nmm = flaggems, ascend\n")
    with pytest.raises(RouteTableError, match="g.conf:2: no backend of 'flaggems, ascend'"):
        validate(parse_file(path), FakeCatalog())


def test_single_backend_rules_are_unchanged(tmp_path):
    path = tmp_path / "t.conf"
    path.write_text("mm = flaggems\n")  # one backend: not registered is an error, as before
    with pytest.raises(RouteTableError) as err:
        validate(parse_file(path), FakeCatalog())
    # ... saying why (it is absent here), not that the name is unknown as if misspelled.
    assert str(err.value) == (
        f"{path}:1: backend 'flaggems' is not available for mm: not registered in this process "
        "(valid backends here: box:cpu, cpu, gcu, none; a preference list such as "
        "'flaggems, cpu' falls back when it is absent)"
    )
    path.write_text("mm = flagems\n")  # a misspelling is still unknown
    with pytest.raises(RouteTableError, match="unknown backend 'flagems' for mm"):
        validate(parse_file(path), FakeCatalog())


def test_backend_aliases():
    assert canonical_backend("none") == "cpu"
    assert canonical_backend("cuda") == "box:cuda"
    assert canonical_backend("flagos_python") == "flaggems"
    assert canonical_backend("gcu") == "gcu"


def test_op_variables_take_lists():
    env = {"FLAGOS_OP_mm": "flaggems, cpu", "FLAGOS_OP_abs": "cpu"}
    rules = {r.op: r for r in environment.op_overrides(env)}
    assert rules["aten::mm"].choices == ("flaggems", "cpu")
    assert rules["aten::abs"].choices == ()
    with pytest.raises(RouteTableError, match="FLAGOS_OP_mm=cpu,,: empty backend"):
        environment.op_overrides({"FLAGOS_OP_mm": "cpu,,"})


def test_force_backend_variable():
    assert environment.force_backend({}) is None
    assert environment.force_backend({"FLAGOS_FORCE_BACKEND": " cpu "}) == "cpu"
    with pytest.raises(RouteTableError, match="FLAGOS_FORCE_BACKEND=a,b: names one backend"):
        environment.force_backend({"FLAGOS_FORCE_BACKEND": "a,b"})


def test_forcing_an_absent_backend_says_why(tmp_path):
    from torch_fl import routing

    conf = tmp_path / "t.conf"
    conf.write_text("abs = cpu\n")
    before = routing.active_table()
    for forced, message in [
        ("flaggems", "FLAGOS_FORCE_BACKEND=flaggems: backend 'flaggems' is not available: not "
                     "registered in this process (valid backends here: box:cpu, cpu, gcu, none)"),
        ("flagems", "FLAGOS_FORCE_BACKEND=flagems: unknown backend 'flagems' (valid backends: "),
    ]:  # fmt: skip
        with pytest.raises(RouteTableError) as err:
            routing.load_routes(
                path=conf, environ={"FLAGOS_FORCE_BACKEND": forced}, catalog=FakeCatalog()
            )
        assert str(err.value).startswith(message), str(err.value)
    assert routing.active_table() is before  # a failed load installs nothing


@pytest.mark.parametrize(
    ("value", "budget"), [("0.05", 0.05), ("5%", 0.05), ("0", 0.0), ("1", 1.0), ("", None)]
)
def test_fallback_budget_values(value, budget):
    got = environment.fallback_budget({"FLAGOS_FALLBACK_BUDGET": value})
    assert got == pytest.approx(budget) if budget is not None else got is None


@pytest.mark.parametrize("value", ["abc", "-0.1", "1.5", "nan", "150%"])
def test_fallback_budget_rejects(value):
    with pytest.raises(environment.VariableError, match=f"FLAGOS_FALLBACK_BUDGET={value}: "):
        environment.fallback_budget({"FLAGOS_FALLBACK_BUDGET": value})


def test_unknown_variables_get_the_closest_name():
    env = {
        "FLAGOS_VENDER": "sim",
        "FLAGOS_VENDOR": "sim",
        "FLAGOS_OP_abs": "cpu",
        "FLAGOS_TEST_CKPT": "1",
        "FLAGOS_ZZZZZZZZZZZZ": "1",
        "PATH": "/bin",
    }
    assert environment.unknown_variables(env) == [
        ("FLAGOS_VENDER", "FLAGOS_VENDOR"),
        ("FLAGOS_ZZZZZZZZZZZZ", None),
    ]


def test_every_documented_variable_is_known():
    import re

    doc = Path(__file__).resolve().parents[3] / "docs" / "environment.md"
    # Core's rows; the vendors' (a generated block) are their Vendor.environment
    # (test_new_vendor.py), known where the vendor is installed.
    text = re.sub(r"vendor table: begin.*?vendor table: end", "", doc.read_text(), flags=re.S)
    documented = set(re.findall(r"`(FLAGOS_[A-Z0-9_]+?)(?:=[^`]*)?`", text))
    documented.discard("FLAGOS_OP_")
    unknown = {n for n, _ in environment.unknown_variables(dict.fromkeys(documented, "1"))}
    assert unknown == set(), unknown
