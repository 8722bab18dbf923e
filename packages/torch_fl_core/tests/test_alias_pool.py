"""The per-thread pool of operand aliases (csrc/boxing/alias_pool.cpp, pooled_alias).

Kernels of another device type (box:cpu on sim, box:cuda on the cuda vendor) get a view of a
flagos tensor's memory typed as their device. A small pool keeps those views and re-points an
idle one at each new operand; these tests pin down that a view never reaches memory it no
longer describes (a kernel grew it, the allocator handed its block to another tensor), that
calls holding more aliases than the pool keeps still work, and that the pool serves repeated
operands without building. They run on any vendor whose route table sends `add` to a
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

    a = torch.arange(4.0, device=dev)
    o1 = torch.zeros(1, device=dev)
    o1.add_(0.0)  # o1's memory now has a cached alias
    old = o1.data_ptr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns about resizing a non-empty out=
        torch.add(a, a, out=o1)
    assert o1.data_ptr() != old
    # The pool hands the old block out again (kept: a different block would not test this).
    held = [torch.zeros(1, device=dev) for _ in range(64)]
    o2 = next((t for t in held if t.data_ptr() == old), None)
    assert o2 is not None, "the pool never handed the old block out again"
    o2.add_(5.0)
    assert o1.cpu().tolist() == [0.0, 2.0, 4.0, 6.0]
    assert o2.cpu().tolist() == [5.0]


def test_empty_out_tensors_grow_into_their_own_memory(dev):
    # Empty out= tensors (factories fill them: arange does, every decode step) are grown by the
    # kernel through a pooled alias; each keeps its own new memory, and the alias re-pointed
    # next does not carry the previous growth along.
    outs = []
    for _ in range(3):
        o = torch.empty(0, device=dev)
        torch.add(torch.arange(4.0, device=dev), 1.0, out=o)
        outs.append(o)
    assert [o.cpu().tolist() for o in outs] == [[1.0, 2.0, 3.0, 4.0]] * 3
    assert len({o.data_ptr() for o in outs}) == 3


def test_alias_pool_serves_repeated_operands(dev):
    # The same operands call after call reuse their cached aliases instead of building new ones.
    from torch_fl import _C

    a = torch.arange(8.0, device=dev)
    b = torch.ones(8, device=dev)
    out = torch.empty(8, device=dev)
    torch.add(a, b, out=out)
    before = _C.alias_pool_stats()
    for _ in range(10):
        torch.add(a, b, out=out)
    after = _C.alias_pool_stats()
    assert after["builds"] == before["builds"]
    assert after["hits"] - before["hits"] == 30
    torch.testing.assert_close(out.cpu(), torch.arange(8.0) + 1)


def test_alias_pool_repoints_idle_aliases(dev):
    # Many distinct operands, one call at a time: the pool re-points its idle aliases at each
    # new tensor instead of building one, and every tensor is updated in its own memory.
    from torch_fl import _C

    ts = [torch.zeros(4, device=dev) for _ in range(300)]
    ts[0].add_(1.0)  # the pool holds an idle float32 alias from here on
    before = _C.alias_pool_stats()
    for t in ts[1:]:
        t.add_(1.0)
    for t in ts:
        t.add_(1.0)
    after = _C.alias_pool_stats()
    assert after["builds"] == before["builds"]
    assert after["rebinds"] - before["rebinds"] >= 299
    assert torch.stack(ts).cpu().eq(2.0).all()


def test_calls_holding_more_aliases_than_the_pool_keeps(dev):
    # A cat of 100 tensors holds 100 aliases at once, more than the pool keeps of one kind: the
    # rest are built for the call. Mixed dtypes and strided operands take aliases of their own kind
    # and geometry; nothing is re-pointed while a call still holds it.
    parts = [torch.full((2, 3), float(i), device=dev) for i in range(100)]
    got = torch.cat(parts, dim=0)
    want = torch.cat([p.cpu() for p in parts], dim=0)
    torch.testing.assert_close(got.cpu(), want)
    a = torch.arange(12.0, device=dev).view(3, 4)
    b = torch.arange(12, device=dev).view(4, 3).t()  # int64, strided
    h = torch.arange(12.0, device=dev).half().view(3, 4)
    for _ in range(3):
        r = a.t().add(b.t()).mul(h.t())
    ca, cb, ch = a.cpu(), b.cpu(), h.cpu()
    torch.testing.assert_close(r.cpu(), ca.t().add(cb.t()).mul(ch.t()))


def test_more_alias_kinds_than_the_pool_keeps(dev):
    # The pool keeps aliases per kind (dtype, target device) for up to eight kinds; a ninth
    # replaces the least recently used kind. Cycling through nine dtypes stays correct, and a
    # loop over eight kinds is served from the pool once each kind has its aliases.
    from torch_fl import _C

    dtypes = [
        torch.float32,
        torch.float64,
        torch.float16,
        torch.bfloat16,
        torch.int64,
        torch.int32,
        torch.int16,
        torch.int8,
        torch.uint8,
    ]
    cpu = {d: torch.arange(6).to(d) for d in dtypes}
    fl = {d: t.to(dev) for d, t in cpu.items()}
    for _ in range(3):
        for d in dtypes:
            assert torch.equal((fl[d] + fl[d]).cpu(), cpu[d] + cpu[d]), d
    eight = dtypes[:8]
    for d in eight:
        fl[d] + fl[d]
    before = _C.alias_pool_stats()
    for _ in range(3):
        for d in eight:
            fl[d] + fl[d]
    after = _C.alias_pool_stats()
    assert after["builds"] == before["builds"]


def test_long_calls_keep_their_aliases_for_the_next_call(dev):
    # A call holding many aliases (an optimizer's lists, a cat of many parts) takes them from a
    # table keyed by memory, and the same operands in the next call find them there: nothing
    # is built the second time.
    from torch_fl import _C

    parts = [torch.full((3,), float(i), device=dev) for i in range(60)]
    torch.cat(parts)
    before = _C.alias_pool_stats()
    got = torch.cat(parts)
    after = _C.alias_pool_stats()
    assert after["builds"] == before["builds"]
    assert after["hits"] - before["hits"] >= 50
    torch.testing.assert_close(got.cpu(), torch.cat([p.cpu() for p in parts]))


def test_long_calls_over_memory_freed_and_handed_out_again(dev):
    # Lists of new tensors call after call: the allocator hands the freed blocks out again with
    # other sizes and dtypes, and every call sees its own operands' values.
    g = torch.Generator().manual_seed(0)
    dtypes = [torch.float32, torch.float64, torch.int64, torch.float16]
    for step in range(12):
        n = 20 + step * 3
        sizes = torch.randint(1, 9, (n,), generator=g).tolist()
        cpu = [
            torch.randint(0, 100, (k,), generator=g).to(dtypes[(step + i) % len(dtypes)])
            for i, k in enumerate(sizes)
        ]
        got = torch.cat([t.to(dev) for t in cpu])
        assert torch.equal(got.cpu(), torch.cat(cpu)), step


def test_long_calls_with_operands_over_one_storage(dev):
    # Views of one tensor among many parts share one alias storage, as the kernel would see
    # them natively: the values are right, and an out= overlapping its inputs raises CPU's error.
    base_cpu = torch.arange(40.0)
    base = base_cpu.to(dev)
    views = [base[i : i + 2] for i in range(0, 40, 2)]
    others = [torch.full((2,), -float(i), device=dev) for i in range(20)]
    parts = [p for pair in zip(views, others, strict=True) for p in pair]
    want = torch.cat([p.cpu() for p in parts])
    assert torch.equal(torch.cat(parts).cpu(), want)
    with pytest.raises(RuntimeError) as cpu_err:
        torch.cat([base_cpu[i : i + 2] for i in range(0, 40, 2)] * 2, out=base_cpu[:0])
    with pytest.raises(RuntimeError) as fl_err:
        torch.cat(views * 2, out=base[:0])
    assert str(fl_err.value).split("\n")[0] == str(cpu_err.value).split("\n")[0]


def test_a_call_longer_than_the_long_call_table(dev):
    # More operands in one call than the table keeps: it starts over while the call holds its
    # aliases, and the call still sees every operand's own memory.
    parts = [torch.full((1,), float(i), device=dev) for i in range(9000)]
    got = torch.cat(parts)
    assert torch.equal(got.cpu(), torch.arange(9000.0))
    assert torch.equal(torch.cat(parts[::-1]).cpu(), torch.arange(8999.0, -1.0, -1.0))


def test_long_calls_on_several_threads(dev):
    # Each thread has its own pool: concurrent long calls over their own lists stay exact.
    import threading

    errors = []

    def work(k: int) -> None:
        try:
            parts = [torch.full((2,), float(k * 100 + i), device=dev) for i in range(40)]
            want = torch.cat([p.cpu() for p in parts])
            for _ in range(30):
                if not torch.equal(torch.cat(parts).cpu(), want):
                    errors.append(k)
                    return
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
