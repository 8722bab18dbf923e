"""The build-time generator of unboxed route kernels (tools/gen_unboxed_routes.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[1] / "tools" / "gen_unboxed_routes.py"


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("gen_unboxed_routes", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def routable(tool) -> dict[str, str]:
    return {full: struct for full, struct, _, _ in tool.routable()}


def test_overloads_with_a_kernel_box_routes_reach(routable):
    assert routable["aten::mul.Tensor"] == "mul_Tensor"  # CPU and CUDA kernels
    assert "aten::add.out" in routable  # ufunc: kernels from ufunc_inner_loop
    assert "aten::add.Tensor" in routable  # structured delegate of add.out
    # Only a CUDA kernel: box:cuda's hot path on the GPU (SDPA's fused kernels).
    assert routable["aten::_scaled_dot_product_cudnn_attention"] == (
        "_scaled_dot_product_cudnn_attention"
    )
    assert "aten::_scaled_dot_product_flash_attention" in routable


def test_overloads_without_a_device_kernel_or_with_stream_arguments_are_left(routable):
    assert "aten::linear" not in routable  # composite: decomposes on flagos
    assert "aten::record_stream" not in routable  # Stream argument: core-native
    assert "aten::set_.source_Storage" not in routable  # Storage argument: core-native


def test_the_build_registered_what_the_generator_lists(routable, tool):
    from torch_fl import _C

    # The generator leaves the overloads whose route kernel core writes itself to core.
    assert not tool.CORE_WRITTEN & routable.keys()
    assert _C.unboxed_route_count() == len(routable) + len(tool.CORE_WRITTEN)


def test_overloads_of_one_signature_share_a_file(tool):
    ops = tool.routable()
    files = tool.shard(ops, 4)
    assert sorted(op for f in files for op in f) == sorted(ops)  # each overload once
    where = {}
    for i, f in enumerate(files):
        for _, _, _, signature in f:
            assert where.setdefault(signature, i) == i, signature
    by_full = {full: signature for full, _, _, signature in ops}
    # Names and defaults do not make a signature; types and written arguments do.
    assert by_full["aten::sin"] == by_full["aten::cos"]
    assert by_full["aten::sin.out"] != by_full["aten::sin"]
    assert tool.shard(ops, 4) == files  # deterministic
    sizes = [len(f) for f in files]
    assert max(sizes) < 2 * min(sizes), sizes
