"""Kept list aliases (csrc/boxing/list_aliases.h): when a list's set is used, and when it is not.

sim routes the list operators to box:cpu as one call (derived), as the cuda vendor routes them
to box:cuda, so the router sees whole lists; the fixture routes them so explicitly too. The
counters are per thread: ``served`` (a list handed to the kernel as a kept set), ``built``,
``missed`` (a long list aliased tensor by tensor). tests/contract/test_foreach_lists.py checks the
results against CPU on every vendor.
"""

from __future__ import annotations

import pytest
import torch
import torch_fl
import torch_fl.routing
from torch_fl import _C

pytestmark = pytest.mark.budget

ROUTED = {
    "_foreach_add_.List": "box:cpu",
    "_foreach_add.List": "box:cpu",
    "_foreach_addcmul_.Scalar": "box:cpu",
}


@pytest.fixture
def routed(flagos):
    with torch_fl.routing.override(ROUTED):
        yield


def stats() -> dict:
    return dict(_C.list_alias_stats())


def delta(before: dict) -> dict:
    now = stats()
    return {k: now[k] - before[k] for k in now}


def lists(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    cpu = [torch.randn(32, generator=g) for _ in range(n)]
    return cpu, [t.to("flagos") for t in cpu]


def test_a_list_that_comes_back_is_served_without_per_tensor_aliases(routed):
    cx, fx = lists(150, 0)
    cy, fy = lists(150, 1)
    for _ in range(3):  # seen, then kept
        torch._foreach_add_(fx, fy)
        torch._foreach_add_(cx, cy)
    pool, before = dict(_C.alias_pool_stats()), stats()
    for _ in range(10):
        torch._foreach_add_(fx, fy)
        torch._foreach_add_(cx, cy)
    d = delta(before)
    assert d == {"served": 20, "built": 0, "missed": 0}, d
    # Not one operand went through the alias pool.
    assert dict(_C.alias_pool_stats()) == pool
    for f, c in zip(fx, cx, strict=True):
        assert torch.equal(f.cpu(), c)


def test_short_lists_go_tensor_by_tensor(routed):
    cx, fx = lists(7, 2)
    before = stats()
    for _ in range(5):
        torch._foreach_add_(fx, fx)
    assert delta(before) == {"served": 0, "built": 0, "missed": 0}


def test_the_same_list_twice_in_one_call_is_one_set(routed):
    _, fs = lists(20, 3)
    _, fg = lists(20, 4)
    cs, cg = [t.cpu() for t in fs], [t.cpu() for t in fg]
    for _ in range(3):
        torch._foreach_addcmul_(fs, fg, fg, value=0.5)
    before = stats()
    torch._foreach_addcmul_(fs, fg, fg, value=0.5)
    assert delta(before)["served"] == 2  # fs and fg; fg's second place reuses its set
    for _ in range(4):
        torch._foreach_addcmul_(cs, cg, cg, value=0.5)
    for f, c in zip(fs, cs, strict=True):
        torch.testing.assert_close(f.cpu(), c)


def test_lists_sharing_memory_go_tensor_by_tensor(routed):
    _, fx = lists(12, 5)
    cx = [t.cpu() for t in fx]
    rotated = fx[1:] + fx[:1]  # each index reads another index's memory
    for _ in range(3):
        torch._foreach_add_(fx, rotated)
    before = stats()
    torch._foreach_add_(fx, rotated)
    d = delta(before)
    # One of the two lists is served; the other shares its memory and goes tensor by tensor,
    # without its set being rebuilt.
    assert d == {"served": 1, "built": 0, "missed": 1}, d
    for _ in range(4):
        torch._foreach_add_(cx, cx[1:] + cx[:1])
    for f, c in zip(fx, cx, strict=True):
        torch.testing.assert_close(f.cpu(), c)


def test_views_of_one_storage_are_never_kept(routed):
    base = torch.zeros(12 * 8, device="flagos")
    views = list(base.view(12, 8).unbind(0))
    ones = [torch.ones(8, device="flagos") for _ in range(12)]
    before = stats()
    for _ in range(4):
        torch._foreach_add_(views, ones)
    d = delta(before)
    # `ones` is kept after its second call; the views (one storage) go tensor by tensor each time.
    assert d == {"served": 2, "built": 1, "missed": 6}, d
    assert torch.equal(base.cpu(), torch.full((96,), 4.0))


def test_a_changed_list_is_caught_and_kept_again(routed):
    cx, fx = lists(16, 6)
    cy, fy = lists(16, 7)
    for _ in range(3):
        torch._foreach_add_(fx, fy)
        torch._foreach_add_(cx, cy)
    fx[4].resize_(64)  # other memory, other size
    cx[4].resize_(64)
    fx[4].fill_(1.0)
    cx[4].fill_(1.0)
    fy[4] = torch.ones(64, device="flagos")
    cy[4] = torch.ones(64)
    fx[5].data = fx[5].data.double()  # another dtype over new memory
    cx[5].data = cx[5].data.double()
    for _ in range(4):
        torch._foreach_add_(fx, fy)
        torch._foreach_add_(cx, cy)
    for f, c in zip(fx, cx, strict=True):
        assert f.dtype == c.dtype
        torch.testing.assert_close(f.cpu(), c)


def test_out_of_place_results_are_new_flagos_tensors(routed):
    cx, fx = lists(10, 8)
    cy, fy = lists(10, 9)
    for _ in range(4):
        out = torch._foreach_add(fx, fy)
    assert stats()["served"] > 0
    expect = torch._foreach_add(cx, cy)
    for o, x, e in zip(out, fx, expect, strict=True):
        assert o.device.type == "flagos"
        assert o.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
        torch.testing.assert_close(o.cpu(), e)
