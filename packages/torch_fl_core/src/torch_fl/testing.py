"""Helpers for tests and demos that compare ``flagos`` results with CPU ones, and the fixtures a
native vendor package's tests share (:func:`native_vendor_fixtures`)."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

from torch_fl import _C

__all__ = [
    "assert_close_cpu",
    "cpu_kernels",
    "fallback_counts",
    "native_vendor_fixtures",
    "to_cpu",
]


def to_cpu(obj: Any) -> Any:
    """``obj`` with every tensor in it (through lists, tuples and dicts) copied to the CPU."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {key: to_cpu(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(value) for value in obj)
    return obj


def assert_close_cpu(
    actual: Any,
    expected: Any,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    msg: str | None = None,
) -> None:
    """``torch.testing.assert_close`` after moving both sides to the CPU (devices may differ)."""
    torch.testing.assert_close(to_cpu(actual), to_cpu(expected), rtol=rtol, atol=atol, msg=msg)


# Backends that run ATen's own CPU kernels: box:cpu re-dispatches into them on flagos memory, the
# CPU fallback copies to the CPU and back, "none" runs PyTorch's default for flagos (composite).
_CPU_KERNEL_BACKENDS = frozenset({"box:cpu", "cpu", "none"})


def cpu_kernels() -> bool:
    """Whether every operator on ``flagos`` runs ATen's own CPU kernels, so computed results are
    bit-identical to the CPU's.

    Decided from what the runtime and the route table declare, never from the vendor's name: the
    runtime declares ``CAP_HOST_ADDRESSABLE_MEMORY`` (CPU kernels can run on device memory) and the
    installed routes name only ``box:cpu`` and the CPU fallback (the ``sim`` vendor). A vendor's own
    kernels (CUDA's behind ``box:cuda``, FlagGems, native SDK kernels) round differently from the
    CPU's by a few ulps; results are then compared within :mod:`torch_fl.conformance.tolerances`.
    """
    if not int(_C.runtime_capabilities()) & int(_C.CAP_HOST_ADDRESSABLE_MEMORY):
        return False
    backends = {
        backend
        for _, default, rules in _C.router_routes()
        for backend in (default, *(b for _, b in rules))
    }
    return backends <= _CPU_KERNEL_BACKENDS


@contextlib.contextmanager
def fallback_counts() -> Iterator[dict[str, int]]:
    """Operators served by ATen's CPU fallback inside the block, with call counts.

    The dict is filled when the block exits; counts are deltas, so the process-wide counters are
    left as they were::

        with torch_fl.testing.fallback_counts() as counts:
            model(x)
        assert "aten::mm" not in counts
    """
    before = dict(_C.fallback_counts())
    counts: dict[str, int] = {}
    try:
        yield counts
    finally:
        after = dict(_C.fallback_counts())
        for op, n in after.items():
            delta = int(n) - int(before.get(op, 0))
            if delta > 0:
                counts[op] = delta


def native_vendor_fixtures(name: str) -> tuple[Callable[..., Any], ...]:
    """The pytest fixtures of a native vendor package's tests (``conftest.py``)::

        gcu, emu, _no_faults_left = native_vendor_fixtures("gcu")

    - ``<name>`` (session): ``torch.flagos``, failing unless that vendor is active with a device;
    - ``emu`` (session): the vendor's ``emulator`` module, faults cleared; skips the test where
      the package was built against a real SDK;
    - ``_no_faults_left`` (autouse): clears injected faults after every test.
    """
    import pytest

    package = f"torch_fl_{name}"

    @pytest.fixture(scope="session", name=name)
    def device() -> Any:
        import torch_fl

        if torch_fl.vendor().name != name:
            pytest.fail(f"these tests need the {name} vendor, got {torch_fl.vendor().name!r}")
        if not torch.flagos.is_available():
            pytest.fail(
                f"{name} vendor active but no device: " + torch_fl.vendors.active().absent_reason
            )
        return torch.flagos

    @pytest.fixture(scope="session", name="emu")
    def emu(request: Any) -> Any:
        request.getfixturevalue(name)
        emulator = importlib.import_module(f"{package}.emulator")
        if not emulator.available():
            product = importlib.import_module(f"{package}.sdk").SPEC["product"]
            pytest.skip(
                f"{package.replace('_', '-')} was built against a real {product}, not the emulator"
            )
        emulator.clear_faults()
        return emulator

    @pytest.fixture(autouse=True, name="_no_faults_left")
    def no_faults_left() -> Iterator[None]:
        yield
        try:
            emulator = importlib.import_module(f"{package}.emulator")
            if emulator.available():
                emulator.clear_faults()
        except Exception:  # noqa: BLE001 -- a package that failed to build reports elsewhere
            pass

    return device, emu, no_faults_left


def vendor_group_fixture(name: str) -> Callable[..., Any]:
    """A one-rank flagos process group on the ``vendor`` tier (the vendor's collective library
    through core's seat), for a native vendor package's tests (``conftest.py``)::

        group = vendor_group_fixture("gcu")

    A failure reaches the test as an exception, not the watchdog's teardown; the group is aborted
    after the test.
    """
    import datetime

    import pytest

    @pytest.fixture(name="group")
    def group(request: Any, monkeypatch: Any) -> Iterator[Any]:
        import torch.distributed as dist

        from torch_fl import distributed as fld

        request.getfixturevalue(name)
        monkeypatch.setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0")
        choice = fld.choose()
        assert choice.name == "vendor", choice.describe()
        pg = fld.ProcessGroupFlagos(
            dist.HashStore(), 0, 1, datetime.timedelta(seconds=30), choice=choice
        )
        yield pg
        pg.abort()

    return group


def run_rank_scripts(
    script: str,
    world: int,
    argv: Callable[[int], list[str]],
    env: dict[str, str],
    timeout: float = 60,
) -> list[dict]:
    """Runs ``script`` (Python source) as ``world`` processes, rank ``r`` with ``argv(r)``, and
    returns each rank's report: the JSON object its last output line holds (a rank that exits
    non-zero fails the test with its stderr). SDK-level tests of an emulator's collective library
    use it (ranks exchange the unique id through a file)."""
    import json
    import os
    import subprocess
    import sys

    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, *argv(r)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **env},
        )
        for r in range(world)
    ]
    reports = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=timeout)
        assert p.returncode == 0, stderr[-2000:]
        reports.append(json.loads(stdout.strip().splitlines()[-1]))
    return reports


_CAPTURED_ALL_REDUCE_RANK = """
import datetime, json, sys
import torch
import torch.distributed as dist

rank, world, store = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
device = torch.device("flagos", rank)
torch.flagos.set_device(device)
dist.init_process_group(
    "flagos", init_method=f"file://{store}", rank=rank, world_size=world,
    timeout=datetime.timedelta(seconds=60),
)
x = torch.ones(4, device=device)
warm = x.clone()
dist.all_reduce(warm)  # the communicator made outside the capture
g = torch.flagos.Graph()
with torch.flagos.graph(g):
    y = x * 2
    dist.all_reduce(y)
    z = y + 1
out = {"rank": rank, "replays": []}
for k in (1.0, 5.0, 7.0):
    x.fill_(k * (rank + 1))
    g.replay()
    out["replays"].append(z.cpu().tolist())
# The graph is still alive: destroying the group must not wait for launches that may come.
dist.destroy_process_group()
print(json.dumps(out))
"""


def check_all_reduce_captured_in_a_graph(store: str) -> None:
    """Two ranks (one device each) capture ``y = 2x; all_reduce(y); z = y + 1`` in a
    ``torch.flagos.graph``, replay it with new inputs, then destroy the group while the graph is
    alive: as NCCL's under CUDA graphs, the collective runs at each replay on the ranks' current
    values, and the destruction returns. ``store``: a path for the ranks' file store. A vendor
    whose runtime records graphs and whose collective library may be captured runs it."""
    assert torch.flagos.graphs.supported(), f"runtime {_C.runtime_name()!r} records no graphs"
    assert torch.flagos.device_count() >= 2, "needs two devices"
    reports = run_rank_scripts(
        _CAPTURED_ALL_REDUCE_RANK,
        2,
        lambda r: [str(r), "2", store],
        env={"OMP_NUM_THREADS": "1"},
        timeout=120,
    )
    for out in reports:
        # z = 2 * (k * 1 + k * 2) + 1 for k = 1, 5, 7
        assert out["replays"] == [[7.0] * 4, [31.0] * 4, [43.0] * 4], out
