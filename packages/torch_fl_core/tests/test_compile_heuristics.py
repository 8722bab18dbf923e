"""Inductor's device-type-keyed tuning shared with ``flagos`` (torch_fl.compile.inductor).

The template-heuristics registry and ``InductorChoices`` are pure Python, so the Triton case (a
vendor compiling for ``triton_target="cuda"``) is checked here on a CPU build with a stand-in
vendor object; the registry is restored after each test.
"""

from __future__ import annotations

import logging
import sys
from types import SimpleNamespace

import pytest
import torch
import torch._inductor.compile_fx  # noqa: F401 - completes torch_fl's Inductor registration
from torch._inductor.choices import InductorChoices
from torch_fl.compile import choice, inductor

pytestmark = pytest.mark.compile

registry = pytest.importorskip("torch._inductor.template_heuristics.registry")

# Triton GEMM templates whose heuristics Inductor registers per device type (torch >= 2.10).
CUDA_TEMPLATE_OPS = [("triton::mm", "mm"), ("triton::mm", "addmm"), ("triton::bmm", "bmm")]


@pytest.fixture
def fresh_flagos_registry():
    """The registry as Inductor filled it, with no ``flagos`` entries; restored afterwards."""
    table = registry._TEMPLATE_HEURISTIC_REGISTRY
    cache = registry._HEURISTIC_CACHE
    saved_table, saved_cache = dict(table), dict(cache)
    for key in [k for k in table if k[1] == "flagos"]:
        del table[key]
    cache.clear()
    yield table
    table.clear()
    table.update(saved_table)
    cache.clear()
    cache.update(saved_cache)


@pytest.fixture
def triton_vendor(monkeypatch):
    """A vendor declaring Triton scheduling for the cuda target, as torch_fl_cuda does."""
    fake = SimpleNamespace(name="fake-triton", compile_scheduling="triton", triton_target="cuda")
    monkeypatch.setattr(choice, "_vendor", lambda: fake)
    return fake


def _class(template: str, device_type: str, op: str) -> type:
    return type(registry.get_template_heuristic(template, device_type, op))


def test_tuning_device_type_follows_the_scheduling(triton_vendor, monkeypatch):
    assert choice.tuning_device_type() == "cuda"
    triton_vendor.triton_target = "hip"  # ROCm's torch calls its device type cuda
    assert choice.tuning_device_type() == "cuda"
    triton_vendor.compile_scheduling = "cpp"
    monkeypatch.setattr(choice, "_host_addressable", lambda: True)
    assert choice.tuning_device_type() == "cpu"


def test_triton_vendor_gets_cudas_template_heuristics(fresh_flagos_registry, triton_vendor):
    table = fresh_flagos_registry
    cuda_keys = [k for k in table if k[1] == "cuda"]
    assert cuda_keys, "this torch registers no cuda template heuristics"
    assert all(k[1] != "flagos" for k in table)

    copied = inductor._share_template_heuristics(choice.tuning_device_type())

    assert copied == len(cuda_keys)
    for template, _, op in cuda_keys:
        assert table[(template, "flagos", op)] is table[(template, "cuda", op)]
    for template, op in CUDA_TEMPLATE_OPS:
        assert _class(template, "flagos", op) is _class(template, "cuda", op)
        if torch.version.hip is None:
            assert _class(template, "flagos", op).__name__.startswith("CUDA")


def test_no_heuristic_missing_for_flagos_after_sharing(fresh_flagos_registry, triton_vendor):
    records: list[str] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    logger = logging.getLogger(registry.__name__)
    handler = _Keep(logging.DEBUG)
    logger.addHandler(handler)
    try:
        before = _class("triton::mm", "flagos", "addmm")  # the bug: a bare fallback, logged
        assert any("No template heuristic found" in m for m in records)
        records.clear()
        inductor._share_template_heuristics("cuda")
        after = _class("triton::mm", "flagos", "addmm")
    finally:
        logger.removeHandler(handler)
    assert before is registry.TemplateConfigHeuristics
    assert after is _class("triton::mm", "cuda", "addmm")
    assert not [m for m in records if "No template heuristic found" in m]


def test_sharing_keeps_flagos_entries_and_clears_stale_cache(fresh_flagos_registry):
    table = fresh_flagos_registry

    class Own(registry.TemplateConfigHeuristics):
        pass

    registry.register_template_heuristic("triton::mm", "flagos", op_name="mm")(Own)
    registry._HEURISTIC_CACHE[("triton::bmm", "flagos", "bmm")] = (
        registry.TemplateConfigHeuristics()
    )
    inductor._share_template_heuristics("cuda")
    assert table[("triton::mm", "flagos", "mm")] is Own
    assert ("triton::bmm", "flagos", "bmm") not in registry._HEURISTIC_CACHE
    assert _class("triton::bmm", "flagos", "bmm") is _class("triton::bmm", "cuda", "bmm")


def test_without_a_registry_nothing_is_shared(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "torch._inductor.template_heuristics.registry", None)
    with caplog.at_level(logging.DEBUG, logger=inductor.__name__):
        assert inductor._share_template_heuristics("cuda") is None
    assert "no template heuristics shared" in caplog.text


def test_config_heuristics_follow_the_vendor(triton_vendor):
    # Installed at registration for vendors that compile; idempotent, so also for one that doesn't.
    inductor._share_config_heuristics()
    choices = InductorChoices()
    assert type(choices.get_config_heuristics("flagos")) is type(
        choices.get_config_heuristics("cuda")
    )
    assert type(choices.get_config_heuristics(device_type="flagos")) is type(
        choices.get_config_heuristics("cuda")
    )
    # Other device types and Inductor's default are untouched.
    assert type(choices.get_config_heuristics("cpu")).__name__ == "CPUConfigHeuristic"
    assert type(choices.get_config_heuristics()) is type(choices.get_config_heuristics("cuda"))
