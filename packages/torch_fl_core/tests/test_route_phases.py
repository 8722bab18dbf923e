"""The route phase counters of a profiling build (csrc/router/route_phases.h).

Wheels are built without them: then ``_C.route_phases()`` says so and counts nothing, so the
routed path carries no timer. A core built with ``-C cmake.define.TORCH_FL_ROUTE_PHASES=ON``
counts each routed call of this thread once, with its kernel step and the router's steps.
They run on any vendor whose table sends ``add.Tensor`` to a box backend.
"""

from __future__ import annotations

import threading

import pytest
import torch

PHASES = ("pick", "scope", "args", "kernel", "results", "other")


@pytest.fixture(scope="module")
def phases():
    import torch_fl  # noqa: F401
    from torch_fl import _C

    mod = getattr(torch, "flagos", None)
    if mod is None or not mod.is_available():
        pytest.skip("no flagos device")
    routes = {name: backend for name, backend, _ in _C.router_routes()}
    if not str(routes.get("aten::add.Tensor", "")).startswith("box:"):
        pytest.skip(f"add.Tensor routes to {routes.get('aten::add.Tensor')!r}, not a box backend")
    return _C


def _adds(n: int) -> None:
    a = torch.ones(8, device="flagos")
    for _ in range(n):
        a + a  # noqa: B018


@pytest.mark.routing
def test_counters_follow_the_build(phases):
    phases.route_phases()
    _adds(5)
    got = phases.route_phases()
    assert set(got) == {"enabled", "calls", *PHASES}
    if not got["enabled"]:
        # Compiled out: nothing counted, the tick source reads zero.
        assert got["calls"] == 0 and all(got[p] == 0 for p in PHASES)
        assert phases.route_phase_ticks() == 0
        return
    # The fill_ of torch.ones is routed too, and counted.
    assert got["calls"] >= 5
    assert got["kernel"] > 0 and got["args"] > 0
    again = phases.route_phases()
    assert again["calls"] == 0, "route_phases() takes and resets the counters"


@pytest.mark.routing
def test_counters_are_per_thread(phases):
    if not phases.route_phases()["enabled"]:
        pytest.skip("core built without TORCH_FL_ROUTE_PHASES (the default): nothing to count")
    seen = {}

    def worker() -> None:
        phases.route_phases()
        _adds(3)
        seen["worker"] = phases.route_phases()["calls"]

    phases.route_phases()
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen["worker"] >= 3
    assert phases.route_phases()["calls"] == 0, "another thread's calls are not this thread's"
