"""Census on the emulated Ascend NPU: the tiny Hugging Face models of the contract suite
(tests/contract/test_models.py), forward and backward, and how many of their routed operator
calls ACLNN served against the CPU fallback. ``python packages/torch_fl_ascend/tests/test_census.py``
prints the table docs/ascend.md quotes."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.ascend

CONTRACT = Path(__file__).resolve().parents[3] / "tests" / "contract"
# A model whose calls ACLNN serves less often than this has lost a native family.
MIN_NATIVE_SHARE = 0.5


def _models():
    pytest.importorskip("transformers")
    sys.path.insert(0, str(CONTRACT))
    try:
        import test_models as zoo
    finally:
        sys.path.remove(str(CONTRACT))
    return zoo


def census_of(zoo, name: str) -> tuple[dict[str, dict[str, int]], float, float]:
    """(counts, flagos loss, CPU loss) of one forward + backward of model ``name``."""
    import torch
    from torch_fl import census

    torch.manual_seed(0)
    cpu = zoo.BUILDERS[name]()
    model = copy.deepcopy(cpu).to("flagos")
    inputs = zoo.make_inputs(name)
    with census.counting() as counts:
        _, loss = zoo.loss_of(name, model, {k: v.to("flagos") for k, v in inputs.items()})
        loss.backward()
        value = loss.item()
    _, ref = zoo.loss_of(name, cpu, inputs)
    return dict(counts), value, ref.item()


def shares(counts: dict[str, dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for per in counts.values():
        for backend, n in per.items():
            out[backend] = out.get(backend, 0) + n
    return out


@pytest.fixture(scope="module")
def zoo(ascend):
    return _models()


@pytest.mark.parametrize(
    "name", ["gpt2", "llama", "qwen", "mistral", "mixtral", "bert", "t5", "vit"]
)
def test_model_runs_mostly_on_aclnn(zoo, name):
    name = zoo.QWEN if name == "qwen" else name  # Qwen3, or Qwen2 on an older transformers
    counts, value, ref = census_of(zoo, name)
    assert abs(value - ref) <= 1e-3 * max(1.0, abs(ref)), (value, ref)
    by_backend = shares(counts)
    total = sum(by_backend.values())
    native = by_backend.get("ascend", 0)
    assert native / total >= MIN_NATIVE_SHARE, (name, by_backend)
    from torch_fl import census

    # Every CPU-fallback call is accounted to an operator the report names.
    fallback = census.fallback_ops(counts)
    assert sum(fallback.values()) == by_backend.get("cpu", 0), (fallback, by_backend)


def main() -> None:
    import torch  # noqa: F401  -- sets up flagos (FLAGOS_VENDOR=ascend)
    from torch_fl import census

    zoo = _models()
    print("| model | routed calls | ACLNN | CPU fallback | other | CPU-fallback operators |")
    print("|---|---|---|---|---|---|")
    for name in zoo.BUILDERS:
        counts, _, _ = census_of(zoo, name)
        by = shares(counts)
        total = sum(by.values())
        native, cpu = by.get("ascend", 0), by.get("cpu", 0)
        ops = ", ".join(
            f"`{op.removeprefix('aten::')}` {n}"
            for op, n in sorted(census.fallback_ops(counts).items(), key=lambda kv: -kv[1])
        )
        print(f"| {name} | {total} | {native} | {cpu} | {total - native - cpu} | {ops or '-'} |")


if __name__ == "__main__":
    main()
