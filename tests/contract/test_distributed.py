"""torch.distributed on flagos: the ``flagos`` backend over every collective, DDP, FSDP2, DCP.

Multi-process tests launch one subprocess per rank (``_dist_worker.py``) with a deadline, on the
vendor under test: with ``sim`` every process gets its own virtual devices and the group runs gloo
on CPU alias views (``FLAGOS_DIST_TIER=gloo-staged`` runs the host-staged tier instead). The NCCL
tier (CUDA alias views over ProcessGroupNCCL) is tested by the same scenarios on two GPUs with the
``cuda`` vendor; see docs/distributed.md. The ``test_gloo_*`` cases run flagos tensors on torch's
own groups created with backend ``gloo``.
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

# The vendors without collectives of their own run core's staged gloo tier, over their copies
# (which test_copy.py covers); CI runs this module on sim only (nox -s test-<vendor> everywhere).
pytestmark = [
    pytest.mark.distributed,
    pytest.mark.skipif(not dist.is_available(), reason="this torch build has no torch.distributed"),
]
# Most of the module drives core's own machinery (tier choice, the Python group, gloo), the same
# on every vendor: CI runs those on sim only. What runs the vendor's own collective library (the
# vendor tier: HCCL on the emulated Ascend) runs on every vendor's contract suite.
neutral = pytest.mark.vendor_neutral

WORKER = Path(__file__).with_name("_dist_worker.py")
DEADLINE_S = 150
_NO_AUTOLOAD = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}


def _vendor() -> str:
    import torch_fl

    return str(torch_fl.vendor().name)


def launch(
    scenario: str,
    world: int,
    tmp_path: Path,
    env: dict[str, str] | None = None,
    deadline: float = DEADLINE_S,
) -> list[dict]:
    """Run ``scenario`` on ``world`` ranks; return each rank's report (asserting none failed)."""
    reports, codes, logs = run_ranks(scenario, world, tmp_path, env, deadline)
    for r, report in enumerate(reports):
        if codes[r] != 0 or not report.get("ok"):
            pytest.fail(f"{scenario}: rank {r}/{world} exited {codes[r]}:\n{logs[r][-6000:]}")
    return reports


def run_ranks(
    scenario: str,
    world: int,
    tmp_path: Path,
    env: dict[str, str] | None = None,
    deadline: float = DEADLINE_S,
) -> tuple[list[dict], list[int], list[str]]:
    """Run ``scenario`` on ``world`` ranks: each rank's report, exit code and output."""
    from torch_fl import distributed as fld

    tier = fld.choose({**os.environ, **(env or {})}).name
    count = torch.flagos.device_count()
    if tier in ("nccl", "flagcx") and count < world:
        pytest.skip(
            f"tier {tier} needs one device per rank: vendor {_vendor()!r} has {count}, the test "
            f"runs {world} ranks"
        )
    store = tmp_path / "store"
    out = tmp_path / "out"
    out.mkdir(parents=True)
    child_env = {**os.environ, **(env or {}), "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), scenario, str(r), str(world), str(store), str(out)],
            env=child_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(world)
    ]
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=deadline)[0])
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        logs = [p.communicate()[0] for p in procs]
        pytest.fail(
            f"{scenario} on {world} ranks did not finish in {deadline}s (a hang):\n"
            + "\n".join(f"--- rank {r}\n{log[-3000:]}" for r, log in enumerate(logs))
        )
    reports = []
    for r in range(world):
        path = out / f"rank{r}.json"
        reports.append(json.loads(path.read_text()) if path.exists() else {})
    return reports, [p.returncode for p in procs], logs


# ---------------------------------------------------------------------------------------------
# in-process: registration, tier choice, a one-rank group
# ---------------------------------------------------------------------------------------------


@neutral
def test_backend_registered(flagos):
    assert "flagos" in dist.Backend.backend_list
    assert dist.Backend.default_device_backend_map.get("flagos") == "flagos"
    assert dist.Backend.backend_capability["flagos"] == ["flagos"]


@neutral
def test_tier_choice_names_reasons(flagos, vendor_caps):
    import torch_fl
    from torch_fl import distributed as fld
    from torch_fl.distributed import profile as profiles

    choice = fld.choose()
    assert choice.name in fld.TIERS
    assert choice.vendor == _vendor()
    assert choice.profile == torch_fl.vendor().collective_profile()
    # Every tier before the chosen one is listed with a reason: never silent.
    assert list(choice.skipped) == list(fld.TIERS[: fld.TIERS.index(choice.name)])
    assert all(choice.skipped.values())
    assert choice.name in choice.describe()
    if os.environ.get("FLAGOS_DIST_TIER", "").strip():
        return  # a forced tier: every other tier's reason is that variable
    # The choice follows what is declared: the vendor's collective profile, the runtime's
    # capabilities, what is importable.
    if importlib.util.find_spec("flagcx") is None:
        assert "not importable" in choice.skipped["flagcx"]
    if choice.profile != profiles.CUDA_ABI and "nccl" in choice.skipped:
        assert choice.profile in choice.skipped["nccl"]
    host_memory = (
        choice.profile == profiles.HOST_MEMORY and "HOST_ADDRESSABLE_MEMORY" in vendor_caps
    )
    # The vendor's own collective library comes first wherever it loads; gloo only after.
    library = fld.tiers.vendor_library_path()
    if library is not None and choice.name not in ("flagcx", "nccl"):
        assert choice.name == "vendor" and choice.zero_copy, choice.describe()
        assert choice.view_device == "flagos"
    elif host_memory and "flagcx" in choice.skipped:
        assert choice.name == "gloo-alias" and choice.zero_copy


@neutral
def test_forced_tier(flagos, monkeypatch):
    from torch_fl import distributed as fld

    assert fld.choose({"FLAGOS_DIST_TIER": "gloo-staged"}).name == "gloo-staged"
    with pytest.raises(fld.TierUnavailableError, match="names no tier"):
        fld.choose({"FLAGOS_DIST_TIER": "carrier-pigeon"})
    import torch_fl
    from torch_fl.distributed import profile as profiles

    if torch_fl.vendor().collective_profile() != profiles.CUDA_ABI:
        with pytest.raises(
            fld.TierUnavailableError, match=re.escape(f"nccl cannot run with vendor {_vendor()!r}")
        ):
            fld.choose({"FLAGOS_DIST_TIER": "nccl"})


def _one_rank_group(tier: str | None = None):
    from torch_fl import distributed as fld

    env = {"FLAGOS_DIST_TIER": tier} if tier else {}
    return fld.ProcessGroupFlagos(
        dist.HashStore(), 0, 1, datetime.timedelta(seconds=10), choice=fld.choose(env)
    )


@neutral
@pytest.mark.parametrize("tier", [None, "gloo-staged"])
def test_one_rank_group_ops(flagos, tier):
    pg = _one_rank_group(tier)
    dev = torch.device("flagos", 0)
    t = torch.arange(6.0, device=dev)
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.MAX
    work = pg.allreduce([t], opts)
    assert work.wait()
    assert work.get_future().value()[0] is t  # the future hands back the flagos tensor
    out = torch.empty(6, device=dev)
    pg.all_gather_single(out, t * 2).wait()
    torch.testing.assert_close(out.cpu(), torch.arange(6.0) * 2)
    with pytest.raises(
        ValueError, match=r"all_gather_into_tensor on flagos:0 \(vendor .*\): output has 5 elements"
    ):
        pg.all_gather_single(torch.empty(5, device=dev), t)
    # Mixed devices: refused by the group (gloo tiers) or core's backend (vendor tier).
    with pytest.raises(ValueError, match=r"tensors on|every tensor must be on one flagos device"):
        pg.allreduce([t, torch.ones(2)])
    assert pg.name() == "flagos" and pg._get_backend_name() == "flagos"


def test_vendor_tier_one_rank_operations(flagos):
    # Every operation core's backend issues through the vendor's collective library, on a
    # one-rank group: results, one library call per operation, no byte staged through host
    # memory; 64-bit and complex reductions too (a library that cannot reduce a type has core
    # gather and reduce it on the device).
    from torch_fl import _C
    from torch_fl import distributed as fld

    if fld.choose().name != "vendor":
        pytest.skip(f"vendor {_vendor()!r} runs tier {fld.choose().name}: {fld.choose().reason}")
    pg = _one_rank_group()
    dev = torch.device("flagos", 0)
    staged = fld.staged_bytes()
    t = torch.arange(6.0, device=dev)
    pg.allreduce([t]).wait()
    assert t.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    out = torch.empty(6, device=dev)
    pg.all_gather_single(out, t * 2).wait()
    assert out.cpu().tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    rs = torch.empty(6, device=dev)
    pg.reduce_scatter_single(rs, t + 1).wait()
    assert rs.cpu().tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    a2a = torch.empty(6, device=dev)
    pg.all_to_all_single(a2a, t - 1, [], []).wait()
    assert a2a.cpu().tolist() == [-1.0, 0.0, 1.0, 2.0, 3.0, 4.0]
    bc = torch.full((3,), 7.0, device=dev)
    pg.broadcast([bc]).wait()
    assert bc.cpu().tolist() == [7.0] * 3
    pg.barrier().wait()  # no device named: the group's host barrier
    assert _C._vendor_backend_library_calls(pg._inner.device) == 5
    for dtype, value in ((torch.int64, 2**53 + 1), (torch.float64, 0.1), (torch.complex128, 1j)):
        x = torch.full((4,), value, dtype=dtype, device=dev)
        pg.allreduce([x]).wait()
        assert torch.equal(x.cpu(), torch.full((4,), value, dtype=dtype)), dtype
    assert fld.staged_bytes() == staged
    pg.abort()


@neutral
def test_log_dist(flagos, monkeypatch, capsys):
    monkeypatch.setenv("FLAGOS_LOG", "dist")
    _one_rank_group()
    err = capsys.readouterr().err
    assert "[flagos dist] group rank 0/1: tier" in err


@neutral
def test_log_dist_is_a_known_category():
    import warnings

    from torch_fl.routing import environment

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        environment.log_flags({"FLAGOS_LOG": "dist,dispatch"})


# ---------------------------------------------------------------------------------------------
# multi-process
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("world", [2, 4])
def test_collectives(flagos, tmp_path, world):
    reports = launch("collectives", world, tmp_path)
    assert {r["tier"] for r in reports} == {reports[0]["tier"]}


@neutral
def test_collectives_host_staged(flagos, tmp_path):
    reports = launch("collectives", 2, tmp_path, env={"FLAGOS_DIST_TIER": "gloo-staged"})
    assert reports[0]["tier"] == "gloo-staged"


@neutral
@pytest.mark.parametrize("spec", ["collectives_device_id", "collectives_mixed_spec"])
def test_init_forms(flagos, tmp_path, spec):
    launch(spec, 2, tmp_path)


def test_ddp_fsdp2_dcp(flagos, tmp_path):
    reports = launch("training", 2, tmp_path, env={"FLAGOS_TEST_CKPT": str(tmp_path / "ckpt")})
    assert all(r["ddp"] and r["fsdp2"] and r["dcp"] for r in reports)


@neutral
def test_dcp_saved_on_4_loads_on_2(flagos, tmp_path):
    ckpt = str(tmp_path / "ckpt")
    saved = launch("training", 4, tmp_path / "save", env={"FLAGOS_TEST_CKPT": ckpt})
    assert all(r["ddp"] and r["fsdp2"] and r["dcp"] for r in saved)
    env = {"FLAGOS_TEST_CKPT": ckpt, "FLAGOS_TEST_SAVED_WORLD": "4"}
    loaded = launch("dcp_load", 2, tmp_path / "load", env=env)
    assert all(r["dcp"] for r in loaded)


@neutral
def test_rank_dies_takes_survivor_down(flagos, tmp_path):
    # Without blocking wait a device library's failure surfaces asynchronously: as
    # ProcessGroupNCCL's watchdog does, the survivor's process is taken down with the error
    # rather than computing on the failed collective's undefined result (the gloo tiers raise).
    from torch_fl import distributed as fld

    if fld.choose().name != "vendor":
        pytest.skip(
            f"tier {fld.choose().name}: gloo raises in wait() (test_rank_dies_mid_collective)"
        )
    env = {
        "FLAGOS_TEST_DIST_TIMEOUT": "5",
        "TORCH_NCCL_BLOCKING_WAIT": "0",
        "FLAGOS_TEST_LINGER_S": "20",
    }
    reports, codes, logs = run_ranks("rank_dies", 2, tmp_path, env=env, deadline=90)
    assert codes[0] != 0 and not reports[0].get("error"), (codes, logs[0][-3000:])
    assert "[flagos dist] rank 0/2 on flagos:0 (vendor" in logs[0], logs[0][-3000:]
    assert "taken down" in logs[0] and "TORCH_NCCL_BLOCKING_WAIT=1" in logs[0], logs[0][-3000:]


def test_rank_dies_mid_collective(flagos, tmp_path):
    # TORCH_NCCL_BLOCKING_WAIT: on the nccl tier wait() then raises instead of the watchdog
    # tearing the process down (gloo ignores it).
    env = {"FLAGOS_TEST_DIST_TIMEOUT": "10", "TORCH_NCCL_BLOCKING_WAIT": "1"}
    reports = launch("rank_dies", 2, tmp_path, env=env, deadline=90)
    error = reports[0]["error"]
    assert error, "the surviving rank got no error"
    assert "flagos all_reduce on flagos:0" in error and "vendor" in error, error
    assert reports[0]["seconds"] < 60


@neutral
def test_rank_hangs_mid_collective(flagos, tmp_path):
    # The peer is alive but never joins: the survivor gets the group's timeout (4 s), not a hang.
    env = {
        "FLAGOS_TEST_DIST_TIMEOUT": "4",
        "FLAGOS_TEST_HANG_S": "9",
        "TORCH_NCCL_BLOCKING_WAIT": "1",
    }
    reports = launch("rank_hangs", 2, tmp_path, env=env, deadline=90)
    error = reports[0]["error"]
    assert error and "flagos all_reduce on flagos:0" in error, error
    assert "timeout" in error.lower() or "timed out" in error.lower(), error
    assert 3 < reports[0]["seconds"] < 15, reports[0]


def test_rank_never_joins(flagos, tmp_path):
    # A library's init blocks until every rank joined (NCCL's and ECCL's have no timeout of their
    # own): a rank that never arrives is an error within the group's timeout, not a hang.
    env = {
        "FLAGOS_TEST_DIST_TIMEOUT": "4",
        "FLAGOS_TEST_HANG_S": "12",
        "TORCH_NCCL_BLOCKING_WAIT": "1",
    }
    reports = launch("rank_never_joins", 2, tmp_path, env=env, deadline=90)
    error = reports[0]["error"]
    assert error and "flagos" in error, error
    assert 3 < reports[0]["seconds"] < 11, reports[0]
    from torch_fl import distributed as fld

    if fld.choose().name == "vendor":
        assert "rank(s) 1 never joined the communicator within 4000 ms" in error, error


@neutral
def test_mismatched_shapes(flagos, tmp_path):
    # The cross-rank check is opt-in on the nccl tier (docs/distributed.md); on gloo it is default.
    env = {"FLAGOS_TEST_DIST_TIMEOUT": "10", "FLAGOS_DIST_CHECK_SHAPES": "1"}
    reports = launch("mismatch", 2, tmp_path, env=env, deadline=90)
    for r in reports:
        assert re.search(
            r"all_gather_into_tensor on flagos:\d \(vendor .*\): output has 5 elements", r["local"]
        ), r
        assert r["cross"] and "flagos all_reduce" in r["cross"], r
        assert "differ across ranks (rank 0: float32[4]; rank 1: float32[8])" in r["cross"], r


# ---------------------------------------------------------------------------------------------
# torch's own gloo groups: init_process_group("gloo") with flagos tensors
# ---------------------------------------------------------------------------------------------


@neutral
def test_gloo_covers_flagos(flagos):
    # "gloo" expands to every device in its capability list, as it does to cuda.
    assert "flagos" in dist.Backend.backend_capability["gloo"]
    assert dist.Backend.default_device_backend_map["flagos"] == "flagos"


@neutral
def test_gloo_tier_choice(flagos):
    from torch_fl import distributed as fld

    choice = fld.choose(within=fld.GLOO_TIERS)
    assert choice.name in fld.GLOO_TIERS
    assert "backend gloo" in choice.skipped["flagcx"] and "backend gloo" in choice.skipped["nccl"]
    # A tier forced for flagos groups does not apply to a gloo group; a gloo tier does.
    forced = fld.choose({"FLAGOS_DIST_TIER": "nccl"}, within=fld.GLOO_TIERS)
    assert forced.name in fld.GLOO_TIERS and "FLAGOS_DIST_TIER=nccl" in forced.skipped["nccl"]
    staged = fld.choose({"FLAGOS_DIST_TIER": "gloo-staged"}, within=fld.GLOO_TIERS)
    assert staged.name == "gloo-staged"


# One process after the other: "gloo" alone; a spec naming gloo for flagos, with a bound device;
# no backend (torch picks flagos for the flagos accelerator: a flagos group, whose CPU tensors go
# to its gloo). The flagos group of "cpu:gloo,flagos:flagos" runs in test_init_forms.
GLOO_SPECS = ("gloo", "cpu:gloo,flagos:gloo+device_id", "default")


@neutral
def test_gloo_collectives_match_cpu(flagos, tmp_path):
    reports = launch(f"gloo_collectives[{'|'.join(GLOO_SPECS)}]", 2, tmp_path)
    assert list(reports[0]["tiers"]) == list(GLOO_SPECS)
    assert all(r["tiers"] == reports[0]["tiers"] for r in reports)


@neutral
def test_gloo_collectives_host_staged(flagos, tmp_path):
    from torch_fl import distributed as fld

    if fld.choose(within=fld.GLOO_TIERS).name == "gloo-staged":
        pytest.skip("gloo groups already run gloo-staged here (test_gloo_collectives_match_cpu)")
    reports = launch("gloo_collectives[gloo]", 2, tmp_path, env={"FLAGOS_DIST_TIER": "gloo-staged"})
    assert reports[0]["tiers"] == {"gloo": "gloo-staged"}


@neutral
def test_gloo_ddp_fsdp2(flagos, tmp_path):
    reports = launch("gloo_training", 2, tmp_path)
    assert all(r["ddp"] and r["fsdp2"] for r in reports)


@neutral
def test_gloo_rank_dies(flagos, tmp_path):
    reports = launch("gloo_rank_dies", 2, tmp_path, env={"FLAGOS_TEST_DIST_TIMEOUT": "10"})
    errors = reports[0]["errors"]
    for name in ("future", "next"):
        assert errors[name] and "flagos all_reduce on flagos:0" in errors[name], errors
        assert "backend gloo" in errors[name], errors
    assert reports[0]["seconds"] < 30, reports[0]


@neutral
def test_gloo_cpu_only_unchanged(flagos, tmp_path):
    # The same CPU program with and without torch-fl loaded reports the same group and results.
    with_fl = launch("gloo_cpu_only", 2, tmp_path / "with")
    assert not any(r["flagos_initialized"] for r in with_fl), with_fl
    without = launch("gloo_cpu_only", 2, tmp_path / "without", env=_NO_AUTOLOAD)
    assert [r["report"] for r in with_fl] == [r["report"] for r in without]
    assert with_fl[0]["report"]["group"] == "ProcessGroup"
    assert with_fl[0]["report"]["cpu_backend"] == "ProcessGroupGloo"
