"""Census on the emulated Ascend NPU: the tiny Hugging Face models of the contract suite
(tests/contract/test_models.py), forward and backward, and how many of their routed operator
calls ACLNN served against the CPU fallback (core's :mod:`torch_fl.model_census`).
``python packages/torch_fl_ascend/tests/test_census.py --write`` measures it again and writes
docs/data/census/ascend.json and the table in docs/ascend.md."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.ascend

# A model whose calls ACLNN serves less often than this has lost a native family.
MIN_NATIVE_SHARE = 0.5
ROOT = Path(__file__).resolve().parents[3]  # the monorepo


@pytest.fixture(scope="module")
def zoo(ascend):
    pytest.importorskip("transformers")
    from torch_fl import model_census

    return model_census.load_zoo(ROOT)


@pytest.mark.parametrize(
    "name", ["gpt2", "llama", "qwen", "mistral", "mixtral", "bert", "t5", "vit"]
)
def test_model_runs_mostly_on_aclnn(zoo, name):
    from torch_fl import model_census

    name = zoo.QWEN if name == "qwen" else name  # Qwen3, or Qwen2 on an older transformers
    counts, value, ref = model_census.census_of(zoo, name)
    assert abs(value - ref) <= 1e-3 * max(1.0, abs(ref)), (value, ref)
    by_backend = model_census.shares(counts)
    total = sum(by_backend.values())
    native = by_backend.get("ascend", 0)
    assert native / total >= MIN_NATIVE_SHARE, (name, by_backend)
    from torch_fl import census

    # Every CPU-fallback call is accounted to an operator the report names.
    fallback = census.fallback_ops(counts)
    assert sum(fallback.values()) == by_backend.get("cpu", 0), (fallback, by_backend)


def test_the_documented_table_is_the_recorded_run():
    from torch_fl import model_census

    assert model_census.documented(ROOT, "ascend", "ACLNN"), (
        "docs/ascend.md's census table differs from docs/data/census/ascend.json: rerun "
        "`python packages/torch_fl_ascend/tests/test_census.py --write`"
    )


if __name__ == "__main__":
    os.environ.setdefault("FLAGOS_VENDOR", "ascend")
    import torch  # noqa: F401  -- sets up flagos
    from torch_fl import model_census

    if "--write" in sys.argv:
        model_census.write(ROOT, "ascend", "ACLNN")
    else:
        print(model_census.table(model_census.rows(model_census.load_zoo(ROOT), "ascend"), "ACLNN"))
