"""Backends that run their kernel when called (Python kernels, vendor library kernels) inside a
device-graph capture: a draw from a generator and work on host views are refused by name at the
call; anything the capture records (flagos ops inside a Python kernel) replays with new inputs.

Before these rules, a host-view kernel invalidated the capture with an error naming neither the
operator nor the backend, and a kernel drawing its randomness on the host at the call replayed
the capture's numbers every time."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch_fl import _C
from torch_fl.routing import override, register_python_backend

pytestmark = pytest.mark.graphs

_names = itertools.count()


@pytest.fixture(autouse=True)
def _seat():
    assert torch.flagos.graphs.supported(), f"runtime {_C.runtime_name()!r} declares no graphs"


def _backend(kernels, **kw) -> str:
    name = f"capturetest{next(_names)}"
    register_python_backend(name, kernels, **kw)
    return name


def test_host_view_kernel_is_refused_by_name():
    if not (_C.runtime_capabilities() & _C.CAP_HOST_ADDRESSABLE_MEMORY):
        pytest.skip(f"runtime {_C.runtime_name()!r}: no CPU alias views of its memory")
    backend = _backend(
        {"mul.Tensor": lambda self, other: torch.mul(self, other)}, view_device="cpu"
    )
    x, w = torch.ones(8, device="flagos"), torch.full((8,), 2.0, device="flagos")
    with override({"mul.Tensor": backend}):
        assert (x * w).cpu().eq(2).all()  # eager: served on the host views
        g = torch.flagos.Graph()
        with pytest.raises(
            RuntimeError, match=rf"aten::mul\.Tensor.*backend '{backend}'.*host views"
        ):
            with torch.flagos.graph(g):
                x * w
    # The refusal left nothing behind: the device works and captures again.
    g = torch.flagos.Graph()
    with torch.flagos.graph(g):
        y = x * w
    x.fill_(5)
    g.replay()
    assert y.cpu().eq(10).all()


def test_host_drawn_randomness_is_refused_by_name():
    # A kernel deciding its randomness on the host at the call: a capture would freeze it.
    def bernoulli_(self, p, *, generator=None):
        return self.fill_(float(torch.rand(()) < p))

    backend = _backend({"bernoulli_.float": bernoulli_})
    x = torch.ones(16, device="flagos")
    with override({"bernoulli_.float": backend}):
        x.bernoulli_(0.5)  # eager: fine
        g = torch.flagos.Graph()
        with pytest.raises(
            RuntimeError,
            match=rf"aten::bernoulli_\.float.*backend '{backend}'.*every replay would repeat",
        ):
            with torch.flagos.graph(g):
                x.bernoulli_(0.5)


def test_kernel_of_flagos_ops_captures_and_replays():
    # No views, no generator: the kernel's own flagos ops are what the capture records.
    backend = _backend({"mul.Tensor": lambda self, other: torch.div(self, torch.reciprocal(other))})
    x, w = torch.ones(8, device="flagos"), torch.full((8,), 2.0, device="flagos")
    with override({"mul.Tensor": backend}):
        g = torch.flagos.Graph()
        with torch.flagos.graph(g):
            y = x * w
        for k in (3.0, 7.0):
            x.fill_(k)
            g.replay()
            torch.testing.assert_close(y.cpu(), torch.full((8,), 2 * k))


def test_capture_falls_to_the_next_choice_of_a_preference_list():
    # "flaggems, ascend, cpu" on an Ascend with FlagGems: eager runs FlagGems, a capture runs the
    # next choice instead of refusing. Here a host-view Python backend, then box:cpu.
    if not (_C.runtime_capabilities() & _C.CAP_HOST_ADDRESSABLE_MEMORY):
        pytest.skip(f"runtime {_C.runtime_name()!r}: no CPU alias views of its memory")
    calls = []

    def mul(self, other):
        calls.append(1)
        return torch.mul(self, other)

    backend = _backend({"mul.Tensor": mul}, view_device="cpu")
    x, w = torch.ones(8, device="flagos"), torch.full((8,), 2.0, device="flagos")
    with override({"mul.Tensor": f"{backend}, box:cpu, cpu"}):
        assert (x * w).cpu().eq(2).all() and len(calls) == 1  # eager: the first choice
        g = torch.flagos.Graph()
        with torch.flagos.graph(g):
            y = x * w
        assert len(calls) == 1  # captured on box:cpu
        x.fill_(5)
        g.replay()
        assert y.cpu().eq(10).all()
        # Only cpu after it: nothing can capture it, so the refusal stands and says what to do.
        with override({"mul.Tensor": f"{backend}, cpu"}):
            with pytest.raises(RuntimeError, match=rf"backend '{backend}'.*list one after"):
                with torch.flagos.graph(torch.flagos.Graph()):
                    x * w


def test_capture_alternates_come_from_the_routes():
    from torch_fl.routing.activation import capture_alternates
    from torch_fl.routing.route_table import ResolvedRoute

    backend = _backend({"mul.Tensor": lambda a, b: torch.mul(a, b)})
    routes = {
        "aten::mul.Tensor": ResolvedRoute("aten::mul.Tensor", backend, (), ("cpu", "box:cpu")),
        "aten::add.Tensor": ResolvedRoute("aten::add.Tensor", "box:cpu", (), ("cpu",)),
        "aten::sub.Tensor": ResolvedRoute("aten::sub.Tensor", backend, (), ("cpu",)),
    }
    assert capture_alternates(routes) == {"aten::mul.Tensor": "box:cpu"}
