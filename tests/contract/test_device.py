"""Devices, the current device, factories honouring device indices, torch.accelerator, streams
and events of the flagos device."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

pytestmark = [pytest.mark.device, pytest.mark.usefixtures("flagos")]

D0 = torch.device("flagos", 0)
D1 = torch.device("flagos", 1)
MiB = 1 << 20


def same_stream(a, b) -> bool:
    def key(s):
        return (s.device_type, s.device_index, s.stream_id)

    return key(a) == key(b)


# ---------------------------------------------------------------------------------------------
# device module basics
# ---------------------------------------------------------------------------------------------


def test_backend_is_named_flagos(flagos):
    assert torch._C._get_privateuse1_backend_name() == "flagos"
    assert torch.device("flagos").type == "flagos"
    assert flagos is torch.flagos
    assert flagos.is_available() is True
    assert isinstance(flagos.device_count(), int) and flagos.device_count() >= 1


def test_import_torch_alone_brings_up_flagos():
    # The torch.backends entry point autoloads torch_fl: user code never imports it.
    code = (
        "import torch\n"
        "x = torch.arange(4, device='flagos')\n"
        "print(x.device, torch.flagos.device_count(), x.cpu().tolist())\n"
    )
    env = dict(os.environ)
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert out.returncode == 0, out.stderr[-3000:]
    dev, count, values = out.stdout.split(" ", 2)
    assert dev == "flagos:0"
    assert int(count) == torch.flagos.device_count()
    assert values.strip() == "[0, 1, 2, 3]"


def test_current_device_starts_at_zero_and_set_device(flagos):
    assert flagos.current_device() == 0
    last = flagos.device_count() - 1
    flagos.set_device(last)
    assert flagos.current_device() == last
    assert torch.empty(2, device="flagos").device == torch.device("flagos", last)
    flagos.set_device(0)
    assert flagos.current_device() == 0


def test_set_device_accepts_device_objects_and_strings(flagos, two_devices):
    flagos.set_device(torch.device("flagos", 1))
    assert flagos.current_device() == 1
    flagos.set_device("flagos:0")
    assert flagos.current_device() == 0


def test_device_context_manager_sets_and_restores(flagos, two_devices):
    assert flagos.current_device() == 0
    with flagos.device(1):
        assert flagos.current_device() == 1
        with flagos.device(0):
            assert flagos.current_device() == 0
        assert flagos.current_device() == 1
    assert flagos.current_device() == 0
    with flagos.device(D1):
        assert flagos.current_device() == 1
    assert flagos.current_device() == 0


def test_device_context_restores_after_exception(flagos, two_devices):
    with pytest.raises(ZeroDivisionError):
        with flagos.device(1):
            1 / 0  # noqa: B018
    assert flagos.current_device() == 0


def test_compiled_code_device_guard_sets_restores_and_rejects(flagos, two_devices):
    """The guard and setter Inductor's wrapper emits behave as ``device``/``set_device``."""
    with flagos._DeviceGuard(1):
        assert flagos.current_device() == 1
        with flagos._DeviceGuard(0):
            assert flagos.current_device() == 0
        with flagos._DeviceGuard(1):
            flagos._set_device_index(1)
        assert flagos.current_device() == 1
    assert flagos.current_device() == 0
    with pytest.raises(ZeroDivisionError):
        with flagos._DeviceGuard(1):
            1 / 0  # noqa: B018
    assert flagos.current_device() == 0
    bad = flagos.device_count()
    with pytest.raises(RuntimeError, match=f"flagos: invalid device ordinal {bad}"):
        with flagos._DeviceGuard(bad):
            pass
    with pytest.raises(RuntimeError, match=f"invalid device ordinal {bad}"):
        flagos._set_device_index(bad)
    assert flagos.current_device() == 0


def test_tensor_method_and_property_generated(flagos, two_devices):
    x = torch.arange(3).flagos(1)
    assert x.device == D1 and x.is_flagos
    assert x.untyped_storage().device == D1
    assert not torch.ones(1).is_flagos
    assert x.cpu().tolist() == [0, 1, 2]


# ---------------------------------------------------------------------------------------------
# factories honour the explicit index and the current device
# ---------------------------------------------------------------------------------------------


def _check_randn(t):
    c = t.cpu()
    assert c.dtype == torch.float32 and torch.isfinite(c).all() and c.std() > 0


def _check_rand(t):
    c = t.cpu()
    assert ((c >= 0) & (c < 1)).all() and c.std() > 0


def _check_randint(t):
    c = t.cpu()
    assert c.dtype == torch.int64 and c.min() >= 3 and c.max() < 7 and c.min() < c.max()


# name -> (make(device), check(tensor) or expected CPU tensor)
FACTORIES = {
    "empty": (lambda d: torch.empty(3, 4, device=d), None),
    "empty_strided": (lambda d: torch.empty_strided((3, 4), (1, 3), device=d), None),
    "zeros": (lambda d: torch.zeros(3, 4, device=d), torch.zeros(3, 4)),
    "ones": (
        lambda d: torch.ones(2, 5, dtype=torch.int32, device=d),
        torch.ones(2, 5, dtype=torch.int32),
    ),
    "full": (lambda d: torch.full((3, 2), 2.5, device=d), torch.full((3, 2), 2.5)),
    "arange": (lambda d: torch.arange(1, 20, 3, device=d), torch.arange(1, 20, 3)),
    "linspace": (lambda d: torch.linspace(0, 1, 5, device=d), torch.linspace(0, 1, 5)),
    "eye": (lambda d: torch.eye(3, device=d), torch.eye(3)),
    "randn": (lambda d: torch.randn(64, device=d), _check_randn),
    "rand": (lambda d: torch.rand(64, device=d), _check_rand),
    "randint": (lambda d: torch.randint(3, 7, (64,), device=d), _check_randint),
    "tensor": (
        lambda d: torch.tensor([[1.5, -2.0], [3.25, 4.0]], device=d),
        torch.tensor([[1.5, -2.0], [3.25, 4.0]]),
    ),
    "as_tensor": (lambda d: torch.as_tensor([7, 8, 9], device=d), torch.tensor([7, 8, 9])),
    "zeros_like": (lambda d: torch.zeros_like(torch.ones(2, 3), device=d), torch.zeros(2, 3)),
    "full_like": (lambda d: torch.full_like(torch.ones(4), 3.0, device=d), torch.full((4,), 3.0)),
}


def _check_values(t, check):
    if check is None:
        return
    if callable(check):
        check(t)
        return
    torch.testing.assert_close(t.cpu(), check, rtol=0, atol=0)


@pytest.mark.factories
@pytest.mark.parametrize("name", list(FACTORIES))
def test_factory_default_device_is_current_device(flagos, name):
    make, check = FACTORIES[name]
    t = make("flagos")
    assert t.device == D0
    _check_values(t, check)


@pytest.mark.factories
@pytest.mark.parametrize("spelling", ["str", "device", "int_index"])
@pytest.mark.parametrize("name", list(FACTORIES))
def test_factory_explicit_index_while_device0_current(flagos, two_devices, name, spelling):
    make, check = FACTORIES[name]
    # A bare int means an index of the current accelerator, which is flagos.
    device = {"str": "flagos:1", "device": D1, "int_index": 1}[spelling]
    t = make(device)
    assert t.device == D1
    assert t.untyped_storage().device == D1
    assert flagos.current_device() == 0, "a factory on flagos:1 must restore the current device"
    _check_values(t, check)


@pytest.mark.factories
@pytest.mark.parametrize("name", list(FACTORIES))
def test_factory_follows_current_device(flagos, two_devices, name):
    make, check = FACTORIES[name]
    with flagos.device(1):
        t = make("flagos")
        assert flagos.current_device() == 1
    assert t.device == D1
    _check_values(t, check)
    with flagos.device(1):
        t0 = make("flagos:0")
        assert flagos.current_device() == 1
    assert t0.device == D0


@pytest.mark.factories
def test_randn_lands_on_device_1(flagos, two_devices, mem_snapshot):
    before = mem_snapshot()
    t = torch.randn(4, device="flagos:1")
    assert t.device == D1 and t.shape == (4,)
    big = torch.randn(MiB, device="flagos:1")  # 4 MiB: must be charged to device 1 only
    after = mem_snapshot()
    assert after[0] == before[0], "allocating on flagos:1 charged device 0"
    assert after[1] >= before[1] + big.nbytes + t.nbytes
    assert flagos.current_device() == 0


@pytest.mark.factories
def test_factory_memory_is_charged_to_the_current_device(flagos, two_devices, mem_snapshot):
    before = mem_snapshot()
    with flagos.device(1):
        t = torch.empty(MiB, device="flagos")
    after = mem_snapshot()
    assert t.device == D1
    assert after[0] == before[0] and after[1] >= before[1] + MiB * 4


# ---------------------------------------------------------------------------------------------
# .to() and friends
# ---------------------------------------------------------------------------------------------


@pytest.mark.factories
def test_to_honours_explicit_index(flagos, two_devices):
    src = torch.arange(12.0).reshape(3, 4)
    a = src.to("flagos:1")
    assert a.device == D1 and flagos.current_device() == 0
    b = src.to(D1)
    c = src.to(device="flagos", dtype=torch.float64)
    assert b.device == D1 and c.device == D0 and c.dtype == torch.float64
    d = a.to("flagos:0")
    assert d.device == D0
    e = d.to(a)  # to another tensor's device (and dtype)
    assert e.device == D1
    for t in (a, b, d, e):
        torch.testing.assert_close(t.cpu(), src, rtol=0, atol=0)
    torch.testing.assert_close(c.cpu(), src.double(), rtol=0, atol=0)


@pytest.mark.factories
def test_to_follows_current_device(flagos, two_devices):
    src = torch.arange(5)
    with flagos.device(1):
        a = src.to("flagos")
        b = src.to(torch.device("flagos"))
    assert a.device == D1 and b.device == D1
    assert a.cpu().tolist() == [0, 1, 2, 3, 4]


def test_to_same_device_returns_self(flagos, two_devices):
    a = torch.ones(3, device="flagos:1")
    assert a.to("flagos:1") is a
    assert a.to(D1, dtype=torch.float32) is a
    assert a.to("flagos:1", copy=True) is not a


def test_new_tensors_inherit_device_of_self(flagos, two_devices):
    a = torch.ones(2, device="flagos:1")
    for t in (
        a.new_empty(3),
        a.new_zeros(3),
        a.new_ones(3),
        a.new_full((3,), 2.0),
        a.new_tensor([1.0]),
    ):
        assert t.device == D1
    assert a.new_ones(2).cpu().tolist() == [1.0, 1.0]
    assert torch.empty_like(a).device == D1
    assert torch.zeros_like(a).cpu().tolist() == [0.0, 0.0]


def test_module_to_device(flagos, two_devices):
    m = torch.nn.Linear(3, 2)
    ref = {k: v.clone() for k, v in m.state_dict().items()}
    m.to("flagos:1")
    for k, v in m.state_dict().items():
        assert v.device == D1
        torch.testing.assert_close(v.cpu(), ref[k], rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# ops on a device that is not the current one
# ---------------------------------------------------------------------------------------------


@pytest.mark.multidevice
def test_ops_on_device1_while_device0_current(flagos, two_devices, mem_snapshot, tol):
    x_cpu = torch.arange(12.0).reshape(3, 4)
    w_cpu = torch.linspace(-1, 1, 8).reshape(4, 2)
    x, w = x_cpu.to("flagos:1"), w_cpu.to("flagos:1")
    before = mem_snapshot()
    results = {
        "pointwise": (x * 2 + 1, x_cpu * 2 + 1),
        "reduction": (x.sum(dim=1), x_cpu.sum(dim=1)),
        "matmul": (x @ w, x_cpu @ w_cpu),
        "inplace": (x.clone().add_(3), x_cpu.clone().add_(3)),
        "cat": (torch.cat([x, x]), torch.cat([x_cpu, x_cpu])),
    }
    after = mem_snapshot()
    assert flagos.current_device() == 0
    assert after[0] == before[0], "ops on flagos:1 allocated on device 0"
    for name, (got, expected) in results.items():
        assert got.device == D1, name
        torch.testing.assert_close(got.cpu(), expected, **tol(expected.dtype), msg=name)


@pytest.mark.multidevice
def test_ops_on_device0_while_device1_current(flagos, two_devices):
    x = torch.arange(6, device="flagos:0")
    with flagos.device(1):
        y = (x * x).sum()
        assert flagos.current_device() == 1
    assert y.device == D0 and y.item() == 55


# ---------------------------------------------------------------------------------------------
# torch.accelerator
# ---------------------------------------------------------------------------------------------


def test_accelerator_reports_flagos(flagos):
    assert torch.accelerator.is_available()
    acc = torch.accelerator.current_accelerator()
    assert acc is not None and acc.type == "flagos"
    assert torch.accelerator.device_count() == flagos.device_count()
    assert torch.accelerator.current_device_index() == flagos.current_device()


def test_accelerator_set_device_index(flagos, two_devices):
    torch.accelerator.set_device_index(1)
    assert flagos.current_device() == 1
    assert torch.accelerator.current_device_index() == 1
    assert torch.empty(1, device="flagos").device == D1
    torch.accelerator.set_device_index(0)
    assert flagos.current_device() == 0
    if hasattr(torch.accelerator, "device_index"):
        with torch.accelerator.device_index(1):
            assert flagos.current_device() == 1
        assert flagos.current_device() == 0


def test_accelerator_synchronize_and_streams(flagos, two_devices):
    x = torch.randn(256, device="flagos:1")
    torch.accelerator.synchronize()
    torch.accelerator.synchronize(1)
    torch.accelerator.synchronize("flagos:1")
    flagos.synchronize()
    flagos.synchronize(1)
    assert same_stream(torch.accelerator.current_stream(), flagos.current_stream())
    assert same_stream(torch.accelerator.current_stream(1), flagos.current_stream(1))
    s = torch.Stream(device="flagos")
    torch.accelerator.set_stream(s)
    assert same_stream(flagos.current_stream(), s)
    assert torch.isfinite(x.cpu()).all()


# ---------------------------------------------------------------------------------------------
# streams and events
# ---------------------------------------------------------------------------------------------


def test_streams_are_distinct_and_on_current_device(flagos):
    default = flagos.current_stream()
    assert default.device == D0
    s1 = torch.Stream(device="flagos")
    s2 = flagos.Stream()
    assert s1.device == D0 and s2.device == D0
    ids = {default.stream_id, s1.stream_id, s2.stream_id}
    assert len(ids) == 3
    assert s1.query() and s2.query()
    s1.synchronize()


def test_stream_context_switches_current_stream(flagos):
    default = flagos.current_stream()
    s = flagos.Stream()
    with flagos.stream(s):
        assert same_stream(flagos.current_stream(), s)
        assert same_stream(torch.accelerator.current_stream(), s)
    assert same_stream(flagos.current_stream(), default)
    t = torch.Stream(device="flagos")
    with t:
        assert same_stream(flagos.current_stream(), t)
    assert same_stream(flagos.current_stream(), default)
    flagos.set_stream(s)
    assert same_stream(flagos.current_stream(), s)
    flagos.set_stream(default)
    assert same_stream(flagos.current_stream(), default)


def test_work_on_side_stream_is_correct(flagos):
    src = torch.arange(4096, dtype=torch.float32)
    s = flagos.Stream()
    with flagos.stream(s):
        x = src.to("flagos")
        y = x * 3
        z = y.cpu()
    s.synchronize()
    assert s.query()
    torch.testing.assert_close(z, src * 3, rtol=0, atol=0)


def test_events_record_query_synchronize(flagos):
    s = flagos.Stream()
    e = torch.Event(device="flagos")
    with flagos.stream(s):
        x = torch.ones(1 << 16, device="flagos") * 2
        e.record()
    e.synchronize()
    assert e.query()
    e2 = s.record_event()
    e2.synchronize()
    assert e2.query()
    e3 = flagos.Event()
    e3.record(s)
    e3.wait(flagos.current_stream())
    flagos.current_stream().wait_event(e3)
    assert x.sum().item() == 2 * (1 << 16)


def test_wait_stream_orders_producer_and_consumer(flagos):
    producer, consumer = flagos.Stream(), flagos.Stream()
    src = torch.arange(1 << 18, dtype=torch.float32)
    with flagos.stream(producer):
        x = src.to("flagos")
        x.mul_(2)
    consumer.wait_stream(producer)
    with flagos.stream(consumer):
        y = x + 1
        out = y.cpu()
    consumer.synchronize()
    torch.testing.assert_close(out, src * 2 + 1, rtol=0, atol=0)


def test_event_elapsed_time(flagos, require_cap):
    require_cap("EVENT_TIMING")
    start = torch.Event(device="flagos", enable_timing=True)
    end = torch.Event(device="flagos", enable_timing=True)
    start.record()
    x = torch.randn(1 << 16, device="flagos")
    (x * x).sum()
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    assert isinstance(ms, float) and ms >= 0.0
    fs, fe = flagos.Event(enable_timing=True), flagos.Event(enable_timing=True)
    fs.record()
    fe.record()
    fe.synchronize()
    assert fs.elapsed_time(fe) >= 0.0


@pytest.mark.multidevice
def test_streams_per_device(flagos, two_devices):
    d0, d1 = flagos.current_stream(0), flagos.current_stream(1)
    assert d0.device == D0 and d1.device == D1
    assert not same_stream(d0, d1)
    s1 = flagos.Stream(device=1)
    assert s1.device == D1 and flagos.current_device() == 0
    t1 = torch.Stream(device="flagos:1")
    assert t1.device == D1
    with flagos.stream(s1):
        assert same_stream(flagos.current_stream(1), s1)
        assert same_stream(flagos.current_stream(0), d0)
        y = torch.arange(8, device="flagos:1") * 2
    s1.synchronize()
    assert same_stream(flagos.current_stream(1), d1)
    assert same_stream(flagos.current_stream(0), d0)
    assert flagos.current_device() == 0
    assert y.device == D1 and y.cpu().tolist() == [0, 2, 4, 6, 8, 10, 12, 14]
    e = torch.Event(device="flagos:1")
    e.record(s1)
    e.synchronize()
    assert e.query()


@pytest.mark.multidevice
def test_cross_device_stream_wait(flagos, two_devices):
    s0, s1 = flagos.Stream(device=0), flagos.Stream(device=1)
    src = torch.arange(1 << 16, dtype=torch.float32)
    with flagos.stream(s0):
        x0 = src.to("flagos:0") + 1
    s1.wait_stream(s0)
    with flagos.stream(s1):
        x1 = x0.to("flagos:1")
        out = (x1 * 2).cpu()
    s1.synchronize()
    torch.testing.assert_close(out, (src + 1) * 2, rtol=0, atol=0)


def test_invalid_ordinal_says_what_sets_the_device_count(flagos):
    """A tensor on a device the process does not have: the error says what sets the count, where
    the vendor declares it (sim: FLAGOS_SIM_DEVICES)."""
    import torch_fl

    bad = flagos.device_count() + 7
    with pytest.raises(RuntimeError, match=f"invalid device ordinal {bad}") as info:
        torch.ones(2, device=f"flagos:{bad}")
    setting = torch_fl.vendor().device_count_setting()
    if setting:
        assert setting in str(info.value)
