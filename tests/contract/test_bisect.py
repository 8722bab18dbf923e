"""``python -m torch_fl.routing bisect`` finds the overloads whose route changes a result.

End to end, a Python backend is planted whose ``mul.Tensor`` is slightly wrong (its ``add.Tensor``
and ``neg`` are right), routed to by a table on top of the vendor's; bisect must name exactly
``mul.Tensor``, and nothing once the kernel is right. The search itself (several culprits, overloads
that deviate only together, nondeterminism, nothing published) runs against a fake runner, without
child processes. Child runs cost an interpreter start each, so the workload calls few overloads.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch_fl.routing import bisect

# The bisect tool is core's; CI runs it on sim only (nox -s test-<vendor> on every vendor).
pytestmark = [pytest.mark.routing, pytest.mark.vendor_neutral]

WORKLOAD = """
    import sys

    import torch
    import torch_fl  # noqa: F401
    from torch_fl import routing

    ERROR = float(sys.argv[1])


    def mul(self, other):
        return (torch.mul(self.cpu(), other.cpu()) * (1 + ERROR)).to(self.device)


    def add(self, other, *, alpha=1):
        return torch.add(self.cpu(), other.cpu(), alpha=alpha).to(self.device)


    def neg(self):
        return torch.neg(self.cpu()).to(self.device)


    routing.register_python_backend("planted", {"mul.Tensor": mul, "add.Tensor": add, "neg": neg})
    routing.load_routes(path=sys.argv[2])
    torch.manual_seed(0)
    # Made on the CPU and copied (copies are core's, not routed): few candidates, few runs.
    x = torch.randn(64).to("flagos")
    w = torch.randn(64).to("flagos")
    y = (x * w + x).neg()
    routing.bisect_report({"y": y, "total": y.sum()})
"""


def _vendor_table() -> Path | None:
    from torch_fl import routing

    active = routing.active_table()
    return None if active is None else active.path


@pytest.fixture
def planted(tmp_path, flagos):
    """(workload script, table routing mul.Tensor, add.Tensor and neg to the planted backend)."""
    import torch_fl
    from torch_fl import _C, routing

    # What register_python_backend needs (probed without registering one in this process).
    if not routing.router_available() or not hasattr(_C, "register_python_backend"):
        pytest.skip(f"vendor {torch_fl.vendor().name!r}: this build cannot take Python backends")
    base = _vendor_table()
    table = tmp_path / "planted.conf"
    table.write_text(
        (f"include {base}\n" if base else "")
        + "mul.Tensor = planted\nadd.Tensor = planted\nneg = planted\n"
    )
    script = tmp_path / "workload.py"
    script.write_text(textwrap.dedent(WORKLOAD))
    return script, table


def _bisect(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLAGOS_OP_")}
    env.pop("FLAGOS_BACKEND_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "torch_fl.routing", "bisect", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def _culprits(stdout: str) -> list[str]:
    lines = stdout.split("Culprits", 1)[1].splitlines()[1:] if "Culprits" in stdout else []
    return [line.strip() for line in lines if line.startswith("  ") and not line.startswith("    ")]


def test_bisect_names_the_wrong_route(planted):
    script, table = planted
    proc = _bisect("--", str(script), "1e-3", str(table))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert _culprits(proc.stdout) == ["mul.Tensor"], proc.stdout
    assert "mul.Tensor: planted (1 calls)" in proc.stdout, proc.stdout
    assert "deviation: 'y'" in proc.stdout or "deviation: 'total'" in proc.stdout, proc.stdout


def test_bisect_without_a_culprit(planted):
    script, table = planted
    proc = _bisect("--", str(script), "0", str(table))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no culprit" in proc.stdout, proc.stdout
    assert "Culprits" not in proc.stdout


def test_bisect_usage_errors(tmp_path, capsys):
    # In this process: each returns before any run.
    script = tmp_path / "w.py"
    script.write_text("")
    assert bisect.main([str(script)]) == 2  # no "--"
    assert bisect.main(["--"]) == 2
    assert bisect.main(["--", "-m"]) == 2
    assert bisect.main(["--", str(tmp_path / "missing.py")]) == 2
    assert bisect.main(["--rtol", "x", "--", str(script)]) == 2
    assert bisect.main(["--jobs", "0", "--", str(script)]) == 2


# ---- the search, against a fake runner ------------------------------------------------------


class FakeRunner:
    """A workload of overloads a..h: its result is 1.0, plus 0.5 for each culprit set entirely on
    its route; ``noise`` adds a different amount to every run."""

    def __init__(self, culprits: list[set[str]], noise: bool = False, publish: bool = True):
        self.ops = [f"aten::{c}" for c in "abcdefgh"]
        self.culprits = [{f"aten::{c}" for c in group} for group in culprits]
        self.noise = noise
        self.publish = publish
        self.runs = 0

    def run(self, to_cpu):
        return self.run_many([to_cpu])[0]

    def run_many(self, sets):
        out = []
        for to_cpu in sets:
            self.runs += 1
            on_route = set(self.ops) - set(to_cpu)
            value = 1.0 + 0.5 * sum(1 for g in self.culprits if g <= on_route)
            if self.noise:
                value += 0.01 * self.runs
            values = {"v": torch.tensor(value, dtype=torch.float64)} if self.publish else {}
            counts = {op: {"cpu" if op in to_cpu else "vendor": 1} for op in self.ops}
            out.append(bisect.Run(0, values, counts))
        return out


def _search(capsys, runner) -> tuple[int, list[str]]:
    code = bisect._bisect(runner, (None, None))
    return code, _culprits(capsys.readouterr().out)


def test_search_finds_every_culprit(capsys):
    runner = FakeRunner([{"b"}, {"g"}])
    assert _search(capsys, runner) == (1, ["b", "g"])


def test_search_finds_overloads_that_deviate_only_together(capsys):
    runner = FakeRunner([{"a", "h"}])
    assert _search(capsys, runner) == (1, ["a + h (only together)"])


def test_search_without_a_culprit(capsys):
    runner = FakeRunner([])
    assert _search(capsys, runner) == (0, [])
    assert runner.runs == 2  # the normal run and the reference


def test_search_reports_nondeterminism(capsys):
    code = bisect._bisect(FakeRunner([{"c"}], noise=True), (None, None))
    assert code == 2
    assert "nondeterministic" in capsys.readouterr().out


def test_search_needs_published_values(capsys):
    code = bisect._bisect(FakeRunner([{"c"}], publish=False), (None, None))
    assert code == 2
    assert "bisect_report" in capsys.readouterr().out


def test_bisect_report_is_a_no_op_outside_bisect():
    assert bisect._collector is None
    bisect.bisect_report(torch.ones(2), "x")  # nothing to publish to: returns quietly
    assert bisect._collector is None
