"""Core's caching device allocator and pinned host allocator, against the built-in sim runtime.

These pin down allocator internals the vendor contract suite (tests/contract/test_memory.py) does
not: exact statistics (aggregate vs small/large pool, inactive splits, runtime call counters), the
OOM flush-and-retry path, per-stream pools, recordStream deferral and pinned block reuse. Fault
injection uses the sim runtime's test controls (torch_fl.runtimes.sim), so every test here needs
the sim runtime; each test starts from an empty cache on device 0.
"""

from __future__ import annotations

import gc
import threading

import pytest
import torch

MiB = 1 << 20
SEGMENT = 2 * MiB  # small-pool segment size; large segments round up to it


@pytest.fixture
def sim(flagos):
    from torch_fl.runtimes import sim

    sim.clear_faults()
    # Tensors of earlier tests caught in reference cycles would otherwise pin
    # a segment until the next garbage collection.
    gc.collect()
    flagos.synchronize(0)
    flagos.empty_cache()
    # What is still reserved now belongs to tensors other tests keep alive; tests compare to it.
    sim.baseline_reserved = flagos.memory_stats(0)["reserved_bytes.all.current"]
    sim.baseline_live = sim.live_bytes(0)
    yield sim
    sim.clear_faults()


def stats(flagos, dev: int = 0) -> dict[str, int]:
    return dict(flagos.memory_stats(dev))


def empty(nbytes: int, dev: int = 0) -> torch.Tensor:
    return torch.empty(nbytes, dtype=torch.uint8, device=f"flagos:{dev}")


def test_allocation_raises_allocated_bytes_and_del_lowers_it(flagos, sim):
    before = stats(flagos)
    t = empty(1000)
    during = stats(flagos)
    # 1000 bytes round up to 512-byte granularity; the caller's request is kept as requested_bytes.
    assert during["allocated_bytes.all.current"] == before["allocated_bytes.all.current"] + 1024
    assert during["requested_bytes.all.current"] == before["requested_bytes.all.current"] + 1000
    assert during["allocation.all.current"] == before["allocation.all.current"] + 1
    assert during["active_bytes.all.current"] == before["active_bytes.all.current"] + 1024
    assert flagos.memory_allocated(0) == during["allocated_bytes.all.current"]
    del t
    after = stats(flagos)
    for key in ("allocated_bytes", "requested_bytes", "allocation", "active", "active_bytes"):
        assert after[f"{key}.all.current"] == before[f"{key}.all.current"], key
    assert after["allocated_bytes.all.freed"] == before["allocated_bytes.all.freed"] + 1024


def test_aggregate_is_the_sum_of_small_and_large_pools(flagos, sim):
    small = empty(4096)
    large = empty(3 * MiB)
    s = stats(flagos)
    assert s["segment.small_pool.current"] >= 1 and s["segment.large_pool.current"] >= 1
    assert s["allocated_bytes.large_pool.current"] >= 3 * MiB
    for name in (
        "allocation",
        "segment",
        "active",
        "inactive_split",
        "allocated_bytes",
        "reserved_bytes",
        "active_bytes",
        "inactive_split_bytes",
        "requested_bytes",
    ):
        for field in ("current", "peak", "allocated", "freed"):
            if field == "peak":
                continue  # pool peaks need not coincide in time
            assert s[f"{name}.all.{field}"] == (
                s[f"{name}.small_pool.{field}"] + s[f"{name}.large_pool.{field}"]
            ), f"{name}.{field}"
    del small, large


def test_small_blocks_share_one_segment_and_splits_are_counted(flagos, sim):
    before = stats(flagos)
    a = empty(4096)
    b = empty(4096)
    s = stats(flagos)
    assert s["num_device_alloc"] == before["num_device_alloc"] + 1, "two small blocks, one malloc"
    assert s["reserved_bytes.all.current"] == before["reserved_bytes.all.current"] + SEGMENT
    assert b.data_ptr() == a.data_ptr() + 4096
    split0 = before["inactive_split.all.current"]
    split_bytes0 = before["inactive_split_bytes.all.current"]
    # The rest of the segment is one inactive split block.
    assert s["inactive_split.all.current"] == split0 + 1
    assert s["inactive_split_bytes.all.current"] == split_bytes0 + SEGMENT - 2 * 4096
    del a  # a free block between a segment start and b: a second inactive split block
    s = stats(flagos)
    assert s["inactive_split.all.current"] == split0 + 2
    assert s["inactive_split_bytes.all.current"] == split_bytes0 + SEGMENT - 4096
    del b  # everything merges back into one unsplit segment
    s = stats(flagos)
    assert s["inactive_split.all.current"] == split0
    assert s["inactive_split_bytes.all.current"] == split_bytes0
    assert s["segment.all.current"] == before["segment.all.current"] + 1


def test_large_segments_round_to_2mib(flagos, sim):
    before = stats(flagos)
    t = empty(3 * MiB + 1)
    s = stats(flagos)
    assert s["segment.large_pool.current"] == before["segment.large_pool.current"] + 1
    assert (
        s["reserved_bytes.large_pool.current"]
        == before["reserved_bytes.large_pool.current"] + 4 * MiB
    )
    del t


def test_cached_block_is_reused_without_runtime_malloc(flagos, sim):
    for nbytes in (4096, 5 * MiB):
        t = empty(nbytes)
        ptr = t.data_ptr()
        del t
        before = stats(flagos)
        mallocs = sim.call_count("malloc")
        for _ in range(5):
            t = empty(nbytes)
            assert t.data_ptr() == ptr, "best fit should hand back the cached block"
            del t
        after = stats(flagos)
        assert after["num_device_alloc"] == before["num_device_alloc"]
        assert sim.call_count("malloc") == mallocs
        assert after["reserved_bytes.all.current"] == before["reserved_bytes.all.current"]


def test_empty_cache_lowers_reserved_bytes(flagos, sim):
    t = empty(5 * MiB)
    keep = empty(4096)
    del t
    before = stats(flagos)
    assert before["reserved_bytes.all.current"] == sim.baseline_reserved + 6 * MiB + SEGMENT
    live = sim.live_bytes(0)
    flagos.empty_cache()
    after = stats(flagos)
    # The unused 6 MiB segment goes back to the runtime; keep's segment stays.
    assert after["reserved_bytes.all.current"] == before["reserved_bytes.all.current"] - 6 * MiB
    assert after["num_device_free"] == before["num_device_free"] + 1
    assert sim.live_bytes(0) == live - 6 * MiB
    assert after["allocated_bytes.all.current"] == before["allocated_bytes.all.current"]
    del keep
    flagos.empty_cache()
    assert stats(flagos)["reserved_bytes.all.current"] == sim.baseline_reserved


def test_zero_size_allocation_has_no_memory_and_the_right_device(flagos, sim):
    before = stats(flagos)
    t = torch.empty(0, device="flagos:1" if flagos.device_count() > 1 else "flagos:0")
    assert t.untyped_storage().data_ptr() == 0
    assert t.device.type == "flagos"
    del t
    assert stats(flagos)["num_device_alloc"] == before["num_device_alloc"]


def test_oom_raises_with_the_request_and_leaves_stats_consistent(flagos, sim):
    keep = empty(4096)
    cached = empty(5 * MiB)
    del cached  # a cached segment the OOM path must flush
    _, total = flagos.mem_get_info(0)
    before = stats(flagos)
    # Runtime memory outside the pool (a block an earlier test sent to another process, which
    # the sender keeps until the receiver opens it, as CUDA's IPC does) stays as it was.
    outside = sim.live_bytes(0) - before["reserved_bytes.all.current"]
    nbytes = total + 3 * MiB
    with pytest.raises(torch.OutOfMemoryError) as info:
        empty(nbytes)
    msg = str(info.value)
    assert "flagos out of memory" in msg
    assert str(nbytes) in msg, msg
    assert "flagos:0" in msg and "'sim'" in msg
    after = stats(flagos)
    assert after["num_ooms"] == before["num_ooms"] + 1
    assert after["num_alloc_retries"] == before["num_alloc_retries"] + 1
    for key in ("allocated_bytes", "requested_bytes", "allocation", "active_bytes", "active"):
        assert after[f"{key}.all.current"] == before[f"{key}.all.current"], key
    # The retry flushed the cached 6 MiB segment, and the runtime agrees with the books.
    assert after["reserved_bytes.all.current"] == before["reserved_bytes.all.current"] - 6 * MiB
    assert sim.live_bytes(0) == after["reserved_bytes.all.current"] + outside
    # Still usable afterwards.
    t = empty(MiB)
    assert flagos.memory_allocated(0) == after["allocated_bytes.all.current"] + MiB
    del t, keep


def test_transient_oom_is_retried_after_flushing_the_cache(flagos, sim):
    cached = empty(8 * MiB)
    del cached
    before = stats(flagos)
    sim.inject_fault("malloc", 1, "TFL_ERROR_OUT_OF_MEMORY")
    t = empty(9 * MiB)  # no cached fit: malloc fails once, cache is flushed, retry succeeds
    after = stats(flagos)
    assert after["num_alloc_retries"] == before["num_alloc_retries"] + 1
    assert after["num_ooms"] == before["num_ooms"]
    assert after["num_device_free"] == before["num_device_free"] + 1  # the flushed 8 MiB segment
    assert (
        after["reserved_bytes.all.current"]
        == before["reserved_bytes.all.current"] - 8 * MiB + 10 * MiB
    )
    del t


def test_other_malloc_failures_raise_runtime_error_and_keep_stats(flagos, sim):
    before = stats(flagos)
    sim.inject_fault("malloc", 1, "TFL_ERROR_DEVICE")
    with pytest.raises(RuntimeError, match="malloc") as info:
        empty(5 * MiB)
    assert not isinstance(info.value, torch.OutOfMemoryError)
    after = stats(flagos)
    for key in ("allocated_bytes", "reserved_bytes", "segment", "allocation", "active"):
        assert after[f"{key}.all.current"] == before[f"{key}.all.current"], key
    assert after["num_ooms"] == before["num_ooms"]


def test_blocks_are_cached_per_stream(flagos, sim):
    side = flagos.Stream(device=0)
    before = stats(flagos)
    with flagos.stream(side):
        t = empty(4096)
        side_ptr = t.data_ptr()
        del t
    t = empty(4096)  # default stream: the side stream's cached segment is not a candidate
    assert stats(flagos)["num_device_alloc"] == before["num_device_alloc"] + 2
    del t
    with flagos.stream(side):
        t = empty(4096)
        assert t.data_ptr() == side_ptr
        del t
    assert stats(flagos)["num_device_alloc"] == before["num_device_alloc"] + 2
    side.synchronize()


def test_record_stream_defers_reuse_until_the_stream_event_completes(flagos, sim):
    side = flagos.Stream(device=0)
    before = stats(flagos)
    t = empty(4096)
    ptr = t.data_ptr()
    t.record_stream(side)
    # The event recorded on `side` at free time reports "not ready" once.
    sim.inject_fault("event_query", 1, "TFL_ERROR_NOT_READY")
    del t
    s = stats(flagos)
    # As on CUDA: allocated drops at del, the block stays active until `side` is done with it.
    assert s["allocated_bytes.all.current"] == before["allocated_bytes.all.current"]
    assert s["active_bytes.all.current"] == before["active_bytes.all.current"] + 4096
    other = empty(4096)  # polls the event (not ready): the block must not be handed out
    assert other.data_ptr() != ptr
    assert stats(flagos)["active_bytes.all.current"] == before["active_bytes.all.current"] + 8192
    del other
    side.synchronize()  # the recorded event has really completed now
    mallocs = stats(flagos)["num_device_alloc"]
    third = empty(4096)  # polls again (ready): the deferred block is back in the pool
    s = stats(flagos)
    assert s["active_bytes.all.current"] == before["active_bytes.all.current"] + 4096
    assert s["num_device_alloc"] == mallocs
    del third
    s = stats(flagos)
    assert s["active_bytes.all.current"] == before["active_bytes.all.current"]
    assert s["inactive_split.all.current"] == before["inactive_split.all.current"]


def test_empty_cache_waits_for_deferred_frees(flagos, sim):
    side = flagos.Stream(device=0)
    before_active = stats(flagos)["active_bytes.all.current"]
    t = empty(5 * MiB)
    t.record_stream(side)
    sim.inject_fault("event_query", 1, "TFL_ERROR_NOT_READY")
    del t
    flagos.empty_cache()  # synchronizes the pending event, then frees the segment
    s = stats(flagos)
    assert s["reserved_bytes.all.current"] == sim.baseline_reserved
    assert s["active_bytes.all.current"] == before_active
    assert sim.live_bytes(0) == sim.baseline_live


def test_peak_and_accumulated_resets(flagos, sim):
    t = empty(5 * MiB)
    del t
    flagos.reset_peak_memory_stats(0)
    s = stats(flagos)
    assert s["allocated_bytes.all.peak"] == s["allocated_bytes.all.current"]
    flagos.reset_accumulated_memory_stats(0)
    s = stats(flagos)
    assert s["allocated_bytes.all.allocated"] == 0 and s["allocated_bytes.all.freed"] == 0
    assert s["num_device_alloc"] == 0 and s["num_device_free"] == 0
    assert s["num_alloc_retries"] == 0 and s["num_ooms"] == 0


def test_copy_on_write_materialization_copies_device_bytes(flagos, sim):
    # Materializing a lazy (COW) clone goes through Allocator::clone, i.e. copy_data.
    src = torch.arange(1000, dtype=torch.int32).to("flagos:0")
    lazy = torch._lazy_clone(src)
    lazy[:1].fill_(-1)  # the first write materializes a private copy of the storage
    assert lazy.data_ptr() != src.data_ptr()
    expected = torch.arange(1000, dtype=torch.int32)
    assert torch.equal(src.cpu(), expected)
    expected[0] = -1
    assert torch.equal(lazy.cpu(), expected)


def test_concurrent_allocations_balance(flagos, sim):
    before = stats(flagos)
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            sizes = [512 * (1 + (seed * 7 + i * 13) % 64) for i in range(200)]
            live = []
            for i, n in enumerate(sizes):
                live.append(empty(n))
                if i % 3 == 0:
                    live.pop(0)
            live.clear()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    after = stats(flagos)
    for key in ("allocated_bytes", "allocation", "active", "active_bytes", "requested_bytes"):
        assert after[f"{key}.all.current"] == before[f"{key}.all.current"], key
    flagos.empty_cache()
    assert stats(flagos)["reserved_bytes.all.current"] == sim.baseline_reserved
    assert sim.live_bytes(0) == sim.baseline_live


# ---- pinned host memory ----------------------------------------------------------------------


def host_stats() -> dict[str, int]:
    import torch_fl

    return dict(torch_fl._C.host_memory_stats())


def host_empty_cache() -> None:
    import torch_fl

    torch_fl._C.host_empty_cache()


def test_pinned_memory_is_pinned_and_cached(flagos, sim):
    host_empty_cache()
    before = host_stats()
    live_before = sim.live_bytes(-1)
    x = torch.empty(3000, dtype=torch.uint8).pin_memory()
    assert x.is_pinned() and x[100:].is_pinned()
    assert not torch.empty(3000, dtype=torch.uint8).is_pinned()
    ptr = x.data_ptr()
    s = host_stats()
    assert s["num_host_alloc"] == before["num_host_alloc"] + 1
    assert s["active_bytes.current"] == before["active_bytes.current"] + 4096  # power of two
    del x
    assert host_stats()["active_requests.current"] == before["active_requests.current"]
    y = torch.empty(4000, dtype=torch.uint8).pin_memory()  # same 4 KiB bucket: reused
    assert y.data_ptr() == ptr
    assert host_stats()["num_host_alloc"] == before["num_host_alloc"] + 1
    del y
    host_empty_cache()
    s = host_stats()
    assert s["allocated_bytes.current"] == before["allocated_bytes.current"]
    assert s["num_host_free"] == before["num_host_free"] + 1
    assert sim.live_bytes(-1) == live_before


def test_pinned_block_waits_for_async_copies(flagos, sim):
    if torch.cuda.is_available():
        pytest.skip("CUDA is present in this process and owns Tensor.pin_memory() (vendor 'sim')")
    host_empty_cache()
    live_before = sim.live_bytes(-1)
    x = torch.arange(1024, dtype=torch.float32).pin_memory()
    ptr = x.data_ptr()
    d = x.to("flagos:0", non_blocking=True)  # records an event on the copy's stream
    flagos.synchronize(0)
    sim.inject_fault("event_query", 1, "TFL_ERROR_NOT_READY")
    del x
    y = torch.empty(1024, dtype=torch.float32).pin_memory()  # event "not ready": no reuse
    assert y.data_ptr() != ptr
    del y
    # The sim records x's event on its stream worker thread: wait for it, so
    # "done" below is real and not a race with that thread (CI flaked on it).
    flagos.synchronize(0)
    mallocs = host_stats()["num_host_alloc"]
    # Event done now: both cached blocks (x's and y's) serve new requests, no new host_malloc.
    z1 = torch.empty(1024, dtype=torch.float32).pin_memory()
    z2 = torch.empty(1024, dtype=torch.float32).pin_memory()
    assert ptr in (z1.data_ptr(), z2.data_ptr())
    assert host_stats()["num_host_alloc"] == mallocs
    del z1, z2
    assert torch.equal(d.cpu(), torch.arange(1024, dtype=torch.float32))
    del d
    host_empty_cache()
    assert sim.live_bytes(-1) == live_before
