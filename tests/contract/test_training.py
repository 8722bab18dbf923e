"""A tiny MLP trained for a few steps on flagos matches the same training on CPU."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch_fl.conformance import tolerances

pytestmark = [pytest.mark.training, pytest.mark.usefixtures("flagos")]

STEPS = 5
# Several steps of float32 matmuls and updates: looser than one op's tolerance, far tighter than
# any real divergence.
TRAIN_TOL = tolerances.FLOAT32_STEPS.kwargs()

OPTIMIZERS = {
    "sgd": lambda params: torch.optim.SGD(params, lr=0.1),
    "sgd_momentum": lambda params: torch.optim.SGD(
        params, lr=0.05, momentum=0.9, weight_decay=1e-3
    ),
    "adam": lambda params: torch.optim.Adam(params, lr=1e-2),
}


def make_mlp() -> torch.nn.Module:
    torch.manual_seed(1234)
    return torch.nn.Sequential(
        torch.nn.Linear(10, 32),
        torch.nn.ReLU(),
        torch.nn.Linear(32, 16),
        torch.nn.Tanh(),
        torch.nn.Linear(16, 3),
    )


def make_data():
    g = torch.Generator().manual_seed(99)
    x = torch.randn(64, 10, generator=g)
    y_reg = torch.randn(64, 3, generator=g)
    y_cls = torch.randint(0, 3, (64,), generator=g)
    return x, y_reg, y_cls


def train(model, opt_name, loss_name, device):
    x, y_reg, y_cls = (t.to(device) for t in make_data())
    model = model.to(device)
    opt = OPTIMIZERS[opt_name](model.parameters())
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        out = model(x)
        loss = F.mse_loss(out, y_reg) if loss_name == "mse" else F.cross_entropy(out, y_cls)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return model, opt, torch.stack(losses)


@pytest.mark.parametrize("loss_name", ["mse", "cross_entropy"])
@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
@pytest.mark.parametrize("device", ["flagos:0", "flagos:1"])
def test_training_matches_cpu(device, opt_name, loss_name, flagos):
    dev = torch.device(device)
    if dev.index >= flagos.device_count():
        pytest.skip(f"needs {device}; vendor has {flagos.device_count()} device(s)")
    base = make_mlp()
    cpu_model, _, cpu_losses = train(copy.deepcopy(base), opt_name, loss_name, "cpu")
    fl_model, fl_opt, fl_losses = train(copy.deepcopy(base), opt_name, loss_name, device)

    assert flagos.current_device() == 0
    assert fl_losses.device == dev
    assert cpu_losses[-1] < cpu_losses[0], "the reference did not learn; the test would be vacuous"
    torch.testing.assert_close(fl_losses.cpu(), cpu_losses, **TRAIN_TOL)
    for (name, p_fl), (_, p_cpu) in zip(
        fl_model.named_parameters(), cpu_model.named_parameters(), strict=True
    ):
        assert p_fl.device == dev and p_fl.grad is not None and p_fl.grad.device == dev, name
        torch.testing.assert_close(p_fl.detach().cpu(), p_cpu.detach(), **TRAIN_TOL, msg=name)
        torch.testing.assert_close(p_fl.grad.cpu(), p_cpu.grad, **TRAIN_TOL, msg=f"{name}.grad")
    for state in fl_opt.state.values():
        for key, value in state.items():
            if torch.is_tensor(value) and value.dim() > 0:
                assert value.device == dev, f"optimizer state {key} on {value.device}"


def test_autograd_simple_graph(flagos):
    x_cpu = torch.linspace(-2, 2, 7, dtype=torch.float64, requires_grad=True)
    x = x_cpu.detach().to("flagos").requires_grad_()
    (x.sin() * x).sum().backward()
    (x_cpu.sin() * x_cpu).sum().backward()
    assert x.grad.device == torch.device("flagos", 0)
    torch.testing.assert_close(
        x.grad.cpu(), x_cpu.grad, **tolerances.for_dtype(torch.float64).kwargs()
    )


def test_no_grad_and_inference_mode(flagos):
    w = torch.ones(3, device="flagos", requires_grad=True)
    with torch.no_grad():
        y = w * 2
    assert not y.requires_grad
    with torch.inference_mode():
        z = w * 3
    assert z.is_inference() and z.cpu().tolist() == [3.0, 3.0, 3.0]
