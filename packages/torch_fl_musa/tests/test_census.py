"""Census on the emulated MUSA GPU: the tiny Hugging Face models of the contract suite, forward and
backward, and how many of their routed calls muDNN served against the CPU fallback (core's
:mod:`torch_fl.model_census`). ``python packages/torch_fl_musa/tests/test_census.py --write``
measures it again and writes docs/data/census/musa.json and the table in docs/musa.md."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.musa

# A model whose calls muDNN serves less often than this has lost a native family.
MIN_NATIVE_SHARE = 0.5
ROOT = Path(__file__).resolve().parents[3]  # the monorepo


@pytest.fixture(scope="module")
def zoo(musa):
    pytest.importorskip("transformers")
    from torch_fl import model_census

    return model_census.load_zoo(ROOT)


@pytest.mark.parametrize("name", ["gpt2", "llama", "qwen", "bert", "vit"])
def test_model_runs_mostly_on_mudnn(zoo, name):
    from torch_fl import census, model_census

    name = zoo.QWEN if name == "qwen" else name  # Qwen3, or Qwen2 on an older transformers
    counts, value, ref = model_census.census_of(zoo, name)
    assert abs(value - ref) <= 1e-3 * max(1.0, abs(ref)), (value, ref)
    by_backend = model_census.shares(counts)
    assert by_backend.get("musa", 0) / sum(by_backend.values()) >= MIN_NATIVE_SHARE, by_backend
    # Every CPU-fallback call is accounted to an operator the report names.
    assert sum(census.fallback_ops(counts).values()) == by_backend.get("cpu", 0)


def test_the_documented_table_is_the_recorded_run():
    from torch_fl import model_census

    assert model_census.documented(ROOT, "musa", "muDNN"), (
        "docs/musa.md's census table differs from docs/data/census/musa.json: rerun "
        "`python packages/torch_fl_musa/tests/test_census.py --write`"
    )


if __name__ == "__main__":
    os.environ.setdefault("FLAGOS_VENDOR", "musa")
    import torch  # noqa: F401  -- sets up flagos
    from torch_fl import model_census

    if "--write" in sys.argv:
        model_census.write(ROOT, "musa", "muDNN")
    else:
        print(model_census.table(model_census.rows(model_census.load_zoo(ROOT), "musa"), "muDNN"))
