"""Census on the emulated GCU: the demo and a two-step Adam loop, every CPU fallback listed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gcu

ADAM_SCRIPT = r"""
import torch, torch_fl
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(12, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 3))
ref = nn.Sequential(nn.Linear(12, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 3))
ref.load_state_dict(model.state_dict())
model.to("flagos:0")
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
opt_ref = torch.optim.Adam(ref.parameters(), lr=1e-2)
g = torch.Generator().manual_seed(1)
for _ in range(2):
    x, y = torch.randn(16, 12, generator=g), torch.randint(0, 3, (16,), generator=g)
    for m, o, dev in ((model, opt, "flagos:0"), (ref, opt_ref, "cpu")):
        loss = nn.functional.cross_entropy(m(x.to(dev)), y.to(dev))
        o.zero_grad()
        loss.backward()
        o.step()
for (k, a), b in zip(model.state_dict().items(), ref.state_dict().values()):
    torch.testing.assert_close(a.cpu(), b, rtol=1e-4, atol=1e-5, msg=k)
# The SDK's quirks, CPU-identical: int64, rank 0, non-contiguous, broadcasting.
i = torch.tensor([[-3, 4], [5, -6]])
assert torch.equal(i.to("flagos").abs().cpu(), i.abs())
assert torch.equal(i.to("flagos").sum(dim=0).cpu(), i.sum(dim=0))
s = torch.tensor(-2.5)
assert torch.equal((s.to("flagos").abs() * 2).cpu(), s.abs() * 2)
t = torch.randn(5, 4)
torch.testing.assert_close((t.to("flagos").t() * 3).cpu(), t.t() * 3)
b = torch.randn(3, 1)
torch.testing.assert_close((t.to("flagos")[:3] + b.to("flagos")).cpu(), t[:3] + b)
print("adam ok")
"""


def _census(tmp_path, *workload: str) -> tuple[dict, str]:
    env = {**os.environ, "FLAGOS_VENDOR": "gcu"}
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
            *workload,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    text = subprocess.run(
        [sys.executable, "-m", "torch_fl.census", "--", *workload],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert text.returncode == 0, text.stderr[-4000:]
    return json.loads(report.read_text()), text.stdout


def _check(data: dict, text: str) -> None:
    assert data["vendor"] == "gcu"
    assert data["by_backend"].get("gcu", 0) > 0, data["by_backend"]
    # Every operator the CPU fallback served is listed, in the JSON and in the printed report.
    fallback = data["fallback"]
    for op, per in data["ops"].items():
        if per.get("cpu"):
            assert op in fallback, op
    for op in fallback:
        assert op.removeprefix("aten::") in text, f"{op} missing from the printed census"


def test_demo_census(gcu, tmp_path):
    data, text = _census(tmp_path, "-m", "torch_fl.demo", "--steps", "3", "--no-progress")
    _check(data, text)


def test_adam_two_steps_census(gcu, tmp_path):
    script = tmp_path / "adam.py"
    script.write_text(ADAM_SCRIPT)
    data, text = _census(tmp_path, str(script))
    _check(data, text)
    assert data["ops"]["aten::abs"] == {"gcu": 1, "cpu": 1}  # float abs on gcu, int64 abs on cpu
    assert "aten::abs" in data["fallback"]
    # Adam's per-parameter update runs mostly on gcu; what it does not is listed above.
    for op in ("aten::add_.Scalar", "aten::mul_.Scalar", "aten::sqrt", "aten::div_.Scalar"):
        assert data["ops"][op] == {"gcu": 12}, (op, data["ops"].get(op))
