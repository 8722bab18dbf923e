"""Lightning on flagos (torch_fl.integrations.lightning)."""

from __future__ import annotations

import re

import pytest
from _ecosystem import run_program

pytest.importorskip("lightning")

pytestmark = [pytest.mark.ecosystem, pytest.mark.library("lightning")]

# A LightningModule fitted one epoch; prints the accelerator, the device and dtype its training
# step saw, and a checksum of the trained weights. argv: accelerator, devices, precision.
FIT = """
import sys, torch, lightning as L
from torch import nn
class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    def training_step(self, batch, i):
        x, y = batch
        out = self.net(x)
        self.seen = (x.device.type, out.dtype)
        return nn.functional.mse_loss(out.float(), y)
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)
g = torch.Generator().manual_seed(0)
data = torch.utils.data.TensorDataset(torch.randn(32, 8, generator=g), torch.randn(32, 1, generator=g))
torch.manual_seed(0)
model = Model()
accelerator, devices, precision = sys.argv[1], int(sys.argv[2]), sys.argv[3]
trainer = L.Trainer(accelerator=accelerator, devices=devices, precision=precision, max_epochs=1,
                    logger=False, enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False, **({"strategy": "ddp"} if devices > 1 else {}))
trainer.fit(model, torch.utils.data.DataLoader(data, batch_size=8))
if trainer.global_rank == 0:
    print("FIT", type(trainer.accelerator).__name__, *model.seen,
          float(model.net[0].weight.double().sum()))
"""


def _fit(tmp_path, accelerator: str, devices: int = 1, precision: str = "32-true", **env: str):
    script = tmp_path / "fit.py"
    script.write_text(FIT)
    proc = run_program(
        "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')",
        str(script),
        accelerator,
        str(devices),
        precision,
        **env,
    )
    match = re.search(r"^FIT (\S+) (\S+) (\S+) (\S+)$", proc.stdout, re.M)
    assert match, proc.stdout[-2000:] + proc.stderr[-4000:]
    return match.group(1), match.group(2), match.group(3), float(match.group(4))


def test_auto_picks_flagos(tmp_path):
    """Trainer(accelerator="auto") picks flagos and trains there, the weights as on the CPU"""
    name, device, _, weights = _fit(tmp_path, "auto")
    cpu_name, cpu_device, _, cpu_weights = _fit(tmp_path, "cpu")
    assert (name, device) == ("FlagosAccelerator", "flagos")
    # With the adapter installed, a CPU run stays Lightning's own.
    assert (cpu_name, cpu_device) == ("CPUAccelerator", "cpu")
    assert weights == pytest.approx(cpu_weights, rel=1e-5)


def test_bf16_mixed(tmp_path):
    """Trainer(accelerator="flagos", precision="bf16-mixed") autocasts on flagos as on the CPU"""
    import torch

    if not torch.flagos.is_bf16_supported():
        pytest.skip("the vendor declares no bf16")
    _, device, dtype, weights = _fit(tmp_path, "flagos", 1, "bf16-mixed")
    *_, cpu_dtype, cpu_weights = _fit(tmp_path, "cpu", 1, "bf16-mixed")
    assert (device, dtype) == ("flagos", "torch.bfloat16") and cpu_dtype == dtype
    assert weights == pytest.approx(cpu_weights, rel=1e-3)


def test_ddp_on_two_devices(tmp_path):
    """Trainer(accelerator="flagos", devices=2, strategy="ddp") trains as DDP on two CPU processes"""
    import torch

    if torch.flagos.device_count() < 2:
        pytest.skip("needs two flagos devices")
    _, device, _, weights = _fit(tmp_path, "flagos", 2)
    *_, cpu_weights = _fit(tmp_path, "cpu", 2)
    assert device == "flagos"
    assert weights == pytest.approx(cpu_weights, rel=1e-5)


def test_without_the_adapter_auto_is_the_cpu(tmp_path):
    """Trainer(accelerator="auto") with the adapter off (FLAGOS_DISABLE_INTEGRATIONS=lightning) trains on the CPU"""
    name, device, *_ = _fit(tmp_path, "auto", FLAGOS_DISABLE_INTEGRATIONS="lightning")
    assert (name, device) == ("CPUAccelerator", "cpu")
