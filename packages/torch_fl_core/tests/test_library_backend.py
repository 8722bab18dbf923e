"""Library backends: a vendor's kernels registered in its own operator namespace (docs/routing.md)."""

from __future__ import annotations

import pytest
import torch
import torch_fl
from torch_fl import _C, routing

pytestmark = pytest.mark.routing


@pytest.fixture(scope="module")
def libtest():
    lib = torch.library.Library("tfl_libtest", "DEF")
    lib.define("abs(Tensor self) -> Tensor")
    lib.define("sin(Tensor self, int extra) -> Tensor")  # aten's schema differs: no kernel
    lib.define("cos(Tensor self) -> Tensor")  # no PrivateUse1 kernel: no kernel
    calls: list[str] = []

    def my_abs(x):
        calls.append("abs")
        return (x.cpu().abs() + 100).to(x.device)

    lib.impl("abs", my_abs, "PrivateUse1")
    lib.impl("sin", lambda x, extra: x, "PrivateUse1")
    lib.impl("cos", lambda x: x, "CPU")
    routing.register_library_backend("libtest", "tfl_libtest")
    yield calls
    routing.load_routes()
    del lib


def test_has_kernel_only_for_same_schema_with_a_privateuse1_kernel(libtest):
    assert _C.backend_has_kernel("libtest", "aten::abs")
    assert not _C.backend_has_kernel("libtest", "aten::sin")
    assert not _C.backend_has_kernel("libtest", "aten::cos")
    assert not _C.backend_has_kernel("libtest", "aten::neg")


def test_routed_calls_reach_the_namespace_kernel(libtest, tmp_path):
    table = tmp_path / "lib.conf"
    table.write_text("abs = libtest\n")
    routing.load_routes(path=table)
    _C.reset_dispatch_counts()
    x = torch.tensor([-1.0, 2.0], device="flagos")
    assert torch.abs(x).cpu().tolist() == [101.0, 102.0]
    assert libtest[-1] == "abs"
    assert dict(_C.dispatch_counts())["aten::abs"] == {"libtest": 1}


def test_a_route_to_a_missing_kernel_fails_at_load(libtest, tmp_path):
    table = tmp_path / "bad.conf"
    table.write_text("sin = libtest\n")
    with pytest.raises(routing.RouteTableError, match="libtest.*sin|sin.*libtest"):
        routing.load_routes(path=table)


def test_namespace_must_be_the_vendors_own(libtest):
    with pytest.raises(ValueError, match="namespace"):
        routing.register_library_backend("x", "aten")
    with pytest.raises(RuntimeError, match="reserved"):
        _C.register_library_backend("cpu", "tfl_libtest")


def test_no_barrier_without_the_capability(libtest):
    """sim orders its producers: the barrier never fires there."""
    if _C.runtime_capabilities() & _C.CAP_UNORDERED_PRODUCERS:
        pytest.skip(f"runtime {_C.runtime_name()!r} declares CAP_UNORDERED_PRODUCERS")
    before = _C.producer_barrier_count()
    torch.abs(torch.ones(3, device="flagos")).cpu()
    assert _C.producer_barrier_count() == before
    assert torch_fl._C.producer_barrier_enabled()
