"""The native-vendor kit without a native vendor: the SDK loader's not-found message and its
build-record hint, a vendor SDK module's forwarding, the Triton precondition of the flaggems
backend, and the FlagGems-first table builder on fabricated inputs."""

from __future__ import annotations

import sys
import types

import pytest
from torch_fl.routing import flaggems
from torch_fl.routing.flaggems_first import FlagGemsFirst, Rule
from torch_fl.vendors import sdk

SPEC = {
    "product": "Test SDK",
    "env_vars": ("TFL_TEST_HOME", "TFL_TEST_HOME2"),
    "default_home": "/nonexistent/tfl-test-sdk",
    "libraries": ("libtfl_test_missing_rt.so",),
    "lib_dirs": ("lib64", "lib"),
    "example": "/path/to/test",
    "built_home_key": "test_home",
    "emulator": "the test emulator",
    "real": "a test SDK",
}


def test_the_not_found_message_names_the_library_places_fix_and_built_emulator(tmp_path):
    built = tmp_path / "emu"
    built.mkdir()
    loader = sdk.SdkLoader(
        sdk.SdkSpec(**SPEC), lambda: {"test_home": str(built), "emulator": "TRUE"}
    )
    with pytest.raises(sdk.SdkNotFoundError) as err:
        loader.load({"TFL_TEST_HOME2": str(tmp_path / "none")})
    text = str(err.value)
    none = tmp_path / "none"
    assert text.startswith(
        f"the Test SDK library libtfl_test_missing_rt.so was not found: looked in {none}/lib64 "
        f"and {none}/lib (TFL_TEST_HOME2={none}) and on the dynamic loader path"
    ), text
    assert "export TFL_TEST_HOME=/path/to/test" in text
    assert text.endswith(
        f". This package was built against the test emulator at {built}; to use it: "
        f"export TFL_TEST_HOME={built}"
    ), text
    assert loader.loaded() is None  # a failure is retried on the next call


def test_a_real_sdk_build_record_names_it_without_an_export_when_absent(tmp_path):
    gone = tmp_path / "gone"
    loader = sdk.SdkLoader(sdk.SdkSpec(**SPEC), lambda: {"test_home": str(gone)})
    assert loader.built() == (f"a test SDK at {gone}", str(gone))
    with pytest.raises(sdk.SdkNotFoundError) as err:
        loader.load({})
    assert "TFL_TEST_HOME and TFL_TEST_HOME2 are unset" in str(err.value)
    assert str(err.value).endswith(f". This package was built against a test SDK at {gone}")


def test_a_vendor_sdk_module_forwards_to_one_loader():
    owner = "tfl_test_vendor.sdk"
    load = sdk.module_attribute(owner, SPEC, dict, "load")
    assert load.__self__ is sdk.loader(owner, SPEC, dict)  # one loader per module
    assert sdk.module_attribute(owner, SPEC, dict, "SdkNotFoundError") is sdk.SdkNotFoundError
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        sdk.module_attribute(owner, SPEC, dict, "nope")


@pytest.mark.parametrize(
    ("backends", "gems", "expected"),
    [
        (None, False, (False, "no Triton is installed")),
        ({"cuda": 1}, True, (False, "the installed Triton has no Test backend (backends: cuda)")),
        ({"npu": 1}, False, (False, "Triton has the 'npu' backend but FlagGems is not installed")),
        (
            {"x": 1, "npu": 1},
            True,
            (True, "Triton with the 'npu' backend and FlagGems are importable"),
        ),
    ],
)
def test_triton_backend(monkeypatch, backends, gems, expected):
    import importlib.util

    real = importlib.util.find_spec

    def find_spec(name, *args):
        if name == "triton":
            return object() if backends is not None else None
        if name == "flag_gems":
            return object() if gems else None
        return real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    fake = types.ModuleType("triton")
    fake.backends = types.SimpleNamespace(backends=backends or {})
    monkeypatch.setitem(sys.modules, "triton", fake)
    assert flaggems.triton_backend(("npu", "ascend"), "Test") == expected


def _builder(**gaps: dict) -> FlagGemsFirst:
    return FlagGemsFirst(
        native_ops=["aten::abs", "aten::ones", "aten::mm"],
        flaggems_ops=["abs", "exp", "ones", "randn", "view"],
        gaps={k: {"family": "f", "reason": "r", **v} for k, v in gaps.items()},
        route_classes=({"abs", "exp", "mm", "elu", "silu"}, {"ones", "randn"}),
    )


def test_flaggems_overloads_are_those_a_route_may_name():
    t = _builder(elu={"dtypes": "all"})
    # view: not routable; randn: a factory without a native kernel (cpu cannot serve it).
    assert t.gems == {"abs", "exp", "ones", "elu"}
    assert t.overloads() == ["abs", "elu", "exp", "mm", "ones"]


def test_gap_entries_whole_and_by_dtype():
    t = _builder(abs={"dtypes": ["int64"]}, exp={"dtypes": "all"}, silu={"dtypes": ["bool"]})
    assert t.whole_gap("exp") is not None and t.whole_gap("abs") is None
    assert t.dtype_gap("abs") == ("int64",) and t.dtype_gap("exp") == ()
    assert t.dtype_gap("mm") == ()  # not a FlagGems overload
    assert t.gap_counts() == (1, 2)  # silu's entry makes it a FlagGems overload too


def test_a_factory_without_a_native_kernel_keeps_flaggems():
    t = FlagGemsFirst(
        native_ops=[],
        flaggems_ops=["ones"],
        gaps={"ones": {"family": "f", "reason": "r", "dtypes": "all"}},
        route_classes=(set(), {"ones"}),
    )
    assert t.gems == set()  # nothing but flaggems could serve it, and cpu cannot back it
    assert t.whole_gap("ones") is None


def test_core_rules_and_text():
    t = _builder()
    t.rules["abs"] = [Rule((), "flaggems, v, cpu"), Rule(("int64",), "cpu", "why")]
    t.add_core_rules(
        {"aten::conj_physical_": "calls a stub", "aten::abs": "not taken"},
        {"abs": ("complex32",), "polar": ("float16",)},
    )
    assert t.counts() == {"flaggems": 1, "cpu": 2}
    text = t.text(
        title="T.",
        command="gen",
        torch_minor="2.13",
        measured="m",
        explanation=["# E."],
        skipped_heading="Without a v route",
        skipped={"aten::mm": "missing"},
    )
    assert text.splitlines() == [
        "# T.",
        "# GENERATED by `gen` -- do not edit; `--check` in tests.",
        "# generated-for: torch 2.13",
        "# flaggems-measured: m",
        "# E.",
        "# Without a v route: 1",
        "#   mm: missing",
        "# Dtypes CPU's kernel lacks and CUDA's takes go to core's composite backend: abs, polar.",
        "# Unlisted overloads keep PyTorch's default on flagos (composite, else the CPU fallback).",
        "",
        "abs = flaggems, v, cpu",
        "abs[int64] = cpu  # why",
        "abs[complex32] = composite  # CPU's kernel lacks these dtypes",
        "conj_physical_ = cpu  # composite calls a stub",
        "polar = cpu",
        "polar[float16] = composite  # CPU's kernel lacks these dtypes",
    ]
