"""Bad input raises the Python exception CUDA would raise, with a message that says what went
wrong, and the process keeps working with its statistics unchanged."""

from __future__ import annotations

import io
import re

import pytest
import torch

pytestmark = [pytest.mark.errors, pytest.mark.usefixtures("flagos")]

MiB = 1 << 20
BAD = 99


def names_device(message: str, index: int) -> bool:
    return (
        re.search(rf"flagos:{index}\b|device\s*[=:#]?\s*{index}\b", message, re.IGNORECASE)
        is not None
    )


def check_recovered(flagos, mem_before, device_before=0):
    """The process works and nothing leaked: same current device, same allocated bytes."""
    assert flagos.current_device() == device_before
    for i in range(flagos.device_count()):
        flagos.synchronize(i)
    after = [flagos.memory_allocated(i) for i in range(flagos.device_count())]
    assert after == mem_before, f"memory_allocated changed: {mem_before} -> {after}"
    for i in range(flagos.device_count()):
        x = torch.arange(4.0, device=f"flagos:{i}")
        assert (x * 2 + x.to("cpu").to(f"flagos:{i}")).cpu().tolist() == [0.0, 3.0, 6.0, 9.0]


@pytest.fixture
def before(flagos, mem_snapshot):
    return mem_snapshot()


# ---------------------------------------------------------------------------------------------
# invalid device indices
# ---------------------------------------------------------------------------------------------

BAD_DEVICE_CALLS = {
    "empty": lambda d: torch.empty(1, device=d),
    "empty_zero_size": lambda d: torch.empty(0, device=d),
    "zeros": lambda d: torch.zeros(3, device=d),
    "randn": lambda d: torch.randn(4, device=d),
    "tensor": lambda d: torch.tensor([1.0, 2.0], device=d),
    "cpu_to": lambda d: torch.ones(3).to(d),
    "flagos_to": lambda d: torch.ones(3, device="flagos").to(d),
}


@pytest.mark.parametrize("index", ["99", "count"])
@pytest.mark.parametrize("call", list(BAD_DEVICE_CALLS))
def test_invalid_device_index(call, index, flagos, before):
    bad = BAD if index == "99" else flagos.device_count()
    with pytest.raises(RuntimeError, match=rf"(?i)ordinal|\b{bad}\b") as info:
        BAD_DEVICE_CALLS[call](f"flagos:{bad}")
    assert str(bad) in str(info.value) or "ordinal" in str(info.value).lower()
    check_recovered(flagos, before)


@pytest.mark.parametrize(
    "call",
    [
        "set_device",
        "device_ctx",
        "accelerator_set_device_index",
        "synchronize",
        "memory_allocated",
        "stream",
    ],
)
def test_invalid_device_in_device_module(call, flagos, before):
    calls = {
        "set_device": lambda: flagos.set_device(BAD),
        "device_ctx": lambda: flagos.device(BAD).__enter__(),
        "accelerator_set_device_index": lambda: torch.accelerator.set_device_index(BAD),
        "synchronize": lambda: flagos.synchronize(BAD),
        "memory_allocated": lambda: flagos.memory_allocated(BAD),
        "stream": lambda: flagos.Stream(device=BAD),
    }
    with pytest.raises(RuntimeError, match=rf"(?i)ordinal|\b{BAD}\b|invalid device"):
        calls[call]()
    check_recovered(flagos, before)


# ---------------------------------------------------------------------------------------------
# tensors on different devices
# ---------------------------------------------------------------------------------------------

SAME_DEVICE = r"(?i)same device"


@pytest.mark.multidevice
@pytest.mark.parametrize("op", ["add", "add_out", "add_", "mul", "cat", "matmul", "where"])
def test_mixed_flagos_devices_raise(op, flagos, two_devices, mem_snapshot):
    a = torch.ones(4, 4, device="flagos:0")
    b = torch.ones(4, 4, device="flagos:1")
    out = torch.empty(4, 4, device="flagos:0")
    before = mem_snapshot()
    ops = {
        "add": lambda: a + b,
        "add_out": lambda: torch.add(a, b, out=out),
        "add_": lambda: a.add_(b),
        "mul": lambda: b * a,
        "cat": lambda: torch.cat([a, b]),
        "matmul": lambda: a @ b,
        "where": lambda: torch.where(a > 0, a, b),
    }
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        ops[op]()
    assert a.cpu().eq(1).all(), "a failed in-place op must not have written its output"
    check_recovered(flagos, before)


@pytest.mark.parametrize("op", ["flagos+cpu", "cpu+flagos", "add_", "cat", "matmul"])
def test_flagos_with_cpu_non_scalar_raises(op, flagos, mem_snapshot):
    f = torch.ones(3, 3, device="flagos")
    c = torch.ones(3, 3)
    before = mem_snapshot()
    ops = {
        "flagos+cpu": lambda: f + c,
        "cpu+flagos": lambda: c + f,
        "add_": lambda: f.add_(c),
        "cat": lambda: torch.cat([f, c]),
        "matmul": lambda: f @ c,
    }
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        ops[op]()
    assert f.cpu().eq(1).all()
    check_recovered(flagos, before)


def test_cpu_zero_dim_scalar_is_allowed(flagos):
    # As on CUDA, a 0-dim CPU tensor is a scalar and may be mixed with device tensors.
    f = torch.arange(3.0, device="flagos")
    s = torch.tensor(2.0)
    r = f * s
    assert r.device == torch.device("flagos", 0)
    assert r.cpu().tolist() == [0.0, 2.0, 4.0]


# ---------------------------------------------------------------------------------------------
# index tensors that do not broadcast together
# ---------------------------------------------------------------------------------------------

INDEX_MISMATCH = {
    "lists": lambda x: x[[0, 1], [0, 1, 2]],
    "tensors": lambda x: x[torch.tensor([0, 1]).to(x.device), torch.tensor([0, 1, 2]).to(x.device)],
    "false_and_list": lambda x: x[False, [0, 1], ...],
}


@pytest.mark.parametrize("case", sorted(INDEX_MISMATCH))
def test_index_tensors_that_do_not_broadcast(case, flagos, before):
    """PyTorch's IndexError naming the indices' shapes, whichever backend serves the index."""

    def message(device: str) -> str:
        with pytest.raises(IndexError) as raised:
            INDEX_MISMATCH[case](torch.ones(3, 3, 4, device=device))
        text = str(raised.value)
        del raised  # its traceback holds the tensor, and this frame holds it: a cycle
        return text

    assert message("flagos") == message("cpu")
    check_recovered(flagos, before)


SUBTRACTIONS = {
    "sub": lambda a, b: a - b,
    "sub_alpha": lambda a, b: torch.sub(a, b, alpha=2),
    "rsub": lambda a, b: torch.rsub(a, b),
    "sub_": lambda a, b: a.clone().sub_(b),
    "sub_scalar": lambda a, b: a - True,
}


@pytest.mark.parametrize("case", sorted(SUBTRACTIONS))
@pytest.mark.parametrize("other", [torch.bool, torch.int32, torch.float32], ids=str)
def test_subtracting_a_bool_raises_pytorchs_error(case, other, flagos, before):
    """A vendor library subtracts bools as integers; PyTorch refuses (its sub_check) and says
    what to use instead: flagos raises the same, never an answer."""

    def outcome(device: str) -> str:
        a = torch.tensor([True, False, True], device=device)
        b = torch.tensor([1, 0, 1], device=device).to(other)
        try:
            r = SUBTRACTIONS[case](b, a) if case == "rsub" else SUBTRACTIONS[case](a, b)
        except RuntimeError as e:
            return str(e).splitlines()[0]
        return f"answered {r.cpu().tolist()}"

    assert outcome("flagos") == outcome("cpu")
    check_recovered(flagos, before)


@pytest.mark.parametrize(
    "dtype", [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64], ids=str
)
def test_silu_of_integers_raises_as_cpu(dtype, flagos, before):
    """silu keeps its input's dtype and its kernels take floating types only: PyTorch raises for
    integers (sigmoid, exp, ... promote them instead). A vendor library computing it in float
    answered where CPU and CUDA raise."""

    def outcome(device: str) -> str:
        try:
            r = torch.nn.functional.silu(torch.tensor([1, 0, 2], device=device).to(dtype))
        except (RuntimeError, NotImplementedError) as e:
            return type(e).__name__
        return f"answered {r.dtype}"

    assert outcome("flagos") == outcome("cpu")
    check_recovered(flagos, before)


# ---------------------------------------------------------------------------------------------
# serialization to a device that does not exist
# ---------------------------------------------------------------------------------------------


@pytest.mark.serialization
@pytest.mark.parametrize("form", ["str", "device", "dict"])
@pytest.mark.parametrize("saved_on", ["cpu", "flagos"])
def test_load_with_bad_map_location(form, saved_on, flagos, before):
    buf = io.BytesIO()
    torch.save({"w": torch.arange(4.0, device=saved_on)}, buf)
    location = {
        "str": f"flagos:{BAD}",
        "device": torch.device("flagos", BAD),
        "dict": {"cpu": f"flagos:{BAD}", "flagos:0": f"flagos:{BAD}"},
    }[form]
    buf.seek(0)
    with pytest.raises(RuntimeError, match=rf"\b{BAD}\b"):
        torch.load(buf, map_location=location)
    check_recovered(flagos, before)


# ---------------------------------------------------------------------------------------------
# out of memory
# ---------------------------------------------------------------------------------------------


@pytest.fixture(params=[0, 1], ids=["dev0", "dev1"])
def dev(request, flagos):
    if request.param >= flagos.device_count():
        request.getfixturevalue("two_devices")
    return request.param


@pytest.mark.memory
def test_allocation_over_capacity_raises_oom(flagos, dev, before):
    _, total = flagos.mem_get_info(dev)
    ooms = flagos.memory_stats(dev).get("num_ooms", 0)
    with pytest.raises(torch.OutOfMemoryError) as info:
        torch.empty(total + (1 << 30), dtype=torch.uint8, device=f"flagos:{dev}")
    message = str(info.value)
    assert "memory" in message.lower()
    assert names_device(message, dev), f"OOM message does not name flagos:{dev}: {message}"
    assert flagos.memory_stats(dev)["num_ooms"] == ooms + 1
    check_recovered(flagos, before)
    # the allocator is still usable for sizable allocations on that device
    t = torch.empty(8 * MiB, dtype=torch.uint8, device=f"flagos:{dev}")
    del t


@pytest.mark.memory
def test_oom_is_a_runtime_error_like_cuda(flagos, before):
    _, total = flagos.mem_get_info()
    with pytest.raises(RuntimeError):
        torch.zeros(total // 4 + (1 << 30), dtype=torch.float32, device="flagos")
    check_recovered(flagos, before)


# ---------------------------------------------------------------------------------------------
# events used wrongly
# ---------------------------------------------------------------------------------------------


@pytest.mark.device
def test_elapsed_time_needs_timing_and_recorded_events(flagos):
    # torch's InlineEvent/CUDAEvent raise ValueError (TORCH_CHECK_VALUE) for both misuses.
    a, b = torch.Event(device="flagos"), torch.Event(device="flagos")
    a.record()
    b.record()
    b.synchronize()
    with pytest.raises(ValueError, match="enable_timing"):
        a.elapsed_time(b)
    c, d = (
        torch.Event(device="flagos", enable_timing=True),
        torch.Event(device="flagos", enable_timing=True),
    )
    c.record()
    with pytest.raises(ValueError, match="recorded"):
        c.elapsed_time(d)
    assert torch.ones(2, device="flagos").sum().item() == 2


# ---------------------------------------------------------------------------------------------
# injected runtime failures (where the vendor declares fault injection: sim)
# ---------------------------------------------------------------------------------------------


def assert_runtime_error_message(
    message: str, call: str, device: int, status: str = "TFL_ERROR_INJECTED"
):
    import torch_fl

    runtime = str(torch_fl._C.runtime_name())
    assert call in message, f"message does not name the runtime call {call!r}: {message}"
    assert runtime in message, f"message does not name the runtime {runtime!r}: {message}"
    assert status in message, f"message does not name the status {status}: {message}"
    assert names_device(message, device), f"message does not name flagos:{device}: {message}"


@pytest.mark.sim_only
@pytest.mark.memory
def test_injected_malloc_failure(flagos, simctl, dev, before):
    flagos.empty_cache()
    live = simctl.live_bytes(dev)
    calls = simctl.call_count("malloc")
    with simctl.fault("malloc"):
        with pytest.raises(RuntimeError) as info:
            torch.empty(MiB, dtype=torch.uint8, device=f"flagos:{dev}")
    assert simctl.call_count("malloc") > calls, "the allocation never reached the runtime"
    assert not isinstance(info.value, torch.OutOfMemoryError), "an injected failure is not an OOM"
    assert_runtime_error_message(str(info.value), "malloc", dev)
    assert simctl.live_bytes(dev) == live
    check_recovered(flagos, before)
    t = torch.empty(MiB, dtype=torch.uint8, device=f"flagos:{dev}")
    del t


@pytest.mark.sim_only
@pytest.mark.memory
def test_injected_free_failure_in_empty_cache_keeps_the_segment_cached(flagos, simctl, dev):
    flagos.empty_cache()
    t = torch.empty(4 * MiB, dtype=torch.uint8, device=f"flagos:{dev}")
    del t
    reserved = flagos.memory_reserved(dev)
    assert reserved >= 4 * MiB
    with simctl.fault("free"):
        with pytest.raises(RuntimeError) as info:
            flagos.empty_cache()
    assert_runtime_error_message(str(info.value), "free", dev)
    # Nothing was lost: the segment is still cached and counted, and the next flush frees it.
    assert flagos.memory_reserved(dev) == reserved
    assert simctl.live_bytes(dev) == reserved
    flagos.empty_cache()
    assert flagos.memory_reserved(dev) == 0
    assert simctl.live_bytes(dev) == 0


@pytest.mark.sim_only
@pytest.mark.memory
def test_injected_malloc_failure_with_device_status(flagos, simctl, before):
    flagos.empty_cache()
    with simctl.fault("malloc", status="TFL_ERROR_DEVICE"):
        with pytest.raises(RuntimeError) as info:
            torch.zeros(3 * MiB, dtype=torch.uint8, device="flagos")
    assert_runtime_error_message(str(info.value), "malloc", 0, status="TFL_ERROR_DEVICE")
    check_recovered(flagos, before)


@pytest.mark.sim_only
@pytest.mark.memory
def test_injected_second_malloc_failure_keeps_the_first(flagos, simctl, before):
    flagos.empty_cache()
    with simctl.fault("malloc", nth=2):
        a = torch.full((3 * MiB,), 7, dtype=torch.uint8, device="flagos")
        with pytest.raises(RuntimeError, match="malloc"):
            torch.empty(5 * MiB, dtype=torch.uint8, device="flagos")
    assert a.cpu().eq(7).all()
    del a
    check_recovered(flagos, before)


@pytest.mark.sim_only
@pytest.mark.copy
def test_injected_h2d_memcpy_failure(flagos, simctl, dev, before):
    src = torch.arange(1 << 16, dtype=torch.float32)
    dst = torch.zeros(1 << 16, dtype=torch.float32, device=f"flagos:{dev}")
    mem = [flagos.memory_allocated(i) for i in range(flagos.device_count())]
    with simctl.fault("memcpy_async"):
        with pytest.raises(RuntimeError) as info:
            dst.copy_(src)
    assert_runtime_error_message(str(info.value), "memcpy_async", dev)
    assert dst.cpu().eq(0).all(), "a failed copy must leave the destination unchanged"
    with simctl.fault("memcpy_async"):
        with pytest.raises(RuntimeError, match="memcpy_async"):
            src.to(f"flagos:{dev}")
    # the tensor the failed .to() allocated was released
    assert [flagos.memory_allocated(i) for i in range(flagos.device_count())] == mem
    del dst
    check_recovered(flagos, before)
    assert torch.equal(src.to(f"flagos:{dev}").cpu(), src)


@pytest.mark.sim_only
@pytest.mark.copy
def test_injected_d2h_memcpy_failure(flagos, simctl, before):
    f = torch.arange(1000, dtype=torch.int64, device="flagos")
    dst = torch.full((1000,), -1, dtype=torch.int64)
    with simctl.fault("memcpy_async"):
        with pytest.raises(RuntimeError) as info:
            dst.copy_(f)
    assert_runtime_error_message(str(info.value), "memcpy_async", 0)
    assert dst.eq(-1).all()
    assert f.cpu().tolist() == list(range(1000))
    del f
    check_recovered(flagos, before)


@pytest.mark.sim_only
@pytest.mark.device
def test_injected_synchronize_failure(flagos, simctl, before):
    with simctl.fault("device_synchronize"):
        with pytest.raises(RuntimeError) as info:
            flagos.synchronize()
    assert_runtime_error_message(str(info.value), "device_synchronize", 0)
    check_recovered(flagos, before)
