"""box:cpu results on the sim runtime: fresh host-kernel results are flagos pool memory.

While a box:cpu host kernel runs, its CPU allocations come from the flagos pool of the call's
device, and the router adopts a fresh result without a copy (csrc/boxing/host_results.cpp,
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


def test_retyped_results_are_flagos_tensors_like_any_other(flagos):
    # A fresh result's TensorImpl becomes the flagos tensor itself: its dispatch keys and device
    # are then exactly a new flagos tensor's, on the call's device (not device 0), and it behaves
    # as one under autograd and autocast.
    assert flagos.device_count() >= 2
    for index in (0, 1):
        dev = torch.device("flagos", index)
        fresh = torch.empty(3, device=dev)
        a = torch.arange(3.0, device=dev)
        results = [
            a + 1,
            torch.mm(a.view(3, 1), a.view(1, 3)),
            a.sum(),
            torch.max(a.view(1, 3), 1)[1],
        ]
        for r in results:
            assert r.device == dev
            assert r.untyped_storage().device == dev
            assert torch._C._dispatch_keys(r) == torch._C._dispatch_keys(fresh), r
        w = torch.ones(3, device=dev, requires_grad=True)
        (w * a).sum().backward()
        assert w.grad.device == dev
        assert torch._C._dispatch_keys(w.grad) == torch._C._dispatch_keys(fresh)
        torch.testing.assert_close(w.grad.cpu(), torch.arange(3.0))
        with torch.autocast("flagos", dtype=torch.bfloat16):
            m = torch.mm(a.view(3, 1), a.view(1, 3))
        assert m.dtype == torch.bfloat16 and m.device == dev
