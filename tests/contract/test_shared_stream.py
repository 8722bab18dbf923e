"""Several threads share one device's streams: as on CUDA, stream order is the only ordering the
program needs. Each thread makes tensors, queues asynchronous copies out of them, frees them and
synchronizes; a synchronized read must always show that thread's own values, whatever the other
threads allocated, wrote or freed meanwhile (a freed block is reused only behind the work queued on
it)."""

from __future__ import annotations

import threading
import time

import pytest
import torch

pytestmark = [pytest.mark.threads, pytest.mark.usefixtures("flagos")]

N_THREADS = 4
SECONDS = 1.5  # per program; the whole file runs for about 8 s
NUMEL = 4096  # 16 KiB of float32: small-pool blocks, reused call after call


def _hammer(program, n_threads=N_THREADS, seconds=SECONDS):
    """Runs program(tid, iteration) in n_threads threads until `seconds` pass; the first error
    (a wrong value read back) fails the test with what was read."""
    errors: list[BaseException] = []
    counts = [0] * n_threads
    stop = time.monotonic() + seconds
    barrier = threading.Barrier(n_threads)

    def worker(tid):
        try:
            barrier.wait(timeout=30)
            i = 0
            while time.monotonic() < stop and not errors:
                program(tid, i)
                i += 1
            counts[tid] = i
        except BaseException as exc:  # noqa: BLE001 - reported to the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=seconds + 60)
    assert not [t for t in threads if t.is_alive()], "threads still running (deadlock?)"
    if errors:
        raise errors[0]
    assert all(c > 0 for c in counts), f"a thread never ran: {counts}"
    return counts


def _check(host: torch.Tensor, value: float, what: str) -> None:
    if not bool((host == value).all()):
        wrong = (host != value).nonzero().reshape(-1)
        raise AssertionError(
            f"{what}: {wrong.numel()} of {host.numel()} elements read {host[wrong[0]].item()} "
            f"(first at {int(wrong[0])}), expected {value}"
        )


def _pinned(flagos, n_threads=N_THREADS):
    return [torch.empty(NUMEL).pin_memory() for _ in range(n_threads)]


def test_factory_copy_free(flagos):
    """The program a user wrote: y = full(); host.copy_(y, non_blocking); del y; synchronize."""
    hosts = _pinned(flagos)

    def program(tid, i):
        value = float(tid * 100000 + i)
        y = torch.full((NUMEL,), value, device="flagos")
        hosts[tid].copy_(y, non_blocking=True)
        del y
        flagos.synchronize()
        _check(hosts[tid], value, "full -> non_blocking D2H -> free")

    _hammer(program)


def test_computed_copy_free(flagos):
    """Results of routed kernels (fresh outputs of every kind) freed behind queued copies."""
    hosts = _pinned(flagos)
    ones = torch.ones(NUMEL, device="flagos")

    def program(tid, i):
        value = float(tid * 1000 + i % 1000)
        y = ones * value  # a routed kernel's fresh result
        z = y + 0.0
        hosts[tid].copy_(z, non_blocking=True)
        del y, z
        w = torch.empty(NUMEL, device="flagos").fill_(-1.0)  # reuses what was freed
        del w
        flagos.synchronize()
        _check(hosts[tid], value, "mul/add -> non_blocking D2H -> free")

    _hammer(program)


def test_device_copy_free(flagos):
    """A queued device-to-device copy reads a block its thread frees at once."""
    hosts = _pinned(flagos)
    dsts = [torch.empty(NUMEL, device="flagos") for _ in range(N_THREADS)]

    def program(tid, i):
        value = float(tid + 10 * (i % 97))
        y = torch.full((NUMEL,), value, device="flagos")
        dsts[tid].copy_(y, non_blocking=True)
        del y
        torch.full((NUMEL,), -2.0, device="flagos")  # a fresh block written by a kernel
        hosts[tid].copy_(dsts[tid], non_blocking=True)
        flagos.synchronize()
        _check(hosts[tid], value, "full -> D2D -> free")

    _hammer(program)


def test_side_streams_record_stream(flagos):
    """Work made on a side stream, consumed on the shared default stream, kept by record_stream."""
    hosts = _pinned(flagos)
    sides = [flagos.Stream() for _ in range(N_THREADS)]
    default = flagos.default_stream()

    def program(tid, i):
        value = float(tid * 7 + i % 13)
        with flagos.stream(sides[tid]):
            y = torch.full((NUMEL,), value, device="flagos")
        default.wait_stream(sides[tid])
        y.record_stream(default)
        hosts[tid].copy_(y, non_blocking=True)
        del y
        with flagos.stream(sides[tid]):
            torch.full((NUMEL,), -3.0, device="flagos")
        flagos.synchronize()
        _check(hosts[tid], value, "side stream -> record_stream -> D2H")

    _hammer(program)


def test_upload_compute_download(flagos):
    """Pageable and pinned uploads, a routed kernel, a download: every read is the thread's own."""
    hosts = _pinned(flagos)

    def program(tid, i):
        value = float(tid * 3 + i % 11)
        src = torch.full((NUMEL,), value)
        x = src.to("flagos", non_blocking=bool(i % 2))
        y = x.neg()
        del x
        hosts[tid].copy_(y, non_blocking=True)
        del y
        torch.zeros(NUMEL, device="flagos").add_(-4.0)
        flagos.synchronize()
        _check(hosts[tid], -value, "H2D -> neg -> D2H")

    _hammer(program)
