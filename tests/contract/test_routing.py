"""Routing contract: route tables load, validate and route as docs/routing.md says, on any vendor.

Environment variables are read when torch_fl activates, so those tests run a child Python with the
variables set; the child uses the same vendor (FLAGOS_VENDOR is inherited). Tables are built on top
of the vendor's own table, so nothing here assumes which backends a vendor has beyond `cpu`; tests
that need a `box:<key>` backend or host-addressable memory skip (naming the vendor) without one.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import torch
from torch_fl.conformance import tolerances

pytestmark = [pytest.mark.routing, pytest.mark.usefixtures("flagos")]

ROUTING_VARS = ("FLAGOS_BACKEND_CONFIG", "FLAGOS_LOG")


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def _child_env(**env: str) -> dict[str, str]:
    out = {
        k: v
        for k, v in os.environ.items()
        if k not in ROUTING_VARS and not k.startswith("FLAGOS_OP_")
    }
    out.update(env)
    return out


def run_child(code: str, timeout: float = 240, **env: str) -> subprocess.CompletedProcess:
    """python -c code with the routing variables given (and no others from this process)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=_child_env(**env),
        timeout=timeout,
    )


def _vendor_name() -> str:
    import torch_fl

    return torch_fl.vendor().name


@pytest.fixture(scope="module")
def vendor_table() -> Path | None:
    """The table the vendor loads when no variable overrides it."""
    import torch_fl

    return torch_fl.vendor().route_table()


def _include_vendor(vendor_table: Path | None) -> str:
    return f"include {vendor_table}\n" if vendor_table else ""


@pytest.fixture
def restore_routes():
    """Tests that load other tables in this process get the process's own routes back."""
    from torch_fl import _C, routing

    before = _C.router_routes()
    yield
    routing.load_routes()
    assert _C.router_routes() == before


def _counts_for(op: str) -> dict[str, int]:
    from torch_fl import _C

    return dict(_C.dispatch_counts().get(op, {}))


# ---------------------------------------------------------------------------------------------
# loading and validation
# ---------------------------------------------------------------------------------------------


def test_vendor_table_loads_cleanly(vendor_table):
    from torch_fl import _C, routing
    from torch_fl.routing.validation import torch_minor

    active = routing.active_table()
    assert active is not None, "no route table was loaded when the vendor activated"
    installed = {op for op, _, _ in _C.router_routes()}
    assert installed == set(active.routes)
    if vendor_table is not None and torch_minor() in active.table.generated_for.values():
        # On the torch minor the table was generated for, nothing may be skipped.
        assert active.skipped == [], active.skipped[:5]
    import torch_fl

    assert f"routes:     {active.path}" in torch_fl.info()


def _box_lacks(box: str) -> str | None:
    """An overload that backend `box` has no kernel for (and that is otherwise routable)."""
    from torch_fl import _C
    from torch_fl.routing.validation import Catalog

    catalog = Catalog()
    for op in (
        "aten::cudnn_convolution",
        "aten::_cudnn_rnn",
        "aten::miopen_convolution",
        "aten::mkldnn_rnn_layer",
        "aten::_fft_c2c_mkl",
        "aten::mkldnn_convolution",
    ):
        if catalog.op_exists(op) and not catalog.is_composite_implicit(op):
            if not _C.backend_has_kernel(box, op):
                return op
    return None


@pytest.mark.parametrize("case", ["unknown backend", "misspelled op", "no kernel"])
def test_bad_table_fails_at_load_naming_file_and_line(
    tmp_path, vendor_table, box_backend, restore_routes, case
):
    from torch_fl import _C, routing

    if case == "unknown backend":
        line, message = "abs = warp_drive", "unknown backend 'warp_drive' for abs (valid backends: "
    elif case == "misspelled op":
        line, message = f"abss = {box_backend}", "unknown operator 'abss' (did you mean 'abs'"
    else:
        op = _box_lacks(box_backend)
        if op is None:
            pytest.skip(f"found no operator {box_backend} lacks")
        short = op.removeprefix("aten::")
        line, message = (
            f"{short} = {box_backend}",
            f"backend '{box_backend}' has no kernel for {short}",
        )
    conf = tmp_path / "bad.conf"
    conf.write_text(f"{_include_vendor(vendor_table)}# a comment\n{line}\n")
    lineno = 3 if vendor_table else 2
    before = _C.router_routes()
    with pytest.raises(routing.RouteTableError) as err:
        routing.load_routes(path=conf)
    assert str(err.value).startswith(f"{conf.resolve()}:{lineno}: {message}"), str(err.value)
    assert _C.router_routes() == before, "a failed load changed the installed routes"


def test_bad_table_fails_import(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("abs = cpu\nmul.out = warp_drive\n")
    proc = run_child("import torch, torch_fl", FLAGOS_BACKEND_CONFIG=str(conf))
    assert proc.returncode != 0
    assert f"{conf.resolve()}:2: unknown backend 'warp_drive' for mul.out" in proc.stderr


def test_flagos_op_nonsense_lists_valid_backends():
    # The backends a fresh process has (this one may hold backends tests registered).
    fresh = run_child("import torch, torch_fl; print(','.join(torch_fl._C.router_backends()))")
    assert fresh.returncode == 0, fresh.stderr
    proc = run_child("import torch, torch_fl", FLAGOS_OP_abs="nonsense")
    assert proc.returncode != 0
    assert "FLAGOS_OP_abs=nonsense: unknown backend 'nonsense' for abs (valid backends: " in (
        proc.stderr
    )
    listed = proc.stderr.split("valid backends: ", 1)[1].split(")", 1)[0].split(", ")
    assert set(listed) == {*fresh.stdout.strip().splitlines()[-1].split(","), "none"}


def test_flagos_op_routes_any_overload():
    # sum.dim_IntList is in no generated table (its structured kernel reaches sum.IntList_out).
    proc = run_child(
        """
        import torch, torch_fl
        from torch_fl import _C
        x = torch.arange(12.0).reshape(3, 4).to("flagos")
        print(torch.sum(x, dim=1).cpu().tolist())
        print(_C.dispatch_counts()["aten::sum.dim_IntList"])
        """,
        FLAGOS_OP_sum__dim_IntList="cpu",
        FLAGOS_LOG="dispatch",
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[0] == "[6.0, 22.0, 38.0]"
    assert json.loads(out[1].replace("'", '"')) == {"cpu": 1}
    assert "[flagos dispatch] sum.dim_IntList -> cpu" in proc.stderr.splitlines()


def test_loading_line_once_per_process(tmp_path, vendor_table):
    conf = tmp_path / "t.conf"
    conf.write_text(_include_vendor(vendor_table))
    proc = run_child(
        """
        import importlib, torch, torch_fl
        torch_fl.routing.load_routes()
        torch_fl.routing.load_routes()
        """,
        FLAGOS_BACKEND_CONFIG=str(conf),
        FLAGOS_LOG="fallback",
    )
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("[flagos] loading")]
    assert lines == [f"[flagos] loading backend config from {conf.resolve()}"]


def test_no_loading_line_without_flagos_log(tmp_path):
    proc = run_child("import torch, torch_fl")
    assert proc.returncode == 0, proc.stderr
    assert "[flagos]" not in proc.stderr


def test_every_problem_is_reported_at_once_syntax_errors_too(
    tmp_path, vendor_table, restore_routes
):
    from torch_fl import _C, routing

    conf = tmp_path / "three.conf"
    first = 2 if vendor_table else 1
    conf.write_text(
        f"{_include_vendor(vendor_table)}"
        "abs = warp_drive\n"  # unknown backend
        "abs cpu\n"  # syntax
        "abss = cpu\n"  # misspelled operator
    )
    env = {**_child_env(), "FLAGOS_OP_neg": "nonsense"}  # an override's problem joins them
    before = _C.router_routes()
    with pytest.raises(routing.RouteTableError) as err:
        routing.load_routes(path=conf, environ=env)
    where = str(conf.resolve())
    lines = str(err.value).splitlines()
    assert len(lines) == 4, str(err.value)
    assert lines[0].startswith(f"{where}:{first}: unknown backend 'warp_drive' for abs"), lines
    assert lines[1].startswith(f"{where}:{first + 1}: cannot parse 'abs cpu'"), lines
    assert lines[2].startswith(f"{where}:{first + 2}: unknown operator 'abss'"), lines
    assert lines[3].startswith("FLAGOS_OP_neg=nonsense: unknown backend 'nonsense' for neg"), lines
    assert [p[1] for p in err.value.problems] == [first, first + 1, first + 2, None]
    assert _C.router_routes() == before, "a failed load changed the installed routes"


def test_a_binary_route_table_is_named(tmp_path, restore_routes):
    from torch_fl import routing

    binary = tmp_path / "routes.bin"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    proc = run_child("import torch, torch_fl", FLAGOS_BACKEND_CONFIG=str(binary))
    assert proc.returncode != 0
    assert "UnicodeDecodeError" not in proc.stderr, proc.stderr
    assert f"{binary.resolve()}: cannot read route table: not UTF-8 text" in proc.stderr, (
        proc.stderr
    )
    assert "(FLAGOS_BACKEND_CONFIG names it)" in proc.stderr, proc.stderr
    # In-process, and through an include: a RouteTableError naming the including line.
    with pytest.raises(routing.RouteTableError, match="not UTF-8 text"):
        routing.load_routes(path=binary)
    top = tmp_path / "top.conf"
    top.write_text("# header\ninclude routes.bin\n")
    with pytest.raises(routing.RouteTableError) as err:
        routing.load_routes(path=top)
    assert str(err.value).startswith(
        f"{top.resolve()}:2: cannot include routes.bin: {binary.resolve()} is not UTF-8 text"
    ), str(err.value)


def test_dtype_rule_splits_one_overload(tmp_path, vendor_table, box_backend):
    conf = tmp_path / "dtype.conf"
    conf.write_text(f"{_include_vendor(vendor_table)}abs = {box_backend}\nabs[int64] = cpu\n")
    proc = run_child(
        """
        import torch, torch_fl
        from torch_fl import _C
        _C.reset_dispatch_counts()
        i = torch.tensor([-3, 0, 2], device="flagos")
        f = torch.tensor([-1.5, 0.0, 2.5], device="flagos")
        print(torch.abs(i).cpu().tolist(), torch.abs(f).cpu().tolist())
        print(sorted(_C.dispatch_counts()["aten::abs"].items()))
        """,
        FLAGOS_BACKEND_CONFIG=str(conf),
        FLAGOS_LOG="dispatch",
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[0] == "[3, 0, 2] [1.5, 0.0, 2.5]"
    assert out[1] == str(sorted([(box_backend, 1), ("cpu", 1)]))
    log = proc.stderr.splitlines()
    assert "[flagos dispatch] abs -> cpu" in log
    assert f"[flagos dispatch] abs -> {box_backend}" in log
    assert log.index("[flagos dispatch] abs -> cpu") < log.index(
        f"[flagos dispatch] abs -> {box_backend}"
    ), "int64 ran first: it must be the call that went to cpu"


# ---------------------------------------------------------------------------------------------
# routing changes the route, not the numbers
# ---------------------------------------------------------------------------------------------

MODEL_SCRIPT = """
import sys, torch, torch_fl
import torch.nn.functional as F
from torch import nn
from torch_fl import _C

torch.manual_seed(0)
model = nn.Sequential(
    nn.Linear(16, 32), nn.LayerNorm(32), nn.Tanh(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4)
)
g = torch.Generator().manual_seed(1)
x = torch.randn(64, 16, generator=g)
y = torch.randint(0, 4, (64,), generator=g)
dev = torch.device("flagos")
model.to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
_C.reset_dispatch_counts()
for step in range(5):
    loss = F.cross_entropy(model(x.to(dev)), y.to(dev))
    opt.zero_grad()
    loss.backward()
    opt.step()
state = {k: v.cpu() for k, v in model.state_dict().items()}
state["loss"] = loss.detach().cpu()
torch.save(state, sys.argv[1])
torch.save(_C.dispatch_counts(), sys.argv[1] + ".counts")
"""


def test_same_numbers_under_two_route_tables(tmp_path, vendor_table, exact_kernels, tol):
    from torch_fl import routing

    active = routing.active_table()
    routed = sorted(active.routes) if active else []
    if len(routed) < 4:
        pytest.skip(f"vendor {_vendor_name()!r} routes fewer than 4 overloads")
    table_a = tmp_path / "a.conf"
    table_a.write_text(_include_vendor(vendor_table))
    # Every other routed overload forced to the CPU fallback.
    forced = [op.removeprefix("aten::") for op in routed[::2]]
    table_b = tmp_path / "b.conf"
    table_b.write_text(_include_vendor(vendor_table) + "".join(f"{op} = cpu\n" for op in forced))
    script = tmp_path / "model.py"
    script.write_text(MODEL_SCRIPT)

    results = {}
    for name, table in (("a", table_a), ("b", table_b)):
        out = tmp_path / f"{name}.pt"
        proc = subprocess.run(
            [sys.executable, str(script), str(out)],
            capture_output=True,
            text=True,
            env=_child_env(FLAGOS_BACKEND_CONFIG=str(table)),
            timeout=240,
        )
        assert proc.returncode == 0, proc.stderr
        results[name] = (torch.load(out), torch.load(str(out) + ".counts"))

    (state_a, counts_a), (state_b, counts_b) = results["a"], results["b"]
    # Bit-identical when every backend the table names runs ATen's own CPU kernels (box:cpu, the
    # CPU fallback). A vendor's native kernels (gcu's topsaten) round differently from the CPU:
    # there the same model must still reach the same numbers, within float32 tolerance.
    native = sorted(
        {
            b
            for r in active.routes.values()
            for b in (r.backend, *(rb for _, rb in r.dtype_rules))
            if b not in ("cpu", "none") and not b.startswith("box:")
        }
    )

    def via_cpu(counts):
        return {op for op, per in counts.items() if per.get("cpu")}

    moved = via_cpu(counts_b) - via_cpu(counts_a)
    assert len(moved) >= 3, f"table b moved too few of the model's ops to cpu: {sorted(moved)}"
    assert state_a.keys() == state_b.keys()
    for key in state_a:
        a, b = state_a[key], state_b[key]
        assert a.dtype == b.dtype and a.shape == b.shape, key
        if native or not exact_kernels:
            # A vendor's own kernels on either side: the same numbers within float32 tolerance.
            torch.testing.assert_close(
                a,
                b,
                **tolerances.FLOAT32_STEPS.kwargs(),
                msg=lambda m, key=key: f"{key} ({native}): {m}",
            )
            continue
        assert torch.equal(a.view(-1).view(torch.uint8), b.view(-1).view(torch.uint8)), (
            f"{key} differs between the two route tables"
        )


# ---------------------------------------------------------------------------------------------
# threads
# ---------------------------------------------------------------------------------------------


def test_two_threads_on_shared_tensors(box_backend, exact_kernels, tol):
    g = torch.Generator().manual_seed(0)
    a_cpu, b_cpu = torch.randn(64, 64, generator=g), torch.randn(64, 64, generator=g)
    a, b = a_cpu.to("flagos"), b_cpu.to("flagos")
    cpu = {
        "add": a_cpu + b_cpu,
        "mul": a_cpu * b_cpu,
        "mm": a_cpu @ b_cpu,
        "tanh": torch.tanh(a_cpu),
        "sum": a_cpu.sum(dim=0),
    }
    # One thread's results first: right against CPU (bit-exact where the kernels are CPU's), and
    # then what every concurrent call must reproduce bit for bit.
    expected = {
        "add": (a + b).cpu(),
        "mul": (a * b).cpu(),
        "mm": (a @ b).cpu(),
        "tanh": torch.tanh(a).cpu(),
        "sum": a.sum(dim=0).cpu(),
    }
    for key, value in expected.items():
        close = tolerances.EXACT.kwargs() if exact_kernels else tol(value.dtype)
        torch.testing.assert_close(value, cpu[key], **close, msg=f"{key} against CPU")
    exact_tol = tolerances.EXACT.kwargs()
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def work(tid: int) -> None:
        try:
            out = torch.empty_like(a)
            barrier.wait(timeout=30)
            for _ in range(100):
                got = {
                    "add": a + b,
                    "mul": torch.mul(a, b, out=out),
                    "mm": a @ b,
                    "tanh": torch.tanh(a),
                    "sum": a.sum(dim=0),
                }
                for key, value in got.items():
                    torch.testing.assert_close(value.cpu(), expected[key], **exact_tol)
        except BaseException as exc:  # noqa: BLE001 - reported to the main thread
            errors.append(exc)

    before = _counts_for("aten::mm").get(box_backend, 0)
    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "threads still running (deadlock?)"
    if errors:
        raise errors[0]
    # Still the same tensors, untouched.
    assert torch.equal(a.cpu(), a_cpu) and torch.equal(b.cpu(), b_cpu)
    from torch_fl import routing

    active = routing.active_table()
    if (
        active
        and active.routes.get("aten::mm")
        and active.routes["aten::mm"].backend == box_backend
    ):
        assert _counts_for("aten::mm").get(box_backend, 0) - before == 200


# ---------------------------------------------------------------------------------------------
# census
# ---------------------------------------------------------------------------------------------

TINY_SCRIPT = """
import sys, torch, torch_fl
from torch import nn
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 2)).to("flagos")
x = torch.randn(4, 8).to("flagos")
loss = model(x).square().mean() * float(sys.argv[1])
loss.backward()
print("loss", loss.item())
"""


def test_census_json(tmp_path):
    import torch_fl

    script = tmp_path / "tiny.py"
    script.write_text(TINY_SCRIPT)
    report = tmp_path / "census.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch_fl.census",
            "--json",
            "--output",
            str(report),
            "--",
            str(script),
            "2.0",
        ],
        capture_output=True,
        text=True,
        env=_child_env(),
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("loss ")  # the workload's own output, its argv passed through
    doc = json.loads(report.read_text())
    assert doc["exit_code"] == 0
    assert doc["vendor"] == _vendor_name()
    assert doc["calls"] == sum(n for per in doc["ops"].values() for n in per.values()) > 0
    assert {"aten::addmm", "aten::addmm.out", "aten::mm", "aten::mm.out"} & set(doc["ops"])
    # Every call went where the vendor's routes say (an unrouted overload: the CPU fallback).
    from torch_fl import _C
    from torch_fl.census import FALLBACK

    routes = {op: {b, *(rb for _, rb in rules)} for op, b, rules in _C.router_routes()}
    for op, per in doc["ops"].items():
        assert set(per) <= routes.get(op, {FALLBACK}), (op, per, routes.get(op))
    if torch_fl.vendor().no_cpu_fallback:
        assert doc["fallback"] == {}, (
            f"CPU fallbacks on {_vendor_name()!r} (declares no_cpu_fallback): {doc['fallback']}"
        )
        assert FALLBACK not in doc["by_backend"], doc["by_backend"]


def test_census_text_lists_fallbacks(tmp_path):
    script = tmp_path / "tiny.py"
    script.write_text(TINY_SCRIPT)
    proc = subprocess.run(
        [sys.executable, "-m", "torch_fl.census", "--", str(script), "1.0"],
        capture_output=True,
        text=True,
        env=_child_env(FLAGOS_OP_tanh="cpu"),
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Operator census: " in out
    assert "CPU fallback (copy in, compute on CPU, copy out): " in out
    assert re.search(r"^  tanh\s+1\s+\(routed to cpu\)$", out, re.M), out


def test_census_exit_status_is_the_workload_s(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("import sys\nsys.exit(3)\n")
    proc = subprocess.run(
        [sys.executable, "-m", "torch_fl.census", "--json", "--", str(script)],
        capture_output=True,
        text=True,
        env=_child_env(),
        timeout=240,
    )
    assert proc.returncode == 3
    assert json.loads(proc.stdout)["exit_code"] == 3


# ---------------------------------------------------------------------------------------------
# Python-kernel backends (how FlagGems plugs in), with a test-only kernel set on CPU views
# ---------------------------------------------------------------------------------------------


def cpu_view(t: torch.Tensor) -> torch.Tensor:
    """A CPU tensor over the same (host-addressable) memory as flagos tensor ``t``."""
    if t.device.type != "flagos":
        return t
    torch.flagos.synchronize(t.device)  # host kernels run after the stream's queued work
    storage = t.untyped_storage()
    nbytes = storage.nbytes()
    if nbytes == 0:
        flat = torch.empty(0, dtype=torch.uint8)
    else:
        flat = torch.frombuffer(
            (ctypes.c_char * nbytes).from_address(storage.data_ptr()), dtype=torch.uint8
        )
    return flat.view(t.dtype).as_strided(t.shape, t.stride(), t.storage_offset())


@pytest.fixture
def testpy(require_cap, restore_routes):
    require_cap("HOST_ADDRESSABLE_MEMORY")
    from torch_fl import routing

    calls: list[tuple[str, object]] = []

    def abs_kernel(self):
        calls.append(("abs", self.device.type))
        return torch.abs(self)  # a CPU result: the default from_views copies it to flagos

    def add_kernel(self, other, *, alpha):
        calls.append(("add.Tensor", alpha))
        return torch.add(self, other, alpha=alpha)

    def mul_out_kernel(self, other, *, out):
        calls.append(("mul.out", out.device.type))
        torch.mul(self, other, out=out)  # writes through the view
        return out

    def sum_dim_kernel(self, dim, keepdim, *, dtype):
        # dtype arrives as a torch.dtype (the dispatcher stores it as an int).
        calls.append(("sum.dim_IntList", dtype))
        return torch.sum(self, dim, keepdim, dtype=dtype)

    backend = routing.register_python_backend(
        "testpy",
        {
            "abs": abs_kernel,
            "add.Tensor": add_kernel,
            "mul.out": mul_out_kernel,
            "sum.dim_IntList": sum_dim_kernel,
        },
        to_views=cpu_view,
    )
    return backend, calls


def test_python_backend_kernels(tmp_path, vendor_table, testpy):
    from torch_fl import _C, routing

    backend, calls = testpy
    assert "testpy" in _C.router_backends()
    assert _C.backend_has_kernel("testpy", "aten::mul.out")
    assert not _C.backend_has_kernel("testpy", "aten::sub.out")
    conf = tmp_path / "py.conf"
    conf.write_text(
        f"{_include_vendor(vendor_table)}abs = testpy\nadd.Tensor = testpy\nmul.out = testpy\n"
        "sum.dim_IntList = testpy\n"
    )
    routing.load_routes(path=conf)

    x_cpu = torch.tensor([[-1.0, 2.0], [3.0, -4.0]])
    y_cpu = torch.tensor([[0.5, 0.5], [2.0, 1.0]])
    x, y = x_cpu.to("flagos"), y_cpu.to("flagos")

    r = torch.abs(x)
    assert r.device.type == "flagos" and torch.equal(r.cpu(), x_cpu.abs())
    assert calls[-1] == ("abs", "cpu")

    r = torch.add(x, y, alpha=2)
    assert r.device.type == "flagos" and torch.equal(r.cpu(), x_cpu + 2 * y_cpu)
    assert calls[-1] == ("add.Tensor", 2)

    out = torch.empty(2, 2, device="flagos")
    r = torch.mul(x, y, out=out)
    assert r is out  # the caller's own tensor, written through the kernel's view
    assert torch.equal(out.cpu(), x_cpu * y_cpu)
    assert calls[-1] == ("mul.out", "cpu")

    r = torch.sum(x, dim=0, dtype=torch.float64)
    assert calls[-1] == ("sum.dim_IntList", torch.float64)
    assert r.dtype == torch.float64 and torch.equal(r.cpu(), x_cpu.sum(0, dtype=torch.float64))

    counts = _C.dispatch_counts()
    assert counts["aten::abs"].get("testpy") == 1
    assert counts["aten::add.Tensor"].get("testpy") == 1
    assert counts["aten::mul.out"].get("testpy") == 1


def test_route_to_python_backend_without_the_kernel(tmp_path, testpy, restore_routes):
    from torch_fl import routing

    conf = tmp_path / "py.conf"
    conf.write_text("abs = testpy\nsub.out = testpy\n")
    with pytest.raises(routing.RouteTableError) as err:
        routing.load_routes(path=conf)
    assert str(err.value) == f"{conf.resolve()}:2: backend 'testpy' has no kernel for sub.out"


# ---------------------------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------------------------


def test_routed_results_are_plain_flagos_tensors():
    # A routed kernel's fresh result becomes a flagos tensor (on box backends its TensorImpl is
    # retyped in place): it must be indistinguishable from one a flagos factory made — the same
    # dispatch keys, device and autograd/inference behaviour — including multi-output results.
    def keys(t: torch.Tensor):
        return torch._C._dispatch_keys(t)

    a = torch.randn(4, 6, device="flagos")
    b = torch.randn(4, 6, device="flagos")
    plain = keys(torch.empty(2, device="flagos"))
    outs = [
        a + b,
        a.relu(),
        *torch.max(a, dim=1),
        *torch.native_layer_norm(a, [6], None, None, 1e-5),
    ]
    for r in outs:
        assert r.device.type == "flagos" and keys(r) == plain, (r.device, keys(r), plain)
    torch.testing.assert_close((a + b).cpu(), a.cpu() + b.cpu())
    with torch.inference_mode():
        inf_plain = keys(torch.empty(2, device="flagos"))
        r = a * b
        assert r.is_inference() and keys(r) == inf_plain
    with torch.autocast("flagos", dtype=torch.bfloat16):
        r = a @ b.t()
    assert r.dtype == torch.bfloat16 and keys(r) == plain
    x = torch.randn(4, 6, device="flagos", requires_grad=True)
    (x.exp() * b).sum().backward()
    assert x.grad.device == x.device and keys(x.grad) == plain
    torch.testing.assert_close(x.grad.cpu(), (x.detach().cpu().exp() * b.cpu()))


# ---------------------------------------------------------------------------------------------
# preference lists, explain, scoped overrides, fallback budget, spellings
# ---------------------------------------------------------------------------------------------

# A backend name some vendor provides but none of torch-fl's runtimes registers: a first choice
# that is unavailable on every vendor.
ABSENT = "box:mps"


def _other_vendor_backend() -> str:
    """A vendor backend torch-fl knows by name that is not the active vendor's, so nothing in
    this process registers it."""
    import torch_fl

    return next(v for v in ("ascend", "gcu", "dcu") if v != torch_fl.vendor().name)


OTHER_VENDOR = _other_vendor_backend()


def _routes() -> dict[str, str]:
    from torch_fl import _C

    return {op: backend for op, backend, _ in _C.router_routes()}


def test_preference_list_first_choice_missing_loads_with_the_next(
    tmp_path, vendor_table, restore_routes
):
    import torch_fl
    from torch_fl import routing

    conf = tmp_path / "pref.conf"
    conf.write_text(
        f"{_include_vendor(vendor_table)}abs = {ABSENT}, {OTHER_VENDOR}, cpu\n"
        f"neg[int64] = {ABSENT}, none\nneg = cpu\nneg[int64] = {OTHER_VENDOR}, cpu\n"
    )
    active = routing.load_routes(path=conf)
    assert _routes()["aten::abs"] == "cpu"
    (rule,) = [r for r in active.preference_rules() if r.op == "aten::abs"]
    assert rule.backend == "cpu" and rule.choices == (ABSENT, OTHER_VENDOR, "cpu")
    assert [c for c, _ in rule.skipped_choices] == [ABSENT, OTHER_VENDOR]
    assert all("not registered in this process" in why for _, why in rule.skipped_choices)
    # The dtype rule keeps later-wins: the second neg[int64] list is the one in force.
    assert active.routes["aten::neg"].dtype_rules == ((("int64",), "cpu"),)
    text = torch_fl.info()
    assert "preference lists resolved" in text and f"{ABSENT} passed over for " in text
    x = torch.tensor([-1.0, 2.0], device="flagos")
    assert torch.abs(x).cpu().tolist() == [1.0, 2.0]


@pytest.mark.parametrize(
    ("rhs", "message"),
    [
        ("flaggems, gcux, cpu", "unknown backend 'gcux' in 'flaggems, gcux, cpu' for abs: "),
        (
            f"{ABSENT}, {OTHER_VENDOR}",
            f"no backend of '{ABSENT}, {OTHER_VENDOR}' is available for abs (",
        ),
        ("cpu, , cpu", "empty backend in the preference list"),
    ],
)
def test_bad_preference_list_errors_with_file_and_line(
    tmp_path, vendor_table, restore_routes, rhs, message
):
    from torch_fl import _C, routing

    conf = tmp_path / "bad.conf"
    conf.write_text(f"{_include_vendor(vendor_table)}# comment\nabs = {rhs}\n")
    lineno = 3 if vendor_table else 2
    before = _C.router_routes()
    with pytest.raises(routing.RouteTableError) as err:
        routing.load_routes(path=conf)
    assert str(err.value).startswith(f"{conf.resolve()}:{lineno}: {message}"), str(err.value)
    assert _C.router_routes() == before


def test_explain_names_rule_include_list_and_environment(tmp_path):
    base = tmp_path / "base.conf"
    base.write_text("abs = cpu\nneg = cpu\n")
    conf = tmp_path / "top.conf"
    conf.write_text(f"include base.conf\nabs = {ABSENT}, cpu\nabs[int64] = none\n")
    proc = run_child(
        "import sys; from torch_fl.routing.__main__ import main; "
        "sys.exit(main(['explain', 'abs', 'aten::neg.default', 'sum.dim_IntList', 'view', "
        "'linear', 'aten::mm.out']))",
        FLAGOS_BACKEND_CONFIG=str(conf),
        FLAGOS_OP_sum__dim_IntList="cpu",
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"table: {conf.resolve()} (FLAGOS_BACKEND_CONFIG is set)" in out
    assert f"{conf.resolve()}:2: abs = {ABSENT}, cpu" in out
    assert f"{ABSENT}: passed over at load: not registered in this process" in out
    assert "cpu: chosen (first available)" in out
    assert f"{conf.resolve()}:3: abs[int64] = none" in out
    assert "route: cpu (by first tensor dtype: int64 -> cpu; other dtypes -> cpu)" in out
    assert f"{base.resolve()}:1 (included from {conf.resolve()}:1): abs = cpu" in out
    assert f"{base.resolve()}:2 (included from {conf.resolve()}:1): neg = cpu" in out
    assert "FLAGOS_OP_sum__dim_IntList=cpu (environment): sum.dim_IntList = cpu" in out
    assert "served natively by core" in out
    assert "CompositeImplicitAutograd" in out
    mm_out = out.split("aten::mm.out (mm.out)", 1)[1]
    assert "route: none; " in mm_out and "CPU fallback" in mm_out
    bad = run_child(
        "import sys; from torch_fl.routing.__main__ import main; sys.exit(main(['explain', "
        "'add.Tensr']))"
    )
    assert bad.returncode == 2 and "unknown overload 'add.Tensr': add has " in bad.stderr


def test_override_nests_restores_and_shows_in_explain():
    from torch_fl import routing

    before = _routes()
    op = "aten::abs"
    assert "torch_fl.routing.override" not in routing.explain("abs")
    with routing.override({"abs": "cpu"}):
        assert _routes()[op] == "cpu"
        text = routing.explain("abs")
        assert "scoped overrides active now" in text and "override() at " in text
        with routing.override({"abs": f"{ABSENT}, none", "neg": "cpu"}):
            assert _routes()[op] == "cpu" and _routes()["aten::neg"] == "cpu"
            assert f"{ABSENT}: passed over" in routing.explain("abs")
        assert "aten::neg" not in _routes() or _routes()["aten::neg"] == before.get("aten::neg")
        x = torch.tensor([-3.0], device="flagos")
        assert torch.abs(x).cpu().tolist() == [3.0]
    assert _routes() == before
    with pytest.raises(RuntimeError, match="boom"):
        with routing.override({"abs": "cpu"}):
            raise RuntimeError("boom")
    assert _routes() == before
    with pytest.raises(routing.RouteTableError, match="unknown backend 'warp_drive' for abs"):
        routing.override({"abs": "warp_drive"})
    with pytest.raises(routing.RouteTableError, match="unknown operator 'abss'"):
        routing.override({"abss": "cpu"})
    assert _routes() == before


def test_override_from_many_threads_leaves_the_table_intact():
    from torch_fl import routing

    before = _routes()
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def worker(i: int) -> None:
        try:
            barrier.wait()
            x = torch.tensor([-1.0, 2.0], device="flagos")
            for _ in range(25):
                with routing.override({"abs": "cpu", "neg": "cpu"} if i % 2 else {"neg": "cpu"}):
                    assert _routes()["aten::neg"] == "cpu"
                    assert torch.abs(x).cpu().tolist() == [1.0, 2.0]
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert _routes() == before
    assert routing.activation.scoped_overrides() == []


def test_route_changes_never_unroute_other_threads_calls():
    """Entering and leaving override() swaps whole tables: another thread's routed calls run on the
    old routes or the new ones, never on the CPU fallback for want of a route (nor fail there)."""
    from torch_fl import _C, routing

    x = torch.arange(64, dtype=torch.float32, device="flagos")
    routed = {r[0] for r in _C.router_routes()} & {"aten::add.Tensor", "aten::mul.Tensor"}
    if not routed:
        pytest.skip(f"vendor {_vendor_name()!r} routes neither add.Tensor nor mul.Tensor")
    stop = threading.Event()
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            while not stop.is_set():
                (x + 1) * 2
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    before = dict(_C.fallback_counts())
    t = threading.Thread(target=worker)
    t.start()
    try:
        for _ in range(200):
            with routing.override({"abs": "cpu"}):
                pass
    finally:
        stop.set()
        t.join()
    assert not errors, errors[0]
    after = dict(_C.fallback_counts())
    # An unrouted add.Tensor reaches the fallback as add.out: any new fallback call is one.
    fell_back = {op: n - before.get(op, 0) for op, n in after.items() if n != before.get(op, 0)}
    assert not fell_back, f"calls fell back to the CPU during route changes: {fell_back}"


COUNTS_CHILD = """
import torch, torch_fl.routing
x = torch.tensor([-1.0, 2.0], device="flagos")
for _ in range(20):
    x.abs()
with torch_fl.routing.override({"neg": "cpu"}):
    x.neg()
torch_fl.routing.load_routes()
print("workload done", flush=True)
"""


def test_fallback_budget_counts_survive_route_changes():
    """Calls counted before an override() or load_routes() still count at exit: a CI gate on the
    CPU fallback's share cannot be reset by changing routes."""
    r = run_child(COUNTS_CHILD, FLAGOS_FALLBACK_BUDGET="0", FLAGOS_OP_abs="cpu")
    assert "workload done" in r.stdout, r.stderr
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert re.search(r"^  abs  20  \(routed to cpu\)$", r.stderr, re.M), r.stderr


LOG_CHILD = """
import threading, torch
x = torch.tensor([-1.0, 2.0], device="flagos")
def work():
    for _ in range(200):
        x.abs()
        x.neg()
threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
"""


def test_fallback_log_lines_are_whole_under_threads():
    r = run_child(LOG_CHILD, FLAGOS_LOG="fallback", FLAGOS_OP_abs="cpu", FLAGOS_OP_neg="cpu")
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "flagos fallback" in ln]
    assert len(lines) >= 1600, len(lines)
    bad = [ln for ln in lines if not re.fullmatch(r"\[flagos fallback\] (abs|neg) -> cpu", ln)]
    assert not bad, bad[:5]


def test_convolution_is_counted_wherever_it_runs():
    """Convolutions reach their backend through ATen's overrideable kernels, outside a route
    kernel: they are counted all the same (as CPU fallback calls where the CPU fallback runs
    them), so the census and FLAGOS_FALLBACK_BUDGET see them."""
    from torch_fl import _C

    conv = torch.nn.Conv2d(3, 4, 3).to("flagos")
    x = torch.randn(1, 3, 8, 8, device="flagos", requires_grad=True)
    before = _C.dispatch_counts()
    conv(x).sum().backward()
    after = _C.dispatch_counts()
    for op in ("aten::convolution", "aten::convolution_backward"):
        grew = sum(after.get(op, {}).values()) - sum(before.get(op, {}).values())
        assert grew == 1, (op, before.get(op), after.get(op))


BUDGET_CHILD = """
import torch
x = torch.tensor([-1.0, 2.0], device="flagos")
for _ in range(20):
    x.abs()
print("workload done", flush=True)
"""


@pytest.mark.parametrize("route", ["table", "cpu"])
def test_torchscript_lists_reach_the_cpu_fallback_on_the_cpu(route):
    """A ``Tensor?[]`` the TorchScript interpreter builds reaches a CPU kernel as CPU tensors.

    ``x[mask] = v`` in a scripted function is ``index_put_(x, [mask], v)`` over a list made by
    ``prim::ListConstruct``, whose element type object is not the one ATen's fallback recognises
    a ``Tensor?[]`` by; on the CPU route its flagos mask used to reach the CPU kernel's inner
    ``_index_put_impl_`` beside CPU copies ("Expected all tensors to be on the same device").
    """
    from torch_fl import routing

    def fill(x: torch.Tensor) -> torch.Tensor:
        x[x < 50] = 1.0
        x[torch.arange(3, device=x.device)] = 2.0
        return x

    scripted = torch.jit.script(fill)
    expected = fill(torch.arange(100, dtype=torch.float))
    routes = {"index_put_": "cpu", "_index_put_impl_": "cpu"} if route == "cpu" else {}
    with routing.override(routes):
        got = scripted(torch.arange(100, device="flagos", dtype=torch.float))
    assert got.device.type == "flagos"
    assert torch.equal(got.cpu(), expected)


def test_fallback_budget_exit_status():
    over = run_child(BUDGET_CHILD, FLAGOS_FALLBACK_BUDGET="0.05", FLAGOS_OP_abs="cpu")
    assert over.returncode == 3, (over.returncode, over.stderr)
    assert "workload done" in over.stdout
    assert "FLAGOS_FALLBACK_BUDGET=0.05: the CPU fallback served " in over.stderr
    assert re.search(r"^  abs  20  \(routed to cpu\)$", over.stderr, re.M), over.stderr
    within = run_child(BUDGET_CHILD, FLAGOS_FALLBACK_BUDGET="100%", FLAGOS_OP_abs="cpu")
    assert within.returncode == 0, within.stderr
    bad = run_child("import torch", FLAGOS_FALLBACK_BUDGET="lots")
    assert bad.returncode != 0
    assert "FLAGOS_FALLBACK_BUDGET=lots: expected the largest share" in bad.stderr


def test_backend_alias_spellings(tmp_path, vendor_table, restore_routes):
    from torch_fl import _C, routing

    conf = tmp_path / "alias.conf"
    conf.write_text(f"{_include_vendor(vendor_table)}abs = none\nneg = cuda, flagos_python, cpu\n")
    active = routing.load_routes(path=conf)
    routes = _routes()
    assert routes["aten::abs"] == "cpu"
    (rule,) = [r for r in active.preference_rules() if r.op == "aten::neg"]
    have = set(_C.router_backends())
    expected = "box:cuda" if "box:cuda" in have else "flaggems" if "flaggems" in have else "cpu"
    if expected != "cpu" and not _C.backend_has_kernel(expected, "aten::neg"):
        expected = "cpu"
    assert routes["aten::neg"] == expected == rule.backend_name
    if expected != "box:cuda" and "flaggems" not in have:
        # The list reached flagos_python (cuda is absent here) and passed over it.
        assert any(c == "flagos_python" and "FlagGems" in why for c, why in rule.skipped_choices), (
            rule.skipped_choices
        )


def test_force_backend_routes_everything_and_op_variables_still_win():
    from torch_fl import _C

    # Another backend of this vendor serving abs (box:cpu on sim, gcu on gcu), if it has one.
    others = [
        b for b in _C.router_backends() if b != "cpu" and _C.backend_has_kernel(b, "aten::abs")
    ]
    env = {"FLAGOS_OP_abs": others[0]} if others else {}
    proc = run_child(
        """
        import torch, torch_fl
        from torch_fl import _C, routing
        routes = {op: b for op, b, rules in _C.router_routes()}
        dtype_rules = [op for op, b, rules in _C.router_routes() if rules and op != "aten::abs"]
        print(sorted(set(b for op, b in routes.items() if op != "aten::abs")), routes["aten::abs"])
        print("forced to none by FLAGOS_FORCE_BACKEND" in torch_fl.info(), dtype_rules)
        """,
        FLAGOS_FORCE_BACKEND="none",
        **env,
    )
    assert proc.returncode == 0, proc.stderr
    first, second = proc.stdout.strip().splitlines()[-2:]
    assert first == f"['cpu'] {others[0] if others else 'cpu'}", first
    assert second == "True []", second
    bad = run_child("import torch", FLAGOS_FORCE_BACKEND="warp_drive")
    assert bad.returncode != 0
    assert "FLAGOS_FORCE_BACKEND=warp_drive: unknown backend 'warp_drive'" in bad.stderr


def test_unknown_flagos_variable_warns_once_with_the_closest_name():
    proc = run_child(
        "import torch, torch_fl, importlib; importlib.reload(torch_fl.routing.environment)\n"
        "torch_fl.routing.environment.warn_unknown_variables()",
        FLAGOS_BACKEND_CONFG="x.conf",
        FLAGOS_OP_abs="",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("FLAGOS_BACKEND_CONFG is not a variable torch-fl reads") == 1
    assert "did you mean FLAGOS_BACKEND_CONFIG?" in proc.stderr
    assert "FLAGOS_OP_abs" not in proc.stderr


def test_census_shows_how_preference_lists_resolved(tmp_path, vendor_table):
    conf = tmp_path / "pref.conf"
    conf.write_text(f"{_include_vendor(vendor_table)}abs = {ABSENT}, cpu\n")
    script = tmp_path / "w.py"
    script.write_text("import torch\ntorch.abs(torch.tensor([-1.0], device='flagos'))\n")
    out = tmp_path / "c.json"
    cmd = [sys.executable, "-m", "torch_fl.census", "--json", "--output", str(out), "--"]
    env = _child_env(FLAGOS_BACKEND_CONFIG=str(conf))
    proc = subprocess.run([*cmd, str(script)], capture_output=True, text=True, env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr
    res = json.loads(out.read_text())["preference_lists"]["aten::abs"]
    assert res["winner"] == "cpu" and res["choices"] == [ABSENT, "cpu"]
    assert "not registered in this process" in res["skipped"][ABSENT]
    assert res["rule"] == f"{conf.resolve()}:{2 if vendor_table else 1}"
    text = subprocess.run(
        [sys.executable, "-m", "torch_fl.census", "--", str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert text.returncode == 0, text.stderr
    assert f"  abs = {ABSENT}, cpu -> cpu; skipped {ABSENT}: not registered" in text.stdout
