"""An index out of range in a gcu indexing kernel says which index and size, as CPU and CUDA do
(topsaten reports only TOPSATEN_STATUS_EXECUTE_ERROR)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.gcu

CASES = {
    "index_select": lambda w, i: w.index_select(0, i),
    "embedding": lambda w, i: F.embedding(i, w.reshape(3, 1)),
    "index": lambda w, i: w[i],
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=["int32", "int64"])
def test_out_of_range_index_names_index_and_size(gcu, name, dtype):
    w = torch.arange(3.0, device="flagos")
    i = torch.tensor([1, 5], dtype=dtype, device="flagos")
    with pytest.raises((RuntimeError, IndexError)) as info:
        CASES[name](w, i)
        torch.flagos.synchronize()
    msg = str(info.value).splitlines()[0]
    assert "index 5 is out of bounds for dimension 0 with size 3" in msg or (
        "index out of range in self" in msg
    ), msg
