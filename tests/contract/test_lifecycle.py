"""Process lifecycle and runtime faults: forked children, runtime failures on autograd's device
threads and at exit, pinned blocks whose free fails, device queries torch.accelerator makes, and
messages that name the device. Programs that could hang or abort run in a child interpreter with a
time limit, so a failure is reported, never a stuck or killed test run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

pytestmark = [pytest.mark.lifecycle, pytest.mark.usefixtures("flagos")]

CHILD_TIMEOUT_S = 60


def _run(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = dict(os.environ)
    full_env.update(env or {})
    try:
        return subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
            env=full_env,
        )
    except subprocess.TimeoutExpired as exc:  # a hang is the failure being tested for
        pytest.fail(
            f"the child interpreter hung for {CHILD_TIMEOUT_S}s:\n{exc.stdout}\n{exc.stderr}"
        )


# ---------------------------------------------------------------------------------------------
# fork
# ---------------------------------------------------------------------------------------------

FORK_CHILD = """
    import os, sys, torch
    import torch_fl  # noqa: F401
    x = torch.arange(6.0, device="flagos")
    torch.flagos.synchronize()
    pid = os.fork()
    if pid == 0:
        try:
            {use}
        except RuntimeError as exc:
            ok = "forked subprocess" in str(exc)
            print("CHILD-RAISED", "named" if ok else "unnamed", str(exc).splitlines()[0], flush=True)
            os._exit(0 if ok else 3)
        print("CHILD-NO-ERROR", flush=True)
        os._exit(4)
    _, status = os.waitpid(pid, 0)
    print("CHILD-STATUS", os.waitstatus_to_exitcode(status), flush=True)
    print("PARENT", (x * 2).sum().item(), flush=True)
"""


@pytest.mark.parametrize(
    "use",
    [
        "x.cpu()",
        "(x * 2).sum().item()",
        "torch.ones(3, device='flagos')",
        "torch.flagos.synchronize()",
        "x.add_(1)",
    ],
    ids=["cpu", "compute-item", "new-tensor", "synchronize", "in-place"],
)
def test_forked_child_raises_instead_of_hanging(use):
    """Every use of flagos in a forked child raises CUDA's 'forked subprocess' error; the parent
    keeps working."""
    r = _run(FORK_CHILD.format(use=use))
    assert "CHILD-STATUS 0" in r.stdout, r.stdout + r.stderr
    assert "CHILD-RAISED named" in r.stdout, r.stdout + r.stderr
    assert "PARENT 30.0" in r.stdout, r.stdout + r.stderr


def test_init_and_is_initialized(flagos):
    assert hasattr(flagos, "init") and hasattr(flagos, "is_initialized")
    flagos.init()
    assert flagos.is_initialized()
    r = _run(
        """
        import torch
        import torch_fl  # noqa: F401
        before = torch.flagos.is_initialized()
        torch.flagos.init()
        print("STATE", before, torch.flagos.is_initialized())
        """
    )
    assert "STATE False True" in r.stdout, r.stdout + r.stderr


def test_fork_before_any_use_leaves_the_child_free(flagos):
    """A parent that only imported torch_fl forks a child that can use flagos itself."""
    r = _run(
        """
        import os, torch
        import torch_fl  # noqa: F401
        pid = os.fork()
        if pid == 0:
            ok = (torch.ones(3, device="flagos") * 2).sum().item() == 6.0
            os._exit(0 if ok else 5)
        _, status = os.waitpid(pid, 0)
        print("CHILD-STATUS", os.waitstatus_to_exitcode(status))
        """
    )
    assert "CHILD-STATUS 0" in r.stdout, r.stdout + r.stderr


# ---------------------------------------------------------------------------------------------
# runtime failures on autograd's device threads and at exit
# ---------------------------------------------------------------------------------------------

BACKWARD_WITH_FAULT = """
    import torch
    import torch_fl  # noqa: F401
    from torch_fl.runtimes import sim
    x = torch.randn(8, 8, device="flagos", requires_grad=True)
    y = (x * 3).sum()
    sim.inject_fault("set_device", nth=1)
    try:
        y.backward()
        print("BACKWARD-OK")
    except RuntimeError as exc:
        print("BACKWARD-RAISED", "set_device" in str(exc))
    sim.clear_faults()
    z = torch.randn(4, device="flagos", requires_grad=True)
    (z * 2).sum().backward()
    print("AFTER", z.grad.sum().item())
"""


def test_runtime_failure_during_backward_is_an_exception(simctl):
    r = _run(BACKWARD_WITH_FAULT)
    assert r.returncode == 0, f"child died with {r.returncode}:\n{r.stdout}\n{r.stderr}"
    assert "AFTER 8.0" in r.stdout, r.stdout + r.stderr
    assert "BACKWARD-RAISED True" in r.stdout or "BACKWARD-OK" in r.stdout, r.stdout


def test_runtime_failure_at_exit_is_not_an_abort(simctl):
    r = _run(
        """
        import torch
        import torch_fl  # noqa: F401
        x = torch.ones(4, device="flagos")
        print("DONE", x.sum().item())
        """,
        env={"FLAGOS_SIM_FAULTS": "set_device:1"},
    )
    assert r.returncode == 0, f"child exited with {r.returncode}:\n{r.stdout}\n{r.stderr}"
    assert "DONE 4.0" in r.stdout, r.stdout + r.stderr


# ---------------------------------------------------------------------------------------------
# pinned memory whose free fails
# ---------------------------------------------------------------------------------------------


def test_failed_host_free_keeps_the_block(simctl, require_cap):
    require_cap("PINNED_HOST_MEMORY")
    empty = getattr(torch.accelerator, "empty_host_cache", None)
    if empty is None:
        pytest.skip(f"torch {torch.__version__} has no torch.accelerator.empty_host_cache")
    empty()
    held = torch.flagos.host_memory_stats()["allocated_bytes.current"]
    t = torch.empty(1 << 20).pin_memory()  # 4 MiB, cached by the host allocator once freed
    del t
    cached = torch.flagos.host_memory_stats()["allocated_bytes.current"]
    assert cached >= held + (4 << 20)
    with simctl.fault("host_free", nth=1):
        with pytest.raises(RuntimeError, match="host_free"):
            empty()
    # Still owned and still counted: the next empty_host_cache frees it.
    assert torch.flagos.host_memory_stats()["allocated_bytes.current"] == cached
    frees = torch.flagos.host_memory_stats()["num_host_free"]
    empty()
    stats = torch.flagos.host_memory_stats()
    assert stats["allocated_bytes.current"] == held, stats
    assert stats["num_host_free"] > frees, stats


# ---------------------------------------------------------------------------------------------
# queries torch.accelerator makes, and messages
# ---------------------------------------------------------------------------------------------


def test_accelerator_device_capability(flagos):
    get = getattr(torch.accelerator, "get_device_capability", None)
    if get is None:
        pytest.skip(f"torch {torch.__version__} has no torch.accelerator.get_device_capability")
    caps = get("flagos:0")
    assert torch.float32 in caps["supported_dtypes"]
    assert caps == get(0)


def test_event_failures_name_the_device(simctl):
    e = torch.flagos.Event()
    e.record()
    with simctl.fault("event_synchronize", nth=1):
        with pytest.raises(RuntimeError, match=r"flagos:0"):
            e.synchronize()
    with simctl.fault("event_query", nth=1):
        with pytest.raises(RuntimeError, match=r"flagos:0"):
            e.query()


def test_small_tensors_fit_a_small_device(simctl):
    """FLAGOS_SIM_MEMORY=1M holds a 12-byte tensor: the allocator's rounding (2 MiB segments)
    respects the device's capacity."""
    r = _run(
        """
        import torch
        import torch_fl  # noqa: F401
        x = torch.ones(3, device="flagos")
        print("SUM", x.sum().item())
        """,
        env={"FLAGOS_SIM_MEMORY": "1M"},
    )
    assert "SUM 3.0" in r.stdout, r.stdout + r.stderr
