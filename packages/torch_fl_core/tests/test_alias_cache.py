"""The router's per-thread operand-alias cache (csrc/router/box_alias.cpp, call_alias).

Kernels of another device type (box:cpu on sim, box:cuda on the cuda vendor) get a view of a
flagos tensor's memory typed as their device. The cache keeps those views per memory block and
re-points them call after call; these tests pin down that a view never reaches memory it no
longer describes (a kernel grew it, the pool handed its block to another tensor) and that the
cache does serve repeated operands. They run on any vendor whose route table sends `add` to a
box backend (sim's box:cpu, the cuda vendor's box:cuda); elsewhere they skip, naming the route.
"""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="module")
def dev() -> str:
    import torch_fl  # noqa: F401

    mod = getattr(torch, "flagos", None)
    if mod is None or not mod.is_available():
        pytest.skip("no flagos device")
    from torch_fl import _C

    routes = {name: backend for name, backend, _ in _C.router_routes()}
    for op in ("aten::add.out", "aten::add_.Tensor"):
        if not str(routes.get(op, "")).startswith("box:"):
            pytest.skip(f"{op} routes to {routes.get(op)!r}, not a box backend: no operand aliases")
    return "flagos:0"


def test_grown_out_aliases_are_not_reused_for_other_memory(dev):
    # An out= tensor too small for the result: the kernel grows its alias into new flagos
    # memory, which the tensor then owns, and its old block goes back to the pool. A tensor
    # allocated in that block next must get an alias of its own memory, not the cached, grown
    # one (which would write its result into the first tensor).
    import warnings

    from torch_fl import _C

    a = torch.arange(4.0, device=dev)
    o1 = torch.zeros(1, device=dev)
    o1.add_(0.0)  # o1's memory now has a cached alias
    old = o1.data_ptr()
    changes = _C.alias_cache_stats()["storage_changes"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns about resizing a non-empty out=
        torch.add(a, a, out=o1)
    assert o1.data_ptr() != old
    assert _C.alias_cache_stats()["storage_changes"] > changes
    # The pool hands the old block out again (kept: a different block would not test this).
    held = [torch.zeros(1, device=dev) for _ in range(64)]
    o2 = next((t for t in held if t.data_ptr() == old), None)
    assert o2 is not None, "the pool never handed the old block out again"
    o2.add_(5.0)
    assert o1.cpu().tolist() == [0.0, 2.0, 4.0, 6.0]
    assert o2.cpu().tolist() == [5.0]


def test_empty_out_tensors_grow_without_cache_checks(dev):
    # Empty out= tensors (factories fill them: arange does, every decode step) get an alias
    # per call that is never cached, so growing them costs the cache nothing.
    from torch_fl import _C

    changes = _C.alias_cache_stats()["storage_changes"]
    outs = []
    for _ in range(3):
        o = torch.empty(0, device=dev)
        torch.add(torch.arange(4.0, device=dev), 1.0, out=o)
        outs.append(o)
    assert _C.alias_cache_stats()["storage_changes"] == changes
    assert [o.cpu().tolist() for o in outs] == [[1.0, 2.0, 3.0, 4.0]] * 3
    assert len({o.data_ptr() for o in outs}) == 3


def test_alias_cache_serves_repeated_operands(dev):
    # The same operands call after call reuse their cached aliases instead of building new ones.
    from torch_fl import _C

    a = torch.arange(8.0, device=dev)
    b = torch.ones(8, device=dev)
    out = torch.empty(8, device=dev)
    torch.add(a, b, out=out)
    before = _C.alias_cache_stats()
    for _ in range(10):
        torch.add(a, b, out=out)
    after = _C.alias_cache_stats()
    assert after["builds"] == before["builds"]
    assert after["hits"] - before["hits"] == 30
    torch.testing.assert_close(out.cpu(), torch.arange(8.0) + 1)


def test_alias_cache_rebinds_idle_aliases_when_full(dev):
    # More distinct operands than the cache holds (2048 slots): once a set is full, a miss
    # re-points its least recently used idle alias at the new memory instead of building one.
    # Every tensor must still be updated in its own memory, in both passes.
    from torch_fl import _C

    ts = [torch.zeros(4, device=dev) for _ in range(3000)]
    before = _C.alias_cache_stats()
    for _ in range(2):
        for t in ts:
            t.add_(1.0)
    after = _C.alias_cache_stats()
    assert after["rebinds"] > before["rebinds"]
    assert torch.stack(ts).cpu().eq(2.0).all()
