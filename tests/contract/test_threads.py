"""Several threads allocate, copy in every direction, compute and free on every device and on
their own streams at once; results are right and the statistics balance afterwards."""

from __future__ import annotations

import threading
import time

import pytest
import torch

pytestmark = [pytest.mark.threads, pytest.mark.usefixtures("flagos")]

N_THREADS = 8
ITERATIONS = 100
TIME_LIMIT_S = 20.0


def _run_threads(target, n=N_THREADS):
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def wrapper(i):
        try:
            barrier.wait(timeout=TIME_LIMIT_S)
            target(i)
        except BaseException as exc:  # noqa: BLE001 - reported to the main thread
            errors.append(exc)

    threads = [threading.Thread(target=wrapper, args=(i,), daemon=True) for i in range(n)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(0.1, TIME_LIMIT_S - (time.monotonic() - start)))
    hung = [t.name for t in threads if t.is_alive()]
    assert not hung, f"threads still running after {TIME_LIMIT_S}s (deadlock?): {hung}"
    if errors:
        raise errors[0]


def test_concurrent_alloc_copy_compute_free(flagos, mem_snapshot, tol):
    f32_tol = tol(torch.float32)
    n_dev = flagos.device_count()
    flagos.synchronize()
    before = mem_snapshot()

    def work(tid):
        g = torch.Generator().manual_seed(tid)
        side = [flagos.Stream(device=d) for d in range(n_dev)]
        for it in range(ITERATIONS):
            dev = (tid + it) % n_dev
            peer = (dev + 1) % n_dev
            use_side = it % 3 == 0
            x_cpu = torch.randn(96, 80, generator=g)
            with flagos.device(dev):
                ctx = flagos.stream(side[dev]) if use_side else _null()
                with ctx:
                    x = x_cpu.to(f"flagos:{dev}")  # H2D
                    y = torch.empty_like(x).copy_(x)  # D2D
                    z = y.t().contiguous()  # strided D2D
                    p = z.to(f"flagos:{peer}")  # peer
                    w = (p * 2 + 1).sum(dim=0)  # op on the peer device
                    big = torch.empty(((tid + it) % 5 + 1) * 4096, device=f"flagos:{dev}")
                    big.fill_(float(tid))
                    back = w.cpu()  # D2H
                    b0 = big[0].item()
                    del x, y, z, p, w, big
                if use_side:
                    side[dev].synchronize()
            assert flagos.current_device() == 0, (
                "device context did not restore this thread's device"
            )
            torch.testing.assert_close(back, (x_cpu.t() * 2 + 1).sum(dim=0), **f32_tol)
            assert b0 == float(tid)

    _run_threads(work)
    for d in range(n_dev):
        flagos.synchronize(d)
    assert mem_snapshot() == before, "memory_allocated did not return to its starting value"


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_current_device_is_per_thread(flagos, two_devices):
    flagos.set_device(0)
    seen = {}
    ready, release = threading.Event(), threading.Event()

    def other():
        flagos.set_device(1)
        ready.set()
        release.wait(timeout=5)
        seen["other"] = flagos.current_device()
        seen["other_tensor"] = torch.empty(1, device="flagos").device

    t = threading.Thread(target=other)
    t.start()
    assert ready.wait(timeout=5)
    seen["main"] = flagos.current_device()
    seen["main_tensor"] = torch.empty(1, device="flagos").device
    release.set()
    t.join(timeout=5)
    assert seen == {
        "main": 0,
        "main_tensor": torch.device("flagos", 0),
        "other": 1,
        "other_tensor": torch.device("flagos", 1),
    }


def test_current_stream_is_per_thread(flagos):
    default = flagos.current_stream()
    seen = {}
    ready, release = threading.Event(), threading.Event()

    def other():
        s = flagos.Stream()
        with flagos.stream(s):
            ready.set()
            release.wait(timeout=5)
            seen["other"] = flagos.current_stream().stream_id == s.stream_id

    t = threading.Thread(target=other)
    t.start()
    assert ready.wait(timeout=5)
    seen["main"] = flagos.current_stream().stream_id == default.stream_id
    release.set()
    t.join(timeout=5)
    assert seen == {"main": True, "other": True}


def test_one_tensor_read_by_many_threads(flagos):
    """Ops must not relabel the caller's tensor (they work on alias views): concurrent readers of one
    flagos tensor all see its values and its device."""
    src = torch.arange(4096, dtype=torch.float32)
    shared = src.to("flagos")
    expected = (src * 3).sum().item()

    def reader(_tid):
        for _ in range(20):
            assert shared.device == torch.device("flagos", 0)
            r = (shared * 3).sum().item()
            assert r == expected, r

    _run_threads(reader)
    assert shared.device == torch.device("flagos", 0)
    assert torch.equal(shared.cpu(), src)
