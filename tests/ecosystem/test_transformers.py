"""transformers' Trainer and Accelerate on flagos (torch_fl.integrations.transformers/accelerate)."""

from __future__ import annotations

import re

import pytest
from _ecosystem import run_program

pytest.importorskip("transformers")
pytest.importorskip("accelerate")

pytestmark = [pytest.mark.ecosystem, pytest.mark.library("transformers")]

# The smallest Trainer program: a one-layer Llama from a config, two steps; prints the device the
# model trained on and the loss. argv: "bf16", "cpu" (use_cpu=True).
TRAINER = """
import sys, torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments
cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                  num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32)
torch.manual_seed(0)
model = LlamaForCausalLM(cfg)
class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        ids = (torch.arange(16) * (i + 1)) % 64
        return {"input_ids": ids, "labels": ids}
args = TrainingArguments(output_dir=sys.argv[-1], per_device_train_batch_size=4, max_steps=2,
                         report_to=[], save_strategy="no", bf16="bf16" in sys.argv,
                         use_cpu="cpu" in sys.argv, dataloader_num_workers=0, seed=0)
result = Trainer(model=model, args=args, train_dataset=Data()).train()
print("TRAINED", next(model.parameters()).device.type, args.n_gpu, result.training_loss)
"""


def _trained(proc) -> tuple[str, int, float]:
    match = re.search(r"^TRAINED (\S+) (\d+) (\S+)$", proc.stdout, re.M)
    assert match, proc.stdout[-2000:] + proc.stderr[-4000:]
    return match.group(1), int(match.group(2)), float(match.group(3))


def test_trainer_trains_on_flagos(tmp_path):
    """Trainer trains on flagos out of the box, the loss as on the CPU"""
    device, n_gpu, loss = _trained(run_program(TRAINER, str(tmp_path)))
    cpu_device, _, cpu_loss = _trained(run_program(TRAINER, "cpu", str(tmp_path)))
    assert device == "flagos" and n_gpu == 1
    assert cpu_device == "cpu"  # use_cpu=True with the adapter installed: the CPU, as without it
    assert loss == pytest.approx(cpu_loss, rel=1e-4)


def test_trainer_without_the_adapter_fails_as_reported(tmp_path):
    """Trainer with the adapter off (FLAGOS_DISABLE_INTEGRATIONS=transformers) fails: tensors on flagos and cpu"""
    proc = run_program(TRAINER, str(tmp_path), FLAGOS_DISABLE_INTEGRATIONS="transformers")
    assert proc.returncode != 0
    assert "Expected all tensors to be on the same device" in proc.stderr, proc.stderr[-3000:]


def test_trainer_bf16(tmp_path):
    """Trainer(bf16=True) trains on flagos in bf16 mixed precision, the loss as on the CPU"""
    import torch

    if not torch.flagos.is_bf16_supported():
        pytest.skip("the vendor declares no bf16")
    device, _, loss = _trained(run_program(TRAINER, "bf16", str(tmp_path)))
    _, _, cpu_loss = _trained(run_program(TRAINER, "bf16", "cpu", str(tmp_path)))
    assert device == "flagos"
    assert loss == pytest.approx(cpu_loss, rel=2e-2)


def test_cpu_run_unchanged(tmp_path):
    """Trainer with torch-fl not loaded (TORCH_DEVICE_BACKEND_AUTOLOAD=0) trains on the CPU as with use_cpu=True"""
    device, _, loss = _trained(
        run_program(TRAINER, str(tmp_path), TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    )
    _, _, with_fl = _trained(run_program(TRAINER, "cpu", str(tmp_path)))
    assert device == "cpu"
    assert loss == with_fl


@pytest.mark.library("accelerate")
def test_torchrun_fails_loudly(tmp_path):
    """Trainer/Accelerate under torchrun stop with a clear error instead of training a copy per process"""
    import torch

    if torch.flagos.device_count() < 2:
        pytest.skip("needs two flagos devices")
    script = tmp_path / "train.py"
    script.write_text(TRAINER)
    proc = run_program(
        "import runpy, sys; runpy.run_module('torch.distributed.run', run_name='__main__')",
        "--nproc_per_node",
        "2",
        str(script),
        str(tmp_path),
    )
    assert proc.returncode != 0
    assert "has no distributed type for flagos devices" in proc.stderr, proc.stderr[-3000:]
    assert "TRAINED" not in proc.stdout


PRETRAINED = """
import sys, torch
from transformers import LlamaConfig, LlamaForCausalLM
cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                  num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32)
torch.manual_seed(0)
LlamaForCausalLM(cfg).save_pretrained(sys.argv[1])
device_map = sys.argv[2] if sys.argv[2] in ("flagos", "auto") else int(sys.argv[2])
model = LlamaForCausalLM.from_pretrained(sys.argv[1], device_map=device_map)
ids = torch.arange(8).unsqueeze(0)
out = model(ids.to("flagos")).logits
ref = LlamaForCausalLM.from_pretrained(sys.argv[1])(ids).logits
torch.testing.assert_close(out.cpu(), ref, atol=1e-5, rtol=1e-5)
print("LOADED", next(model.parameters()).device.type)
"""


@pytest.mark.parametrize("device_map", ["flagos", "0", "auto"])
def test_from_pretrained_device_map(tmp_path, device_map):
    """from_pretrained(device_map="flagos", 0 or "auto") loads onto flagos out of the box (hub kernels left out there), outputs as on the CPU"""
    proc = run_program(PRETRAINED, str(tmp_path), device_map, USE_HUB_KERNELS="")  # its default: on
    assert "LOADED flagos" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-4000:]


def test_from_pretrained_without_the_adapter_fails_as_reported(tmp_path):
    """from_pretrained(device_map="flagos") with the adapter off (FLAGOS_DISABLE_INTEGRATIONS=hub_kernels) fails in kernels; USE_HUB_KERNELS=0 loads"""
    off = {"FLAGOS_DISABLE_INTEGRATIONS": "hub_kernels"}
    proc = run_program(PRETRAINED, str(tmp_path), "flagos", USE_HUB_KERNELS="", **off)
    assert proc.returncode != 0
    assert "Unsupported device type 'flagos'" in proc.stderr, proc.stderr[-3000:]
    proc = run_program(PRETRAINED, str(tmp_path), "flagos", USE_HUB_KERNELS="0", **off)
    assert "LOADED flagos" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-4000:]


@pytest.mark.library("safetensors")
def test_safetensors_loads_to_a_device_index(tmp_path):
    """load_file(device=<index>) loads onto flagos; device="flagos" is refused"""
    import torch
    from safetensors.torch import load_file, save_file

    path = tmp_path / "t.safetensors"
    save_file({"w": torch.arange(6.0).reshape(2, 3)}, str(path))
    loaded = load_file(str(path), device=0)
    assert loaded["w"].device.type == "flagos", loaded["w"].device
    assert loaded["w"].cpu().tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    with pytest.raises(Exception, match="flagos"):  # docs/ecosystem.md says so
        load_file(str(path), device="flagos")
