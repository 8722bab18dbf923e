"""torch.save / torch.load of flagos tensors and state dicts, with every map_location form."""

from __future__ import annotations

import io

import pytest
import torch

pytestmark = [pytest.mark.serialization, pytest.mark.usefixtures("flagos")]

D0 = torch.device("flagos", 0)
D1 = torch.device("flagos", 1)


def roundtrip(obj, **load_kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kwargs)


@pytest.fixture
def payload(two_devices):
    cpu = {
        "a": torch.randn(3, 4, generator=torch.Generator().manual_seed(0)),
        "b": torch.arange(10, dtype=torch.int64),
    }
    return cpu, {"a": cpu["a"].to("flagos:0"), "b": cpu["b"].to("flagos:1")}


@pytest.mark.parametrize("weights_only", [True, False])
def test_default_load_restores_original_devices(payload, weights_only, bits):
    cpu, dev = payload
    loaded = roundtrip(dev, weights_only=weights_only)
    assert loaded["a"].device == D0 and loaded["b"].device == D1
    bits.equal(loaded["a"], cpu["a"])
    bits.equal(loaded["b"], cpu["b"])


@pytest.mark.parametrize(
    "location,expected",
    [
        ("flagos:1", {"a": D1, "b": D1}),
        ("flagos:0", {"a": D0, "b": D0}),
        ("cpu", {"a": torch.device("cpu"), "b": torch.device("cpu")}),
        (torch.device("flagos", 1), {"a": D1, "b": D1}),
        (torch.device("cpu"), {"a": torch.device("cpu"), "b": torch.device("cpu")}),
        ({"flagos:0": "flagos:1", "flagos:1": "cpu"}, {"a": D1, "b": torch.device("cpu")}),
        ({"flagos:1": "flagos:0"}, {"a": D0, "b": D0}),
    ],
    ids=[
        "str_flagos1",
        "str_flagos0",
        "str_cpu",
        "device_flagos1",
        "device_cpu",
        "dict_swap",
        "dict_partial",
    ],
)
def test_map_location(payload, location, expected, bits, flagos):
    cpu, dev = payload
    loaded = roundtrip(dev, map_location=location)
    for k in ("a", "b"):
        assert loaded[k].device == expected[k], k
        bits.equal(loaded[k], cpu[k])
    assert flagos.current_device() == 0


def test_map_location_callable(payload, bits):
    cpu, dev = payload
    loaded = roundtrip(dev, map_location=lambda storage, loc: storage)
    assert loaded["a"].device.type == "cpu"
    bits.equal(loaded["a"], cpu["a"])


def test_cpu_saved_loaded_onto_flagos(bits, flagos):
    x = torch.linspace(-3, 3, 17, dtype=torch.float64)
    loaded = roundtrip(x, map_location="flagos:0")
    assert loaded.device == D0
    bits.equal(loaded, x)


def test_every_dtype_roundtrips(copy_dtype, bits, flagos):
    x = bits.random((5, 3), copy_dtype, seed=3)
    fx = x.to("flagos")
    loaded = roundtrip({"t": fx, "strided": fx.t()[1:]})
    assert loaded["t"].device == D0 and loaded["t"].dtype == copy_dtype
    bits.equal(loaded["t"], x)
    bits.equal(loaded["strided"], x.t()[1:])


def test_views_share_storage_after_load(flagos):
    base = torch.arange(12.0, device="flagos")
    loaded = roundtrip({"base": base, "view": base[4:8]})
    lb, lv = loaded["base"], loaded["view"]
    assert lb.device == D0 and lv.device == D0
    assert lv.untyped_storage().data_ptr() == lb.untyped_storage().data_ptr()
    assert lv.data_ptr() == lb.data_ptr() + 4 * 4
    lv.copy_(torch.zeros(4))
    assert lb.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 0.0, 8.0, 9.0, 10.0, 11.0]


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 2)
    )


@pytest.mark.parametrize("device", ["flagos:0", "flagos:1"])
def test_module_state_dict_roundtrip(device, flagos, bits):
    if torch.device(device).index >= flagos.device_count():
        pytest.skip(f"needs {device}; vendor has {flagos.device_count()} device(s)")
    model = _model().to(device)
    sd = model.state_dict()
    loaded = roundtrip(sd)
    assert list(loaded) == list(sd)
    for k, v in loaded.items():
        assert v.device == torch.device(device), k
        bits.equal(v, sd[k])

    on_cpu = roundtrip(sd, map_location="cpu")
    fresh = _model()
    for p in fresh.parameters():
        torch.nn.init.zeros_(p)
    fresh.load_state_dict(on_cpu)
    for k, v in fresh.state_dict().items():
        bits.equal(v, sd[k])

    target = _model().to(device)
    for p in target.parameters():
        torch.nn.init.zeros_(p)
    target.load_state_dict(loaded)
    for k, v in target.state_dict().items():
        assert v.device == torch.device(device)
        bits.equal(v, sd[k])


def test_save_to_file(tmp_path, payload, bits):
    cpu, dev = payload
    path = tmp_path / "t.pt"
    torch.save(dev, path)
    loaded = torch.load(path)
    assert loaded["b"].device == D1
    bits.equal(loaded["b"], cpu["b"])
    mapped = torch.load(path, map_location="flagos:1", mmap=True)
    assert mapped["a"].device == D1
    bits.equal(mapped["a"], cpu["a"])
