"""The router's overlap checks for in-place foreach ops (csrc/router/foreach_overlap.h).

Routed foreach calls are checked as CPU checks each index (partial overlap of a written tensor
with the same index of the other lists, internal overlap except for ``_foreach_zero_``) before any backend runs, since
fused foreach kernels (CUDA's, FlagGems') check nothing. On sim foreach ops are not routed (the
CPU fallback checks them); here they are routed to box:cpu, so the router's checks run, through
the generated unboxed kernel (``torch._foreach_*``) and the boxed entry (``torch.ops``).
"""

from __future__ import annotations

import pytest
import torch
import torch_fl
import torch_fl.routing

ROUTED = {
    "_foreach_add_.List": "box:cpu",
    "_foreach_addcmul_.Scalar": "box:cpu",
    "_foreach_neg_": "box:cpu",
    "_foreach_zero_": "box:cpu",
    "_foreach_copy_": "box:cpu",
}
PARTIAL = "some elements of the input tensor and the written-to tensor refer to a single memory"
INTERNAL = "more than one element of the written-to tensor refers to a single memory location"


@pytest.fixture
def routed(flagos):
    with torch_fl.routing.override(ROUTED):
        yield


def line(n: int = 40) -> torch.Tensor:
    return torch.arange(float(n), device="flagos:0")


def assert_untouched(d: torch.Tensor) -> None:
    assert torch.equal(d.cpu(), torch.arange(float(d.numel()))), d.cpu().tolist()


@pytest.mark.parametrize("boxed", [False, True], ids=["unboxed", "boxed"])
def test_partial_overlap_at_a_later_index_raises_before_any_write(routed, boxed):
    d = line()
    add_ = torch.ops.aten._foreach_add_.List if boxed else torch._foreach_add_
    with pytest.raises(RuntimeError, match=PARTIAL):
        add_([d[0:4], d[10:14]], [d[20:24], d[11:15]])
    assert_untouched(d)  # CPU would have written d[0:4]
    d[0:4].add_(0)  # the same call without overlap reaches the routed kernel
    add_([d[0:4], d[10:14]], [d[20:24], d[30:34]])
    counts = torch_fl._C.dispatch_counts()
    assert counts.get("aten::_foreach_add_.List", {}).get("box:cpu", 0) >= 1, counts


def test_each_list_is_checked_at_its_own_index(routed):
    d = line()
    with pytest.raises(RuntimeError, match=PARTIAL):
        torch._foreach_addcmul_([d[0:4], d[8:12]], [d[30:34], d[30:34]], [d[20:24], d[9:13]])
    assert_untouched(d)
    # Overlap across indices is not checked, as CPU does not check it: d[8:12] reads d[0:4]'s
    # neighbours only through its own pair.
    e = line()
    torch._foreach_addcmul_([e[0:4], e[8:12]], [e[4:8], e[12:16]], [e[20:24], e[24:28]])
    want = torch.arange(40.0)
    want[0:4] += want[4:8] * want[20:24]
    want[8:12] += want[12:16] * want[24:28]
    assert torch.equal(e.cpu(), want)


def test_internal_overlap_of_a_written_tensor(routed):
    d = line(6)
    with pytest.raises(RuntimeError, match=INTERNAL):
        torch._foreach_neg_([d[3:6], d[:1].expand(3)])
    assert_untouched(d)


def test_zero_accepts_an_expanded_tensor_like_cpu(routed):
    d = line(6)
    torch._foreach_zero_([d[:1].expand(3), d[4:6]])
    assert d.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 0.0, 0.0]


def test_full_overlap_and_disjoint_views_compute(routed):
    d = line()
    torch._foreach_add_([d[0:4], d[10:14]], [d[20:24], d[10:14]], alpha=2)
    want = torch.arange(40.0)
    want[0:4] += 2 * want[20:24]
    want[10:14] *= 3
    assert torch.equal(d.cpu(), want)
    e = line()
    torch._foreach_copy_([e[0:4]], [e[0:4]])
    assert_untouched(e)


def test_lists_of_other_lengths_are_left_to_the_kernel(routed):
    d = line()
    with pytest.raises(RuntimeError, match="same number of tensors|same length|Tensor lists must"):
        torch._foreach_add_([d[0:4], d[10:14]], [d[20:24]])
