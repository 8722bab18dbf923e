"""PEFT (LoRA adapters) on flagos: no adapter of ours, the library as users call it."""

from __future__ import annotations

import re

import pytest
from _ecosystem import run_program

pytest.importorskip("peft")
pytest.importorskip("transformers")

pytestmark = [pytest.mark.ecosystem, pytest.mark.library("peft")]

# A one-layer Llama with LoRA on its attention projections, three AdamW steps on one batch;
# prints the losses and a checksum of the trained adapter. argv: device, output directory.
LORA = """
import sys, torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM
device, out = sys.argv[1], sys.argv[2]
cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                  num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32)
torch.manual_seed(0)
base = LlamaForCausalLM(cfg)
model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                        init_lora_weights="gaussian")).to(device)
ids = (torch.arange(32).reshape(2, 16) * 7 % 64).to(device)
opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
losses = []
for _ in range(3):
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
    losses.append(float(loss))
lora = sum(float(p.double().sum()) for n, p in model.named_parameters() if "lora_" in n)
model.eval()
with torch.no_grad():
    logits = model(input_ids=ids).logits
    model.save_pretrained(out)
    # The adapter saved from this device loads onto a fresh base on it, and merging it into the
    # base weights keeps the outputs.
    torch.manual_seed(0)
    again = PeftModel.from_pretrained(LlamaForCausalLM(cfg).to(device), out).eval()
    reloaded = float((again(input_ids=ids).logits - logits).abs().max())
    merged = again.merge_and_unload()
    merge_err = float((merged(input_ids=ids).logits - logits).abs().max())
print("LORA", next(model.parameters()).device.type, *losses, lora, reloaded, merge_err)
"""


def _lora(tmp_path, device: str) -> tuple[str, list[float], float, float, float]:
    proc = run_program(LORA, device, str(tmp_path / device))
    match = re.search(r"^LORA (\S+) (\S+) (\S+) (\S+) (\S+) (\S+) (\S+)$", proc.stdout, re.M)
    assert match, proc.stdout[-2000:] + proc.stderr[-4000:]
    values = [float(v) for v in match.groups()[1:]]
    return match.group(1), values[:3], values[3], values[4], values[5]


def test_lora_trains_saves_and_merges_on_flagos(tmp_path):
    """LoRA (get_peft_model, .to("flagos")) trains, saves, reloads and merges on flagos as on the CPU"""
    device, losses, lora, reloaded, merge_err = _lora(tmp_path, "flagos")
    _, cpu_losses, cpu_lora, _, cpu_merge_err = _lora(tmp_path, "cpu")
    assert device == "flagos"
    assert losses == pytest.approx(cpu_losses, rel=1e-4)
    assert lora == pytest.approx(cpu_lora, rel=1e-4, abs=1e-5)
    assert reloaded == 0.0  # the saved adapter is the trained one, bit for bit
    assert merge_err <= max(1e-5, 10 * cpu_merge_err)
