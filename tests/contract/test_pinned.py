"""Pinned host memory and DataLoader pinning for the flagos device."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.torch_version import TorchVersion
from torch.utils.data import DataLoader, TensorDataset

pytestmark = [pytest.mark.pinned, pytest.mark.usefixtures("flagos")]


@pytest.fixture(autouse=True)
def _pinned_capability(require_cap):
    require_cap("PINNED_HOST_MEMORY")


def test_pin_memory_gives_pinned_copy(bits):
    x = bits.random((33, 17), torch.float32, seed=1)
    assert not x.is_pinned()
    p = x.pin_memory()
    assert p.is_pinned() and p.device.type == "cpu"
    assert p.data_ptr() != x.data_ptr()
    bits.equal(p, x)
    assert not x.is_pinned(), "pin_memory() must not change its source"
    assert p.pin_memory().data_ptr() == p.data_ptr(), "pinning a pinned tensor returns it as is"


@pytest.mark.parametrize(
    "dtype", [torch.uint8, torch.bfloat16, torch.complex128, torch.bool], ids=str
)
def test_pinned_factories(dtype, flagos_owns_pinned_memory):
    t = torch.empty(100, dtype=dtype, pin_memory=True)
    assert t.is_pinned()
    z = torch.zeros(10, 10, dtype=dtype, pin_memory=True)
    assert z.is_pinned() and not (z != 0).any()
    v = z[2:5]
    assert v.is_pinned(), "a view into pinned memory is pinned"


def test_pin_memory_with_device_argument(bits):
    x = bits.random((8,), torch.int32, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the argument is deprecated in torch
        try:
            p = x.pin_memory(device="flagos")
        except TypeError:
            pytest.skip(f"torch {torch.__version__} has no Tensor.pin_memory(device=...)")
        assert p.is_pinned(device="flagos")
    assert p.is_pinned()
    bits.equal(p, x)


def test_pinned_storage():
    if TorchVersion(torch.__version__) < (2, 13):
        # Before torch 2.13 Storage.pin_memory() and is_pinned() default to device="cuda", not to
        # the current accelerator: flagos pinning is asked for by name there (a deprecated form).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            s = torch.UntypedStorage(64).pin_memory("flagos")
            assert s.is_pinned("flagos")
    else:
        s = torch.UntypedStorage(64).pin_memory()
        assert s.is_pinned()
    # Either way the storage is flagos pinned memory, as a tensor over it says.
    assert torch.empty(0, dtype=torch.uint8).set_(s).is_pinned()


@pytest.mark.parametrize("pin_memory_device", ["", "flagos"], ids=["default", "flagos"])
@pytest.mark.parametrize("num_workers", [0, 1], ids=["main", "worker"])
def test_dataloader_pin_memory_yields_pinned_batches(pin_memory_device, num_workers, flagos, bits):
    xs = torch.randn(40, 6, generator=torch.Generator().manual_seed(0))
    ys = torch.arange(40)
    loader_kwargs = dict(batch_size=8, pin_memory=True, num_workers=num_workers)
    if pin_memory_device:
        loader_kwargs["pin_memory_device"] = pin_memory_device
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pin_memory_device is deprecated in recent torch
        loader = DataLoader(TensorDataset(xs, ys), **loader_kwargs)
        batches = list(loader)
    assert len(batches) == 5
    device_batches = []
    for bx, by in batches:
        assert bx.is_pinned() and by.is_pinned()
        device_batches.append(
            (bx.to("flagos", non_blocking=True), by.to("flagos", non_blocking=True))
        )
    flagos.synchronize()
    for i, (dx, dy) in enumerate(device_batches):
        assert dx.device == torch.device("flagos", 0)
        bits.equal(dx, xs[i * 8 : (i + 1) * 8])
        bits.equal(dy, ys[i * 8 : (i + 1) * 8])


@pytest.mark.sim_only
def test_pinned_memory_comes_from_the_runtime_and_is_released(flagos, simctl):
    if not hasattr(torch.accelerator, "empty_host_cache"):
        pytest.skip(f"torch {torch.__version__} has no torch.accelerator.empty_host_cache")
    flagos.synchronize()
    torch.accelerator.empty_host_cache()
    before = simctl.live_bytes(-1)
    ps = [torch.empty(1 << 20, dtype=torch.uint8, pin_memory=True) for _ in range(3)]
    assert all(p.is_pinned() for p in ps)
    assert simctl.live_bytes(-1) >= before + 3 * (1 << 20), (
        "pinned memory must come from host_malloc"
    )
    del ps
    flagos.synchronize()
    torch.accelerator.empty_host_cache()
    assert simctl.live_bytes(-1) == before


def test_is_pinned_after_first_use_in_a_fresh_process(flagos_owns_pinned_memory):
    """ATen answers Tensor.is_pinned() for an accelerator only once it has seen that accelerator
    initialised; flagos's first use must tell it, as torch.cuda's does (a fresh process: nothing
    else in it has pinned through the accelerator yet)."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(
        """
        import torch
        fx = torch.arange(64.0).to("flagos")
        out = fx.to("cpu", non_blocking=True)
        torch.flagos.synchronize()
        factory = torch.empty(8, pin_memory=True)
        print(out.is_pinned(), factory.is_pinned(), out.tolist() == list(range(64)))
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["True", "True", "True"], proc.stdout + proc.stderr[-2000:]
