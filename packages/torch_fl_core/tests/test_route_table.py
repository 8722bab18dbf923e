"""Route tables: parsing, later-wins, includes, dtype rules, validation errors (path:line), the
environment variables, the Python-backend call plan, and the sim table generator's --check."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch_fl  # noqa: F401  (sets up flagos)
from torch_fl.routing import environment, generate
from torch_fl.routing.python_backend import PythonBackend
from torch_fl.routing.route_table import (
    RouteTableError,
    full_op_name,
    parse_file,
    parse_text,
)
from torch_fl.routing.validation import Catalog, validate

pytestmark = pytest.mark.routing

SRC_SIM_CONF = Path(__file__).resolve().parents[1] / "src" / "torch_fl" / "routes" / "sim.conf"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


class FakeCatalog(Catalog):
    """Validation without the router: a few backends with known kernel sets."""

    def __init__(self, kernels: dict[str, set[str] | None], native=("aten::view",)) -> None:
        self.kernels = kernels  # backend -> ops it has (None: all)
        self.native = frozenset(native)

    def core_native_ops(self) -> frozenset[str]:
        return self.native

    def backends(self) -> list[str]:
        return sorted(self.kernels)

    def has_kernel(self, backend: str, op: str) -> bool:
        ops = self.kernels[backend]
        return ops is None or op in ops


CATALOG = FakeCatalog({"cpu": None, "box:cpu": {"aten::abs", "aten::add.out", "aten::mul.out"}})


# ---------------------------------------------------------------------------------------------
# parsing
# ---------------------------------------------------------------------------------------------


def test_rules_comments_and_locations(tmp_path):
    path = write(
        tmp_path,
        "a.conf",
        "# a comment\n\nabs = box:cpu   # trailing comment\n  add.out=cpu\naten::mul.out = none\n",
    )
    table = parse_file(path)
    assert [(r.op, r.backend, r.line) for r in table.rules] == [
        ("aten::abs", "box:cpu", 3),
        ("aten::add.out", "cpu", 4),
        ("aten::mul.out", "none", 5),
    ]
    assert all(r.file == str(path) for r in table.rules)
    assert table.rules[2].backend_name == "cpu"  # none is cpu's alias
    assert table.resolve()["aten::mul.out"].backend == "cpu"


def test_op_name_spellings():
    assert full_op_name("abs") == "aten::abs"
    assert full_op_name("abs.default") == "aten::abs"
    assert full_op_name("aten::sum.dim_IntList") == "aten::sum.dim_IntList"
    with pytest.raises(ValueError, match="only aten"):
        full_op_name("torchvision::nms")


def test_later_line_wins(tmp_path):
    table = parse_text("abs = cpu\nadd.out = cpu\nabs = box:cpu\n", tmp_path / "t.conf")
    routes = table.resolve()
    assert routes["aten::abs"].backend == "box:cpu"
    assert routes["aten::add.out"].backend == "cpu"


def test_dtype_rules_parse_and_resolve(tmp_path):
    table = parse_text(
        "mul.out = box:cpu\n"
        "mul.out[int64, long, float64] = cpu\n"  # long is int64: listed once
        "mul.out[float64] = box:cpu\n",  # later dtype rule wins for float64 only
        tmp_path / "t.conf",
    )
    assert table.rules[1].dtypes == ("int64", "float64")
    route = table.resolve()["aten::mul.out"]
    assert route.backend == "box:cpu"
    assert route.backend_for("int64") == "cpu"
    assert route.backend_for("float64") == "box:cpu"
    assert route.backend_for("float32") == "box:cpu"
    assert route.as_spec() == (
        "aten::mul.out",
        "box:cpu",
        [(["int64", "float64"], "cpu"), (["float64"], "box:cpu")],
    )


def test_plain_rule_after_dtype_rules_replaces_them(tmp_path):
    table = parse_text("abs = box:cpu\nabs[int64] = cpu\nabs = box:cpu\n", tmp_path / "t.conf")
    assert table.resolve()["aten::abs"].dtype_rules == ()


def test_dtype_rule_needs_a_plain_rule(tmp_path):
    path = write(tmp_path, "t.conf", "add.out = cpu\nabs[int64] = cpu\n")
    with pytest.raises(RouteTableError) as err:
        parse_file(path).resolve()
    assert str(err.value).startswith(f"{path}:2: ")
    assert "no plain rule 'abs = <backend>'" in str(err.value)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("abs box:cpu", "cannot parse"),
        ("abs =", "no backend after '='"),
        ("abs[int65] = cpu", "unknown dtype 'int65'"),
        ("abs[] = cpu", "empty dtype list"),
        ("abs = box cpu", "cannot parse"),
        ("torchvision::nms = cpu", "only aten operators"),
        ("include", "'include' needs a file name"),
        ("include missing.conf", "cannot include missing.conf"),
    ],
)
def test_syntax_errors_name_file_and_line(tmp_path, line, message):
    path = write(tmp_path, "bad.conf", f"# header\nabs = cpu\n{line}\n")
    with pytest.raises(RouteTableError) as err:
        parse_file(path)
    assert str(err.value).startswith(f"{path}:3: ")
    assert message in str(err.value)
    assert err.value.path == str(path) and err.value.line == 3
    assert isinstance(err.value, ValueError)


def test_every_problem_is_reported(tmp_path):
    path = write(tmp_path, "bad.conf", "abs =\nadd.out = cpu\nmul.out[nope] = cpu\n")
    with pytest.raises(RouteTableError) as err:
        parse_file(path)
    assert [p[1] for p in err.value.problems] == [1, 3]


def test_include_is_relative_to_the_including_file(tmp_path):
    write(tmp_path, "vendor/base.conf", "abs = box:cpu\nadd.out = box:cpu\n")
    top = write(tmp_path, "top.conf", "include vendor/base.conf\nabs = cpu\n")
    cwd = os.getcwd()
    os.chdir("/")
    try:
        table = parse_file(top)
    finally:
        os.chdir(cwd)
    routes = table.resolve()
    assert routes["aten::abs"].backend == "cpu"  # after the include: wins
    assert routes["aten::add.out"].backend == "box:cpu"
    base = (tmp_path / "vendor" / "base.conf").resolve()
    assert table.files == [top.resolve(), base]
    assert table.rules[0].file == str(base) and table.rules[0].line == 1


def test_include_before_wins_over_nothing_after(tmp_path):
    write(tmp_path, "base.conf", "abs = cpu\n")
    top = write(tmp_path, "top.conf", "abs = box:cpu\ninclude base.conf\n")
    assert parse_file(top).resolve()["aten::abs"].backend == "cpu"


def test_include_cycle_names_the_line(tmp_path):
    a = write(tmp_path, "a.conf", "abs = cpu\ninclude b.conf\n")
    b = write(tmp_path, "b.conf", "\n\ninclude a.conf\n")
    with pytest.raises(RouteTableError) as err:
        parse_file(a)
    assert str(err.value).startswith(f"{b.resolve()}:3: include cycle: ")
    assert f"{a.resolve()} -> {b.resolve()} -> {a.resolve()}" in str(err.value)


def test_self_include_is_a_cycle(tmp_path):
    a = write(tmp_path, "a.conf", "include a.conf\n")
    with pytest.raises(RouteTableError, match=r"a\.conf:1: include cycle"):
        parse_file(a)


def test_unreadable_table(tmp_path):
    with pytest.raises(RouteTableError, match="cannot read route table"):
        parse_file(tmp_path / "nope.conf")


# ---------------------------------------------------------------------------------------------
# validation (against the dispatcher, with a fake router catalog)
# ---------------------------------------------------------------------------------------------


def _validate(tmp_path, text, catalog=CATALOG, name="t.conf"):
    path = write(tmp_path, name, text)
    return path, validate(parse_file(path), catalog)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("abss = cpu", "unknown operator 'abss' (did you mean 'abs'"),
        ("add.Tensr = cpu", "unknown overload 'add.Tensr': add has "),
        (
            "abs = nonsense",
            "unknown backend 'nonsense' for abs (valid backends: box:cpu, cpu, none)",
        ),
        ("sub.out = box:cpu", "backend 'box:cpu' has no kernel for sub.out"),
        ("view = cpu", "view is served natively by core"),
        ("linear = cpu", "linear is CompositeImplicitAutograd"),
    ],
)
def test_validation_errors_name_file_and_line(tmp_path, line, message):
    path = write(tmp_path, "t.conf", f"abs = box:cpu\n\n{line}\n")
    with pytest.raises(RouteTableError) as err:
        validate(parse_file(path), CATALOG)
    assert str(err.value) == f"{path}:3: {message}" or str(err.value).startswith(
        f"{path}:3: {message}"
    )


def test_valid_table(tmp_path):
    _, table = _validate(tmp_path, "abs = box:cpu\nmul.out[int64] = cpu\nmul.out = box:cpu\n")
    assert table.skipped == []
    assert [r.op for r in table.rules] == ["aten::abs", "aten::mul.out", "aten::mul.out"]


def test_generated_table_skips_what_this_torch_cannot_route(tmp_path):
    write(
        tmp_path,
        "gen.conf",
        "# generated-for: torch 1.0\nabs = box:cpu\nnot_an_op_anywhere = box:cpu\n"
        "sub.out = box:cpu\n",
    )
    top = write(tmp_path, "top.conf", "include gen.conf\nadd.out = box:cpu\n")
    table = validate(parse_file(top), CATALOG)
    assert [r.op for r in table.rules] == ["aten::abs", "aten::add.out"]
    skipped = [(r.line, why) for r, why in table.skipped]
    assert skipped == [
        (3, "unknown operator 'not_an_op_anywhere'"),
        (4, "backend 'box:cpu' has no kernel for sub.out"),
    ]


def test_generated_table_still_rejects_unknown_backends(tmp_path):
    gen = write(tmp_path, "gen.conf", "# generated-for: torch 2.13\nabs = box:nowhere\n")
    with pytest.raises(RouteTableError, match=rf"{gen}:2: unknown backend 'box:nowhere'"):
        validate(parse_file(gen), CATALOG)


def test_hand_written_lines_including_a_generated_table_stay_strict(tmp_path):
    write(tmp_path, "gen.conf", "# generated-for: torch 2.13\nabs = box:cpu\n")
    top = write(tmp_path, "top.conf", "include gen.conf\nnot_an_op_anywhere = cpu\n")
    with pytest.raises(RouteTableError, match=rf"{top}:2: unknown operator"):
        validate(parse_file(top), CATALOG)


# ---------------------------------------------------------------------------------------------
# environment
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("suffix", "op"),
    [
        ("abs", "aten::abs"),
        ("sum__dim_IntList", "aten::sum.dim_IntList"),
        ("_log_softmax", "aten::_log_softmax"),
        ("__and____Tensor", "aten::__and__.Tensor"),
        ("_foreach_add___List", "aten::_foreach_add_.List"),
        ("add__out", "aten::add.out"),
    ],
)
def test_op_variable_names(suffix, op):
    assert environment.op_from_variable(suffix) == op


def test_op_variable_unknown():
    with pytest.raises(ValueError, match=r"unknown operator 'abss'.*'\.' is written '__'"):
        environment.op_from_variable("abss")


def test_op_overrides_become_rules():
    env = {
        "FLAGOS_OP_sum__dim_IntList": "cpu",
        "FLAGOS_OP_abs": "box:cpu",
        "FLAGOS_OP_mul__out": "",  # empty: ignored
        "OTHER": "x",
    }
    rules = environment.op_overrides(env)
    assert [(r.op, r.backend, r.file, r.line) for r in rules] == [
        ("aten::abs", "box:cpu", "FLAGOS_OP_abs=box:cpu", None),
        ("aten::sum.dim_IntList", "cpu", "FLAGOS_OP_sum__dim_IntList=cpu", None),
    ]


def test_op_override_with_unknown_backend_lists_valid_ones(tmp_path):
    from torch_fl.routing.route_table import RouteTable

    table = RouteTable()
    table.extend(environment.op_overrides({"FLAGOS_OP_abs": "nonsense"}))
    with pytest.raises(RouteTableError) as err:
        validate(table, CATALOG)
    assert str(err.value) == (
        "FLAGOS_OP_abs=nonsense: unknown backend 'nonsense' for abs "
        "(valid backends: box:cpu, cpu, none)"
    )


def test_op_override_unknown_op():
    with pytest.raises(RouteTableError, match=r"^FLAGOS_OP_abss=cpu: unknown operator 'abss'"):
        environment.op_overrides({"FLAGOS_OP_abss": "cpu"})


@pytest.mark.parametrize("value", [5, None, b"cpu", ["cpu", 5]])
def test_override_with_a_value_that_is_no_backend_names_key_value_and_caller(value):
    from torch_fl import routing

    with pytest.raises(RouteTableError) as err:
        routing.override({"mm": value})
    text = str(err.value)
    assert text.startswith(f"override() at {__file__}:"), text
    assert f"'mm': {value!r} is not a backend" in text, text
    assert "a backend name ('cpu'), a preference list ('flaggems, cpu')" in text, text


def test_log_flags():
    assert environment.log_flags({}) == environment.LogFlags(False, False)
    assert environment.log_flags({"FLAGOS_LOG": "dispatch"}) == environment.LogFlags(True, False)
    assert environment.log_flags({"FLAGOS_LOG": "dispatch,fallback"}).fallback
    assert environment.log_flags({"FLAGOS_LOG": " Fallback "}) == environment.LogFlags(False, True)
    assert environment.log_flags({"FLAGOS_LOG": "all"}) == environment.LogFlags(True, True)
    with pytest.warns(UserWarning, match="unknown category 'bogus'"):
        assert environment.log_flags({"FLAGOS_LOG": "bogus,dispatch"}).dispatch


def test_config_override(tmp_path):
    assert environment.config_override({}) is None
    assert environment.config_override({"FLAGOS_BACKEND_CONFIG": " "}) is None
    conf = write(tmp_path, "x.conf", "")
    assert environment.config_override({"FLAGOS_BACKEND_CONFIG": str(conf)}) == conf.resolve()
    with pytest.raises(RouteTableError, match=r"^FLAGOS_BACKEND_CONFIG=/no/such\.conf: no such"):
        environment.config_override({"FLAGOS_BACKEND_CONFIG": "/no/such.conf"})


# ---------------------------------------------------------------------------------------------
# Python backends: the call plan from the schema
# ---------------------------------------------------------------------------------------------


def test_python_backend_calls_kernels_like_the_schema():
    seen = {}

    def mul_out(self, other, *, out):
        seen["mul_out"] = (self, other, out)
        torch.mul(self, other, out=out)
        return "ignored: the caller's out tensor is returned"

    def add(self, other, *, alpha):
        seen["add"] = alpha
        return torch.add(self, other, alpha=alpha)

    backend = PythonBackend("unit", {"mul.out": mul_out, "add.Tensor": add})
    assert backend.has_kernel("aten::mul.out") and not backend.has_kernel("aten::abs")
    a, b, out = torch.ones(3), torch.full((3,), 2.0), torch.empty(3)
    result = backend.trampoline("aten::mul.out", (a, b, out))
    assert result is out
    assert torch.equal(out, torch.full((3,), 2.0))
    assert seen["mul_out"][2] is out
    device = torch.device("flagos", 0)
    r = backend.trampoline("aten::add.Tensor", (a.to(device), b.to(device), 3))
    assert seen["add"] == 3
    assert r.device == device and torch.equal(r.cpu(), torch.full((3,), 7.0))


def test_python_backend_views_hook_and_lists():
    got = []

    def to_views(t):
        got.append(t)
        return t * 1  # a stand-in "view"

    def cat_out(tensors, dim, *, out):
        assert isinstance(tensors, list) and len(tensors) == 2
        torch.cat(tensors, dim, out=out)

    backend = PythonBackend("unit2", {"cat.out": cat_out}, to_views=to_views)
    a, b, out = torch.ones(2), torch.zeros(2), torch.empty(0)
    assert backend.trampoline("aten::cat.out", ([a, b], 0, out)) is out
    assert len(got) == 3  # both list elements, and out


def test_python_backend_core_views_keep_out_and_inplace_semantics(tmp_path):
    """view_device: core hands kernels alias views and maps results back (no Python hooks)."""
    from torch_fl import _C, routing
    from torch_fl.routing.python_backend import register_python_backend

    if not (_C.runtime_capabilities() & _C.CAP_HOST_ADDRESSABLE_MEMORY):
        pytest.skip(f"runtime {_C.runtime_name()!r}: no CPU alias views of its memory")
    seen = []

    def mul_out(self, other, *, out):  # writes through the view, returns it
        seen.append(out.device.type)
        return torch.mul(self, other, out=out)

    def add_(self, other, *, alpha):  # in-place, returns None
        self.add_(other, alpha=alpha)

    def abs_out(self, *, out):  # ignores `out` and returns a fresh, larger result
        return torch.abs(self)

    callers = []

    def neg(self):
        callers.append(sys._getframe(1).f_code.co_filename)
        return torch.neg(self)

    def sign(self):
        raise ValueError("kernel refused")

    register_python_backend(
        "viewtest",
        {"mul.out": mul_out, "add_.Tensor": add_, "abs.out": abs_out, "neg": neg, "sign": sign},
        view_device="cpu",
    )
    table = tmp_path / "views.conf"
    table.write_text(
        f"include {routing.active_table().path}\n"
        "mul.out = viewtest\nadd_.Tensor = viewtest\nabs.out = viewtest\nneg = viewtest\n"
        "sign = viewtest\n"
    )
    a_cpu, b_cpu = torch.randn(6), torch.randn(6)
    try:
        routing.load_routes(path=table)
        a, b = a_cpu.to("flagos"), b_cpu.to("flagos")
        out = torch.empty(6, device="flagos")
        r = torch.mul(a, b, out=out)
        assert r is out and seen == ["cpu"]
        torch.testing.assert_close(out.cpu(), a_cpu * b_cpu)
        c = a.clone()
        r = c.add_(b, alpha=2)
        assert r is c
        torch.testing.assert_close(c.cpu(), a_cpu + 2 * b_cpu)
        small = torch.empty(0, device="flagos")
        r = torch.abs(a, out=small)
        assert r is small and small.shape == (6,)
        torch.testing.assert_close(small.cpu(), a_cpu.abs())
        n = torch.neg(a)
        assert n.device.type == "flagos"
        torch.testing.assert_close(n.cpu(), -a_cpu)
        # Core calls the kernel itself (PythonBackend.direct_call), not through the trampoline.
        from torch_fl.routing import python_backend

        assert callers and python_backend.__file__ not in callers
        with pytest.raises(RuntimeError, match=r"'viewtest' failed in aten::sign.*kernel refused"):
            torch.sign(a)
    finally:
        routing.load_routes()


def test_python_backend_rejects_views_and_reserved_names():
    with pytest.raises(ValueError, match="view operator"):
        PythonBackend("x", {"transpose.int": lambda *a: None})
    for name in ("cpu", "none", "box:cpu", "bad name"):
        with pytest.raises(ValueError, match="cannot name a Python backend"):
            PythonBackend(name, {})


# ---------------------------------------------------------------------------------------------
# the sim table and its generator
# ---------------------------------------------------------------------------------------------


def _generate(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLAGOS_OP_")}
    env.pop("FLAGOS_BACKEND_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "torch_fl.routing.generate", "--vendor", "sim", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_sim_table_is_up_to_date():
    proc = _generate("--check", "--output", str(SRC_SIM_CONF))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_generator_is_deterministic():
    assert generate.generate("sim") == generate.generate("sim")


def test_check_reports_a_stale_table(tmp_path):
    text = SRC_SIM_CONF.read_text().replace("derive box:cpu\n", "")
    stale = write(tmp_path, "sim.conf", text + "bogus.out = box:cpu\n")
    proc = _generate("--check", "--output", str(stale))
    assert proc.returncode == 1
    assert "1 routes to add, 1 to remove" in proc.stderr
    assert "+ derive box:cpu" in proc.stderr and "- bogus.out = box:cpu" in proc.stderr


def _rules(text: str) -> dict[str, str]:
    return {
        ln.split(" = ")[0]: ln.split(" = ")[1]
        for ln in text.splitlines()
        if ln and not ln.startswith("#") and " = " in ln
    }


def test_sim_table_rules():
    text = generate.generate("sim")
    # The table is torch-independent: one derive statement, no minor pragma.
    assert [ln for ln in text.splitlines() if ln and not ln.startswith("#")] == ["derive box:cpu"]
    assert "generated-for" not in text
    rules = _rules(generate.expanded_text())
    # Structured operators are routed in every form (functional, in-place, out=).
    for present in ("mm.out", "add.out", "add.Tensor", "add_.Tensor", "mm", "conj_physical_"):
        assert rules.get(present) == "box:cpu", present
    # List operators (CPU's kernel is the composite loop) are one routed call, as on CUDA.
    for present in ("_foreach_add_.List", "_foreach_mul.Scalar", "_foreach_addcmul_.Scalar"):
        assert rules.get(present) == "box:cpu", present
    # Dense operators that make sparse tensors: their results' parts join flagos.
    for present in ("_to_sparse", "_to_sparse_csr", "_to_sparse_bsc"):
        assert rules.get(present) == "box:cpu", present
    for absent in ("copy_", "_to_copy", "_copy_from", "view", "set_.source_Storage"):
        assert absent not in rules, absent
    assert "empty.memory_format" not in rules and "tril_indices" not in rules


def test_the_loaded_sim_table_is_the_derivation():
    table = parse_file(SRC_SIM_CONF)
    derived = {f"{op}{list(d)}": b for op, d, b in generate.derived_rules("box:cpu")}
    loaded = {f"{r.op}{list(r.dtypes)}": r.backend for r in table.rules}
    assert loaded == derived
    assert {r.line for r in table.rules} == {
        SRC_SIM_CONF.read_text().splitlines().index("derive box:cpu") + 1
    }
    # Every overload the dispatcher gives a CPU kernel of its own is either routed or excluded
    # by a named rule: an overload new in some torch minor gets its route there.
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    routed, left = generate.classify_box_routes(
        lambda op: has(op, "CPU"), route_composite_implicit=True
    )
    own = {
        n for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::") and has(n, "CPU")
    }
    assert own <= set(routed) | {op for ops in left.values() for op in ops}


def test_derive_overrides_and_errors(tmp_path):
    table = parse_text("derive box:cpu\nmm = cpu\n")
    mm = [r for r in table.rules if r.op == "aten::mm"]
    assert [r.backend for r in mm] == ["box:cpu", "cpu"]  # the later line wins on resolve
    assert table.resolve()["aten::mm"].backend == "cpu"
    for bad in ("derive", "derive box:nowhere", "derive box:cpu except views", "derive gcu"):
        with pytest.raises(RouteTableError, match="cannot parse 'derive"):
            parse_text(bad + "\n", "t.conf")
    cuda = parse_text("derive box:cuda except composite-implicit\n")
    assert all(r.backend == "box:cuda" for r in cuda.rules)  # none on a CPU build of torch


def test_derived_rules_cache(tmp_path, monkeypatch):
    from torch_fl.routing import derived

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = derived.derived_rules("box:cpu")
    (cached,) = (tmp_path / "torch_fl" / "routes").iterdir()
    assert derived.derived_rules("box:cpu") == first
    # A damaged cache is recomputed and rewritten, never trusted.
    cached.write_text('[["aten::bogus", [], "box:cpu"]')
    assert derived.derived_rules("box:cpu") == first
    assert "aten::bogus" not in cached.read_text()
    # Another rule set has another key.
    derived.derived_rules("box:cpu", except_composite_implicit=True)
    assert len(list((tmp_path / "torch_fl" / "routes").iterdir())) == 2
    # An unwritable cache directory: derived anyway.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    (tmp_path / "file").write_text("")
    assert derived.derived_rules("box:cpu") == first


def test_rules_for_some_torch_minors(tmp_path):
    from torch_fl.routing.route_table import torch_admits
    from torch_fl.routing.validation import torch_minor

    assert torch_admits(">= 2.10, < 2.14", "2.13") and not torch_admits(">= 2.14", "2.13")
    assert torch_admits("== 2.9", "2.9") and not torch_admits("!= 2.9", "2.9")
    assert torch_admits("< 2.10", "2.9")  # minors compare as numbers, not strings
    here = torch_minor()
    table = parse_text(
        f"abs = box:cpu\nabs = cpu when torch == {here}\nmm = cpu when torch < 1.0\n", "t.conf"
    )
    assert table.resolve()["aten::abs"].backend == "cpu"
    assert "aten::mm" not in table.resolve()
    ((rule, why),) = table.skipped
    assert rule.op == "aten::mm" and why == f"for torch < 1.0; this is {here}"
    with pytest.raises(RouteTableError, match=r"t.conf:1: cannot parse the torch range '>> 2.1'"):
        parse_text("abs = cpu when torch >> 2.1\n", "t.conf")


def test_installed_sim_table_is_the_checked_in_one():
    from torch_fl.vendors import sim

    installed = sim.vendor.route_table()
    assert installed is not None and installed.is_file()
    assert installed.read_text() == SRC_SIM_CONF.read_text()
