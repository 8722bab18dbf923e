"""One rank of a multi-process ``flagos`` distributed test (run by test_distributed.py).

    python _dist_worker.py <scenario> <rank> <world_size> <store_file> <out_dir>

Each scenario checks its results itself and exits non-zero with a traceback on any mismatch; the
test launches every rank as a subprocess with a deadline, so a hang is a failure, not a stuck CI.
Expected values are computed on CPU from data every rank can rebuild from its rank number.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import traceback

import torch
import torch.distributed as dist
from torch.torch_version import TorchVersion

# torch's gloo backend has all_to_all's list form (not only all_to_all_single) from torch 2.12.
GLOO_LIST_ALL_TO_ALL = TorchVersion(torch.__version__) >= (2, 12)
TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("FLAGOS_TEST_DIST_TIMEOUT", "30")))


def data(rank: int, n: int = 6, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return (torch.arange(n, dtype=torch.float64) + 10 * rank + 1).to(dtype)


def close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    from torch_fl.conformance import tolerances

    torch.testing.assert_close(actual.cpu(), expected.cpu(), **tolerances.COLLECTIVE.kwargs())


def init(rank: int, world: int, store_file: str, spec: str | None = "flagos") -> torch.device:
    import torch_fl  # noqa: F401  (import torch is enough; explicit so a broken install fails here)

    device = torch.device("flagos", rank % torch.flagos.device_count())
    torch.flagos.set_device(device)
    kwargs = {}
    if spec == "device_id":
        kwargs["device_id"] = device
        spec = None
    elif spec and spec.endswith("+device_id"):
        kwargs["device_id"] = device
        spec = spec.removesuffix("+device_id")
    dist.init_process_group(
        spec,
        init_method=f"file://{store_file}",
        rank=rank,
        world_size=world,
        timeout=TIMEOUT,
        **kwargs,
    )
    return device


def expected_tier() -> str:
    """The tier the vendor's declared profile must give (FLAGOS_DIST_TIER forces one)."""
    from torch_fl.distributed import profile

    forced = os.environ.get("FLAGOS_DIST_TIER")
    if forced:
        return forced
    from torch_fl.distributed import tiers

    _, declared = profile.vendor_profile()
    if declared != "cuda-abi" and tiers.vendor_library_path() is not None:
        return "vendor"  # the vendor's own collective library, before any gloo tier
    return {"cuda-abi": "nccl", "host-memory": "gloo-alias", "host-staged": "gloo-staged"}[declared]


# ---------------------------------------------------------------------------------------------
def scenario_collectives(
    rank: int, world: int, store_file: str, out: dict, spec: str = "flagos"
) -> None:
    from torch_fl import distributed as fld

    dev = init(rank, world, store_file, spec)
    choice = fld.tier()
    out["tier"] = choice.name
    out["skipped"] = choice.skipped
    assert choice.name == expected_tier(), choice.describe()
    gloo = choice.name.startswith("gloo")
    R = dist.ReduceOp
    ranks = range(world)

    # all_reduce: every reduce op gloo has, float and int.
    per_op = {
        R.SUM: lambda xs: sum(xs),
        R.PRODUCT: lambda xs: torch.stack(xs).prod(0),
        R.MIN: lambda xs: torch.stack(xs).min(0).values,
        R.MAX: lambda xs: torch.stack(xs).max(0).values,
        R.AVG: lambda xs: sum(xs) / len(xs),
    }
    for op, ref in per_op.items():
        t = data(rank).to(dev)
        dist.all_reduce(t, op=op)
        close(t, ref([data(r) for r in ranks]))
    bitwise = {
        R.BAND: lambda a, b: a & b,
        R.BOR: lambda a, b: a | b,
        R.BXOR: lambda a, b: a ^ b,
    }
    for op, ref in bitwise.items() if gloo else ():  # NCCL has no bitwise reductions
        t = data(rank, dtype=torch.int64).to(dev)
        dist.all_reduce(t, op=op)
        expected = data(0, dtype=torch.int64)
        for r in ranks[1:]:
            expected = ref(expected, data(r, dtype=torch.int64))
        close(t, expected)
    if choice.name == "nccl":  # NCCL's PREMUL_SUM: each rank scales its input first
        t = data(rank).to(dev)
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
        close(t, sum(data(r) for r in ranks) * 0.5)

    # Stream order: the input is produced by flagos work on a side stream just before the call.
    side = torch.flagos.Stream()
    with torch.flagos.stream(side):
        base = torch.full((1 << 16,), float(rank + 1), device=dev)
        t = (base * 2).add_(1)
        dist.all_reduce(t)  # collectives order against the current (side) stream
        t.mul_(0.5)
    side.synchronize()
    close(t, torch.full((1 << 16,), sum(2 * (r + 1) + 1 for r in ranks) * 0.5))

    # async_op=True: several in flight, waited on out of order.
    ts = [data(rank, n=1000 + i).to(dev) for i in range(3)]
    works = [dist.all_reduce(x, async_op=True) for x in ts]
    for w in reversed(works):
        w.wait()
    for i, x in enumerate(ts):
        close(x, sum(data(r, n=1000 + i) for r in ranks))
    fut = dist.all_reduce(ts[0], async_op=True).get_future()
    value = fut.wait()
    assert value[0].device == dev and value[0] is not None, value
    close(ts[0], sum(data(r, n=1000) for r in ranks) * world)

    # broadcast from the last rank.
    t = data(rank).to(dev)
    dist.broadcast(t, src=world - 1)
    close(t, data(world - 1))

    # all_gather (+ into_tensor), uneven-free.
    outs = [torch.empty(6, device=dev) for _ in ranks]
    dist.all_gather(outs, data(rank).to(dev))
    for r in ranks:
        close(outs[r], data(r))
    flat = torch.empty(6 * world, device=dev)
    dist.all_gather_into_tensor(flat, data(rank).to(dev))
    close(flat, torch.cat([data(r) for r in ranks]))

    # reduce_scatter (+ _tensor).
    chunks = [data(rank) * (j + 1) for j in ranks]
    o = torch.empty(6, device=dev)
    dist.reduce_scatter(o, [c.to(dev) for c in chunks])
    close(o, sum(data(r) for r in ranks) * (rank + 1))
    big = torch.cat(chunks).to(dev)
    o2 = torch.empty(6, device=dev)
    dist.reduce_scatter_tensor(o2, big)
    close(o2, sum(data(r) for r in ranks) * (rank + 1))

    # all_to_all_single (even and uneven splits) and all_to_all.
    inp = torch.arange(world * 2, dtype=torch.float32) + 100 * rank
    o = torch.empty(world * 2, device=dev)
    dist.all_to_all_single(o, inp.to(dev))
    close(
        o,
        torch.cat(
            [torch.arange(2 * rank, 2 * rank + 2, dtype=torch.float32) + 100 * r for r in ranks]
        ),
    )
    in_splits = [r + 1 for r in ranks]  # rank sends r+1 elements to rank r
    inp = torch.full((sum(in_splits),), float(rank), device=dev)
    out_splits = [rank + 1] * world
    o = torch.empty(sum(out_splits), device=dev)
    dist.all_to_all_single(o, inp, out_splits, in_splits)
    close(o, torch.cat([torch.full((rank + 1,), float(r)) for r in ranks]))
    ins = [torch.full((r + 1, 2), float(rank * 10 + r), device=dev) for r in ranks]
    outs = [torch.empty(rank + 1, 2, device=dev) for _ in ranks]
    dist.all_to_all(outs, ins)
    for r in ranks:
        close(outs[r], torch.full((rank + 1, 2), float(r * 10 + rank)))

    # gather / scatter / reduce.
    gl = [torch.empty(6, device=dev) for _ in ranks] if rank == 0 else None
    dist.gather(data(rank).to(dev), gl, dst=0)
    if rank == 0:
        for r in ranks:
            close(gl[r], data(r))
    o = torch.empty(6, device=dev)
    dist.scatter(o, [data(r).to(dev) * 3 for r in ranks] if rank == 0 else None, src=0)
    close(o, data(rank) * 3)
    t = data(rank).to(dev)
    dist.reduce(t, dst=0)
    if rank == 0:
        close(t, sum(data(r) for r in ranks))

    # send/recv ring, then batch_isend_irecv both ways.
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    if rank % 2 == 0:
        dist.send(data(rank).to(dev), nxt)
        r_t = torch.empty(6, device=dev)
        dist.recv(r_t, prv)
    else:
        r_t = torch.empty(6, device=dev)
        dist.recv(r_t, prv)
        dist.send(data(rank).to(dev), nxt)
    close(r_t, data(prv))
    recv_a, recv_b = torch.empty(6, device=dev), torch.empty(6, device=dev)
    send_a = dist.P2POp(dist.isend, data(rank).to(dev), nxt)
    get_a = dist.P2POp(dist.irecv, recv_a, prv)
    send_b = dist.P2POp(dist.isend, data(rank).to(dev) * 2, prv)
    get_b = dist.P2POp(dist.irecv, recv_b, nxt)
    # torch coalesces a batch only for plain ProcessGroup objects; for a Python group the ops
    # run one by one, so on NCCL (blocking pairwise p2p) the order is chosen not to deadlock.
    ops = [send_a, get_a, send_b, get_b] if rank % 2 == 0 else [get_a, send_a, get_b, send_b]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    close(recv_a, data(prv))
    close(recv_b, data(nxt) * 2)

    # The coalescing manager with a device (start/end on the backend), on device libraries.
    if choice.name == "vendor":
        a, b = data(rank).to(dev), data(rank, n=3).to(dev)
        with dist._coalescing_manager(device=dev, async_ops=True) as cm:
            dist.all_reduce(a)
            dist.all_reduce(b)
        cm.wait()
        close(a, sum(data(r) for r in ranks))
        close(b, sum(data(r, n=3) for r in ranks))

        # Functional collectives reach the group's C++ side directly.
        import torch.distributed._functional_collectives as fc

        summed = fc.all_reduce(data(rank).to(dev), "sum", dist.group.WORLD)
        close(summed, sum(data(r) for r in ranks))
        gathered = fc.all_gather_tensor(data(rank).to(dev), 0, dist.group.WORLD)
        close(gathered, torch.cat([data(r) for r in ranks]))

    # Coalesced all-reduce (deprecated API, what older DDP paths use) and DDP's broadcast.
    a, b = data(rank).to(dev), data(rank, n=3).to(dev)
    dist.all_reduce_coalesced([a, b])
    close(a, sum(data(r) for r in ranks))
    close(b, sum(data(r, n=3) for r in ranks))
    params = [data(rank).to(dev), data(rank, n=9).to(dev)]
    dist._broadcast_coalesced(dist.group.WORLD, params, 1 << 20, 0)
    close(params[0], data(0))
    close(params[1], data(0, n=9))

    # CPU tensors and Python objects through the same group; barrier.
    c = data(rank)
    dist.all_reduce(c)
    close(c, sum(data(r) for r in ranks))
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank})
    assert objs == [{"rank": r} for r in ranks], objs
    dist.barrier()

    # A subgroup of the even ranks gets its own flagos group.
    evens = list(range(0, world, 2))
    sub = dist.new_group(evens)
    if rank in evens:
        t = data(rank).to(dev)
        dist.all_reduce(t, group=sub)
        close(t, sum(data(r) for r in evens))
        assert fld.tier(sub).name == choice.name
    # Host staging is counted: only the staged tier copies through host memory.
    out["staged_bytes"] = fld.staged_bytes()
    if choice.name == "gloo-staged":
        assert fld.staged_bytes() > 0
    elif choice.name == "vendor":
        assert fld.staged_bytes() == 0, fld.staged_bytes()
    dist.destroy_process_group()
    out["ok"] = True


# ---------------------------------------------------------------------------------------------
def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def _batches(
    world: int, steps: int = 3, per_rank: int = 4
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    return [
        (
            torch.randn(world * per_rank, 8, generator=g),
            torch.randn(world * per_rank, 4, generator=g),
        )
        for _ in range(steps)
    ]


def _reference(world: int) -> list[torch.Tensor]:
    """Single process, full batch, CPU: what every data-parallel run must reproduce."""
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in _batches(world):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def _train(model: torch.nn.Module, rank: int, world: int, dev: torch.device) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in _batches(world):
        shard = slice(rank * 4, (rank + 1) * 4)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[shard].to(dev)), y[shard].to(dev))
        loss.backward()
        opt.step()


def _train_fsdp2(dev, rank: int, world: int, reference) -> torch.nn.Module:
    """FSDP2 with each Linear and the root sharded over the world: trained as _train does, the
    full parameters must equal the single-process reference. Returns the sharded model."""
    from torch.distributed.fsdp import fully_shard

    model = _model().to(dev)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    _train(model, rank, world, dev)
    for p, ref in zip([p.full_tensor() for p in model.parameters()], reference, strict=True):
        close(p.detach(), ref)
    return model


def scenario_training(
    rank: int, world: int, store_file: str, out: dict, ckpt_dir: str = ""
) -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    dev = init(rank, world, store_file)
    reference = _reference(world)

    # DDP: small bucket so the reducer issues several all-reduces during backward.
    ddp = DDP(_model().to(dev), bucket_cap_mb=0.0001)
    _train(ddp, rank, world, dev)
    for p, ref in zip(ddp.module.parameters(), reference, strict=True):
        close(p.detach(), ref)
    out["ddp"] = True

    model = _train_fsdp2(dev, rank, world, reference)
    out["fsdp2"] = True

    # DCP: save the sharded state, perturb, load, compare.
    import torch.distributed.checkpoint as dcp

    state = {"model": model.state_dict()}
    dcp.save(state, checkpoint_id=ckpt_dir)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    loaded = {"model": model.state_dict()}
    dcp.load(loaded, checkpoint_id=ckpt_dir)
    model.load_state_dict(loaded["model"])
    for p, ref in zip([p.full_tensor() for p in model.parameters()], reference, strict=True):
        close(p.detach(), ref)
    out["dcp"] = True
    dist.destroy_process_group()
    out["ok"] = True


def scenario_dcp_load(
    rank: int, world: int, store_file: str, out: dict, ckpt_dir: str = ""
) -> None:
    """Load a checkpoint another world size saved (FLAGOS_TEST_SAVED_WORLD ranks trained it) into
    a model sharded over this world: the full parameters are that run's reference."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.fsdp import fully_shard

    dev = init(rank, world, store_file)
    reference = _reference(int(os.environ["FLAGOS_TEST_SAVED_WORLD"]))
    model = _model().to(dev)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    state = {"model": model.state_dict()}
    dcp.load(state, checkpoint_id=ckpt_dir)
    model.load_state_dict(state["model"])
    for p, ref in zip([p.full_tensor() for p in model.parameters()], reference, strict=True):
        close(p.detach(), ref)
    out["dcp"] = True
    dist.destroy_process_group()
    out["ok"] = True


# ---------------------------------------------------------------------------------------------
def scenario_rank_dies(rank: int, world: int, store_file: str, out: dict) -> None:
    dev = init(rank, world, store_file)
    t = data(rank).to(dev)
    dist.all_reduce(t)  # everyone is connected
    if rank == world - 1:
        out["ok"] = True  # this rank's part: dying
        os._exit(0)  # dies before the next collective, without any goodbye
    scenario_rank_dies_tail(t, out)


def scenario_rank_hangs(rank: int, world: int, store_file: str, out: dict) -> None:
    dev = init(rank, world, store_file)
    t = data(rank).to(dev)
    dist.all_reduce(t)
    if rank == world - 1:
        import time

        out["ok"] = True
        time.sleep(float(os.environ["FLAGOS_TEST_HANG_S"]))  # alive, but never joins
        os._exit(0)
    scenario_rank_dies_tail(t, out)


def scenario_rank_never_joins(rank: int, world: int, store_file: str, out: dict) -> None:
    # The last rank makes the group but never issues a device collective: the others' first one
    # (which creates the communicator) fails within the group's timeout, naming it.
    dev = init(rank, world, store_file)
    if rank == world - 1:
        import time

        out["ok"] = True
        time.sleep(float(os.environ["FLAGOS_TEST_HANG_S"]))
        os._exit(0)
    scenario_rank_dies_tail(data(rank).to(dev), out)


def scenario_rank_dies_tail(t: torch.Tensor, out: dict) -> None:
    import time

    start = time.monotonic()
    try:
        dist.all_reduce(t)
        t.cpu()
    except Exception as exc:  # the error the test looks for
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["seconds"] = time.monotonic() - start
        out["ok"] = True
        os._exit(0)  # the group cannot be destroyed cleanly with a lost peer
    out["error"] = None
    # A training loop would go on here; a watchdog that takes the process down does so now.
    time.sleep(float(os.environ.get("FLAGOS_TEST_LINGER_S", "0")))


def scenario_mismatch(rank: int, world: int, store_file: str, out: dict) -> None:
    dev = init(rank, world, store_file)
    # Local shape errors: caught before any communication, naming op, device and vendor.
    try:
        dist.all_gather_into_tensor(torch.empty(5, device=dev), torch.empty(3, device=dev))
        raise AssertionError("all_gather_into_tensor accepted a wrong output size")
    except ValueError as exc:
        out["local"] = str(exc)
    # Shapes that differ across ranks: the inner library must refuse them, not hang.
    t = torch.ones(4 + rank * 4, device=dev)
    try:
        dist.all_reduce(t)
        t.cpu()
        out["cross"] = None
    except Exception as exc:
        out["cross"] = f"{type(exc).__name__}: {exc}"
    out["ok"] = True
    os._exit(0)


# ---------------------------------------------------------------------------------------------
# torch's own gloo groups: init_process_group("gloo") and the specs that name gloo for flagos.
def _gloo_group_tier(spec: str | None) -> str:
    """The tier flagos tensors must take on a group created with ``spec``."""
    if spec is None or "flagos:flagos" in spec:
        return expected_tier()  # a flagos group: the vendor's tier
    forced = os.environ.get("FLAGOS_DIST_TIER")
    if forced in ("gloo-alias", "gloo-staged"):
        return forced
    from torch_fl.distributed import profile

    return "gloo-alias" if profile.vendor_profile()[1] == "host-memory" else "gloo-staged"


def scenario_gloo_collectives(
    rank: int, world: int, store_file: str, out: dict, specs: str
) -> None:
    """For each of ``specs`` ("|"-separated; "default": no backend), one after the other in this
    process: every collective on flagos tensors gives exactly what it gives on CPU tensors."""
    out["tiers"] = {}
    for i, spec in enumerate(specs.split("|")):
        _gloo_collectives(
            rank, world, f"{store_file}.{i}", out, None if spec == "default" else spec
        )
        out["tiers"][spec] = out.pop("tier")
    out["ok"] = True


def _gloo_collectives(rank: int, world: int, store_file: str, out: dict, spec: str | None) -> None:
    from torch_fl import distributed as fld

    dev = init(rank, world, store_file, spec)
    cpu = torch.device("cpu")
    group = dist.group.WORLD
    out["tier"] = fld.tier().name
    assert out["tier"] == _gloo_group_tier(spec), fld.tier().describe()
    torch_gloo = bool(spec) and "flagos:flagos" not in spec.split("+")[0]
    if torch_gloo:
        # torch's own ProcessGroup with one gloo backend for every device, as for CUDA.
        assert type(group) is dist.ProcessGroup, type(group)
        assert isinstance(group._get_backend(cpu), dist.ProcessGroupGloo)
        assert isinstance(group._get_backend(dev), dist.ProcessGroupGloo)
    if spec == "gloo":
        assert dist.get_backend() == "gloo"
    ranks = range(world)
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    R = dist.ReduceOp

    def same(run) -> None:
        """``run(device)`` returns result tensors; flagos must equal CPU bit for bit."""
        on_cpu, on_flagos = run(cpu), run(dev)
        assert len(on_cpu) == len(on_flagos)
        for c, f in zip(on_cpu, on_flagos, strict=True):
            assert f.device == dev, f.device
            assert torch.equal(f.cpu(), c), (f.cpu(), c)

    for op in (R.SUM, R.PRODUCT, R.MIN, R.MAX, R.AVG):
        same(lambda d, op=op: [_all_reduce(data(rank).to(d), op)])
    for op in (R.BAND, R.BOR, R.BXOR):
        if out["tier"].startswith("gloo"):
            same(lambda d, op=op: [_all_reduce(data(rank, dtype=torch.int64).to(d), op)])
            continue
        # A device library (the vendor tier) refuses them as NCCL does, naming the reduction.
        try:
            _all_reduce(data(rank, dtype=torch.int64).to(dev), op)
            raise AssertionError(f"tier {out['tier']} accepted {op}")
        except ValueError as exc:
            assert "has no reduction" in str(exc) and str(op).split(".")[-1] in str(exc), exc
    close(_all_reduce(data(rank).to(dev), R.SUM), sum(data(r) for r in ranks))

    def broadcast(d):
        t = data(rank).to(d)
        dist.broadcast(t, src=world - 1)
        return [t]

    def all_gather(d):
        outs = [torch.empty(6, device=d) for _ in ranks]
        dist.all_gather(outs, data(rank).to(d))
        flat = torch.empty(6 * world, device=d)
        dist.all_gather_into_tensor(flat, data(rank).to(d))
        return [*outs, flat]

    def reduce_scatter(d):
        chunks = [(data(rank) * (j + 1)).to(d) for j in ranks]
        o, o2 = torch.empty(6, device=d), torch.empty(6, device=d)
        dist.reduce_scatter(o, chunks)
        dist.reduce_scatter_tensor(o2, torch.cat(chunks))
        return [o, o2]

    def all_to_all(d):
        o = torch.empty(world * 2, device=d)
        dist.all_to_all_single(o, (torch.arange(world * 2.0) + 100 * rank).to(d))
        in_splits = [r + 1 for r in ranks]
        uneven = torch.empty((rank + 1) * world, device=d)
        dist.all_to_all_single(
            uneven,
            torch.full((sum(in_splits),), float(rank), device=d),
            [rank + 1] * world,
            in_splits,
        )
        # gloo's list form takes one shape for every tensor (CPU or not)
        outs = [torch.empty(3, 2, device=d) for _ in ranks]
        ins = [torch.full((3, 2), rank * 10.0 + r, device=d) for r in ranks]
        if GLOO_LIST_ALL_TO_ALL or not torch_gloo:
            dist.all_to_all(outs, ins)
            return [o, uneven, *outs]
        # Before torch 2.12 torch's gloo has no list form, for CPU tensors neither: flagos raises
        # as CPU does.
        try:
            dist.all_to_all(outs, ins)
        except RuntimeError as e:
            assert "does not support alltoall" in str(e), e
        else:
            raise AssertionError(
                f"gloo ran all_to_all's list form on {d}, torch {torch.__version__}"
            )
        return [o, uneven]

    def rooted(d):
        gl = [torch.empty(6, device=d) for _ in ranks] if rank == 0 else None
        dist.gather(data(rank).to(d), gl, dst=0)
        sc = torch.empty(6, device=d)
        dist.scatter(sc, [data(r).to(d) * 3 for r in ranks] if rank == 0 else None, src=0)
        red = data(rank).to(d)
        dist.reduce(red, dst=0)
        return [*(gl or []), sc] + ([red] if rank == 0 else [])

    def point_to_point(d):
        got = torch.empty(6, device=d)
        if rank % 2 == 0:
            dist.send(data(rank).to(d), nxt)
            dist.recv(got, prv)
        else:
            dist.recv(got, prv)
            dist.send(data(rank).to(d), nxt)
        recv_a, recv_b = torch.empty(6, device=d), torch.empty(6, device=d)
        ops = [
            dist.P2POp(dist.isend, data(rank).to(d), nxt),
            dist.P2POp(dist.irecv, recv_a, prv),
            dist.P2POp(dist.isend, data(rank).to(d) * 2, prv),
            dist.P2POp(dist.irecv, recv_b, nxt),
        ]
        if rank % 2:
            ops = [ops[1], ops[0], ops[3], ops[2]]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        return [got, recv_a, recv_b]

    def coalesced(d):
        a, b = data(rank).to(d), data(rank, n=3).to(d)
        dist.all_reduce_coalesced([a, b])
        params = [data(rank).to(d), data(rank, n=9).to(d)]
        dist._broadcast_coalesced(group, params, 1 << 20, 0)
        return [a, b, *params]

    def in_flight(d):
        # async_op: several in flight, waited on out of order; the future yields the tensors.
        ts = [data(rank, n=1000 + i).to(d) for i in range(3)]
        works = [dist.all_reduce(x, async_op=True) for x in ts]
        b = data(rank).to(d)  # each in-flight call its own tensors: gloo may run them concurrently
        works.append(dist.broadcast(b, src=0, async_op=True))
        outs = [torch.empty(6, device=d) for _ in ranks]
        works.append(dist.all_gather(outs, data(rank).to(d), async_op=True))
        for w in reversed(works):
            assert w.wait()
        # wait() on a device-async group (nccl, vendor) only orders the current stream, as
        # ProcessGroupNCCL's does; once the device has caught up every work is complete.
        if d.type == "flagos":
            torch.flagos.synchronize()
        assert all(w.is_completed() for w in works)
        value = dist.all_reduce(ts[1], async_op=True).get_future().wait()
        assert value[0] is ts[1], value
        return [*ts, b, *outs]

    for run in (broadcast, all_gather, reduce_scatter, all_to_all, rooted, point_to_point):
        same(run)
    for run in (coalesced, in_flight):
        same(run)

    # Stream order: the input comes from flagos work on a side stream just before the call.
    side = torch.flagos.Stream()
    with torch.flagos.stream(side):
        t = (torch.full((1 << 16,), float(rank + 1), device=dev) * 2).add_(1)
        work = dist.all_reduce(t, async_op=True)
        work.wait()
        t.mul_(0.5)
    side.synchronize()
    close(t, torch.full((1 << 16,), sum(2 * (r + 1) + 1 for r in ranks) * 0.5))

    # The same local argument errors as on CPU.
    errors = []
    for d in (cpu, dev):
        try:
            dist.all_gather_into_tensor(torch.empty(5, device=d), torch.empty(3, device=d))
        except Exception as exc:
            errors.append(type(exc))
    assert len(errors) == 2 and errors[0] is errors[1], errors

    # Objects (CPU, or flagos where asked for), barriers.
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank})
    assert objs == [{"rank": r} for r in ranks], objs
    sent = [{"from": rank}, rank * 7]
    dist.broadcast_object_list(sent, src=world - 1, device=dev)
    assert sent == [{"from": world - 1}, (world - 1) * 7], sent
    dist.barrier()
    dist.barrier(device_ids=[dev.index])

    # Subgroups: the default backend and backend="gloo" by name.
    evens = list(range(0, world, 2))
    subgroups = [(list(ranks), dist.new_group(backend="gloo"))]
    if "device_id" not in str(spec):
        # With a bound device, torch has the ranks outside a new gloo group split the bound
        # device's backend, which gloo cannot (AttributeError: perform_nocolor_split), on CUDA
        # as here: only groups of every rank then.
        subgroups.append((evens, dist.new_group(evens)))
    for members, sub in subgroups:
        if rank in members:
            t = data(rank).to(dev)
            dist.all_reduce(t, group=sub)
            close(t, sum(data(r) for r in members))
    dist.destroy_process_group()


def _all_reduce(t: torch.Tensor, op) -> torch.Tensor:
    dist.all_reduce(t, op=op)
    return t


def scenario_gloo_training(rank: int, world: int, store_file: str, out: dict) -> None:
    """DDP (and FSDP2) over flagos under init_process_group("gloo") match a single-process run."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    dev = init(rank, world, store_file, "gloo")
    assert type(dist.group.WORLD) is dist.ProcessGroup
    reference = _reference(world)
    for as_view in (False, True):  # the reducer copies results into grads, or grads are views
        ddp = DDP(_model().to(dev), bucket_cap_mb=0.0001, gradient_as_bucket_view=as_view)
        _train(ddp, rank, world, dev)
        for p, ref in zip(ddp.module.parameters(), reference, strict=True):
            assert p.device == dev and p.grad.device == dev
            close(p.detach(), ref)
    out["ddp"] = True
    _train_fsdp2(dev, rank, world, reference)
    out["fsdp2"] = True
    dist.destroy_process_group()
    out["ok"] = True


def scenario_gloo_cpu_only(rank: int, world: int, store_file: str, out: dict) -> None:
    """A process that never touches flagos: plain gloo on CPU tensors. Imports nothing of
    torch-fl itself, so the test can run it with and without torch-fl and compare reports."""
    dist.init_process_group(
        "gloo", init_method=f"file://{store_file}", rank=rank, world_size=world, timeout=TIMEOUT
    )
    group = dist.group.WORLD
    ranks = range(world)
    t = data(rank)
    dist.all_reduce(t)
    outs = [torch.empty(6) for _ in ranks]
    dist.all_gather(outs, data(rank))
    b = data(rank)
    work = dist.broadcast(b, src=world - 1, async_op=True)
    work.wait()
    got = torch.zeros(6)
    if rank == 0:
        dist.send(data(rank), 1)
    elif rank == 1:
        dist.recv(got, 0)
    objs = [None] * world
    dist.all_gather_object(objs, rank)
    dist.barrier()
    sub = dist.new_group(list(ranks), backend="gloo")
    s = data(rank)
    dist.all_reduce(s, group=sub)
    out["report"] = {
        "group": type(group).__name__,
        "cpu_backend": type(group._get_backend(torch.device("cpu"))).__name__,
        "backend": str(dist.get_backend()),
        "object_device": dist.distributed_c10d._get_object_coll_device(group),
        "future": [x.tolist() for x in work.get_future().value()],
        "values": [x.tolist() for x in (t, *outs, b, got, s)],
        "objects": objs,
    }
    if "torch_fl" in sys.modules:
        out["flagos_initialized"] = bool(torch.flagos.is_initialized())
    dist.destroy_process_group()
    out["ok"] = True


def scenario_gloo_rank_dies(rank: int, world: int, store_file: str, out: dict) -> None:
    """Under plain gloo, a lost peer surfaces on flagos tensors: from the future of an
    asynchronous collective, and from the next collective."""
    import time

    dev = init(rank, world, store_file, "gloo")
    t = data(rank).to(dev)
    dist.all_reduce(t)
    if rank == world - 1:
        out["ok"] = True
        os._exit(0)
    start = time.monotonic()
    work = dist.all_reduce(t, async_op=True)
    errors = {}
    for name, step in (
        ("future", lambda: work.get_future().wait()),
        ("next", lambda: dist.all_reduce(t)),
    ):
        try:
            step()
            errors[name] = None
        except Exception as exc:
            errors[name] = f"{type(exc).__name__}: {exc}"
    out["errors"] = errors
    out["seconds"] = time.monotonic() - start
    out["ok"] = True
    os._exit(0)  # the group cannot be destroyed cleanly with a lost peer


SCENARIOS = {
    "collectives": scenario_collectives,
    "collectives_device_id": lambda *a: scenario_collectives(*a, spec="device_id"),
    "collectives_mixed_spec": lambda *a: scenario_collectives(*a, spec="cpu:gloo,flagos:flagos"),
    "training": lambda r, w, s, o: scenario_training(
        r, w, s, o, ckpt_dir=os.environ["FLAGOS_TEST_CKPT"]
    ),
    "dcp_load": lambda r, w, s, o: scenario_dcp_load(
        r, w, s, o, ckpt_dir=os.environ["FLAGOS_TEST_CKPT"]
    ),
    "rank_dies": scenario_rank_dies,
    "rank_hangs": scenario_rank_hangs,
    "rank_never_joins": scenario_rank_never_joins,
    "mismatch": scenario_mismatch,
    "gloo_training": scenario_gloo_training,
    "gloo_cpu_only": scenario_gloo_cpu_only,
    "gloo_rank_dies": scenario_gloo_rank_dies,
}


def main() -> None:
    scenario, rank, world, store_file, out_dir = sys.argv[1:6]
    if scenario.startswith("gloo_collectives[") and scenario.endswith("]"):
        specs = scenario.removeprefix("gloo_collectives[").removesuffix("]")
        SCENARIOS[scenario] = lambda *a: scenario_gloo_collectives(*a, specs=specs)
    rank, world = int(rank), int(world)
    out: dict = {"rank": rank}
    path = os.path.join(out_dir, f"rank{rank}.json")

    def write() -> None:
        with open(path, "w") as f:
            json.dump(out, f)

    import atexit

    atexit.register(write)
    _exit = os._exit

    def exit_writing(code: int) -> None:
        write()
        _exit(code)

    os._exit = exit_writing  # scenarios that must not run teardown still report
    try:
        SCENARIOS[scenario](rank, world, store_file, out)
    except BaseException:
        out["traceback"] = traceback.format_exc()
        write()
        traceback.print_exc()
        _exit(1)


if __name__ == "__main__":
    main()
