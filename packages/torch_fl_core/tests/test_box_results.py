"""box:cpu results on the sim runtime: fresh host-kernel results are flagos pool memory.

While a box:cpu host kernel runs, its CPU allocations come from the flagos pool of the call's
device, and the router adopts a fresh result without a copy (csrc/router/box_alias.cpp,
HostResultScope). These tests pin that down through the allocator's statistics: the result's
block is counted as allocated while the result lives and returns when it dies, also with several
threads calling at once, and a result over the same memory as another result stays correct.
"""

from __future__ import annotations

import gc
import threading

import torch


def allocated(flagos) -> int:
    gc.collect()
    flagos.synchronize(0)
    return flagos.memory_allocated(0)


def test_fresh_result_is_pool_memory_and_returns(flagos):
    a = torch.arange(8.0, device="flagos:0")
    b = torch.ones(8, device="flagos:0")
    before = allocated(flagos)
    c = torch.add(a, b)
    assert c.device == torch.device("flagos:0")
    assert allocated(flagos) == before + 512  # one minimum-size block, no copy left behind
    torch.testing.assert_close(c.cpu(), torch.arange(8.0) + 1)
    del c
    assert allocated(flagos) == before


def test_multi_output_results(flagos):
    x = torch.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]], device="flagos:0")
    before = allocated(flagos)
    values, indices = torch.max(x, dim=1)
    assert allocated(flagos) == before + 2 * 512
    assert values.cpu().tolist() == [3.0, 5.0]
    assert indices.cpu().tolist() == [0, 1]
    del values, indices
    assert allocated(flagos) == before


def test_results_sharing_memory_stay_valid(flagos):
    # unbind returns views of its input; chunk of a fresh result returns views of one storage.
    a = torch.arange(6.0, device="flagos:0")
    parts = torch.add(a, 1).chunk(3)
    del a
    gc.collect()
    assert [p.cpu().tolist() for p in parts] == [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    assert len({p.untyped_storage().data_ptr() for p in parts}) == 1


def test_threads_share_inputs(flagos):
    a = torch.arange(64.0, device="flagos:0")
    b = torch.full((64,), 2.0, device="flagos:0")
    expected = (torch.arange(64.0) * 2 + 2).tolist()
    before = allocated(flagos)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(200):
                c = torch.mul(a, b).add_(2)
                assert c.cpu().tolist() == expected
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert allocated(flagos) == before


def test_grown_out_aliases_are_not_reused_for_other_memory(flagos):
    # An out= tensor too small for the result: the kernel grows its alias into new flagos
    # memory, which the tensor then owns, and its old block goes back to the pool. A tensor
    # allocated in that block next must get an alias of its own memory, not the cached, grown
    # one (which would write its result into the first tensor).
    import warnings

    from torch_fl import _C

    a = torch.arange(4.0, device="flagos:0")
    o1 = torch.zeros(1, device="flagos:0")
    o1.add_(0.0)  # o1's memory now has a cached alias
    old = o1.data_ptr()
    changes = _C.alias_cache_stats()["storage_changes"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns about resizing a non-empty out=
        torch.add(a, a, out=o1)
    assert o1.data_ptr() != old
    assert _C.alias_cache_stats()["storage_changes"] > changes
    o2 = torch.zeros(1, device="flagos:0")
    assert o2.data_ptr() == old  # the pool hands the block out again (precondition)
    o2.add_(5.0)
    assert o1.cpu().tolist() == [0.0, 2.0, 4.0, 6.0]
    assert o2.cpu().tolist() == [5.0]


def test_empty_out_tensors_grow_without_cache_checks(flagos):
    # Empty out= tensors (factories fill them: arange does, every decode step) get an alias
    # per call that is never cached, so growing them costs the cache nothing.
    from torch_fl import _C

    changes = _C.alias_cache_stats()["storage_changes"]
    outs = []
    for _ in range(3):
        o = torch.empty(0, device="flagos:0")
        torch.add(torch.arange(4.0, device="flagos:0"), 1.0, out=o)
        outs.append(o)
    assert _C.alias_cache_stats()["storage_changes"] == changes
    assert [o.cpu().tolist() for o in outs] == [[1.0, 2.0, 3.0, 4.0]] * 3
    assert len({o.data_ptr() for o in outs}) == 3


def test_alias_cache_serves_repeated_operands(flagos):
    # The same operands call after call reuse their cached aliases instead of building new ones.
    from torch_fl import _C

    a = torch.arange(8.0, device="flagos:0")
    b = torch.ones(8, device="flagos:0")
    out = torch.empty(8, device="flagos:0")
    torch.add(a, b, out=out)
    before = _C.alias_cache_stats()
    for _ in range(10):
        torch.add(a, b, out=out)
    after = _C.alias_cache_stats()
    assert after["builds"] == before["builds"]
    assert after["hits"] - before["hits"] == 30
    torch.testing.assert_close(out.cpu(), torch.arange(8.0) + 1)


def test_alias_cache_rebinds_idle_aliases_when_full(flagos):
    # More distinct operands than the cache holds (2048 slots): once a set is full, a miss
    # re-points its least recently used idle alias at the new memory instead of building one.
    # Every tensor must still be updated in its own memory, in both passes.
    from torch_fl import _C

    ts = [torch.zeros(4, device="flagos:0") for _ in range(3000)]
    before = _C.alias_cache_stats()
    for _ in range(2):
        for t in ts:
            t.add_(1.0)
    after = _C.alias_cache_stats()
    assert after["rebinds"] > before["rebinds"]
    assert torch.stack(ts).cpu().eq(2.0).all()
