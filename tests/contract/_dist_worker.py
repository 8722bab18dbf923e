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

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("FLAGOS_TEST_DIST_TIMEOUT", "30")))


def data(rank: int, n: int = 6, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return (torch.arange(n, dtype=torch.float64) + 10 * rank + 1).to(dtype)


def close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    from torch_fl.conformance import tolerances

    torch.testing.assert_close(actual.cpu(), expected.cpu(), **tolerances.COLLECTIVE.kwargs())


def init(rank: int, world: int, store_file: str, spec: str = "flagos") -> torch.device:
    import torch_fl  # noqa: F401  (import torch is enough; explicit so a broken install fails here)

    device = torch.device("flagos", rank % torch.flagos.device_count())
    torch.flagos.set_device(device)
    kwargs = {}
    if spec == "device_id":
        kwargs["device_id"] = device
        spec = None
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
    _, declared = profile.vendor_profile()
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


def scenario_training(
    rank: int, world: int, store_file: str, out: dict, ckpt_dir: str = ""
) -> None:
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel as DDP

    dev = init(rank, world, store_file)
    reference = _reference(world)

    # DDP: small bucket so the reducer issues several all-reduces during backward.
    ddp = DDP(_model().to(dev), bucket_cap_mb=0.0001)
    _train(ddp, rank, world, dev)
    for p, ref in zip(ddp.module.parameters(), reference, strict=True):
        close(p.detach(), ref)
    out["ddp"] = True

    # FSDP2: each Linear and the root sharded over the world.
    model = _model().to(dev)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    _train(model, rank, world, dev)
    full = [p.full_tensor().detach() for p in model.parameters()]
    for p, ref in zip(full, reference, strict=True):
        close(p, ref)
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


SCENARIOS = {
    "collectives": scenario_collectives,
    "collectives_device_id": lambda *a: scenario_collectives(*a, spec="device_id"),
    "collectives_mixed_spec": lambda *a: scenario_collectives(*a, spec="cpu:gloo,flagos:flagos"),
    "training": lambda r, w, s, o: scenario_training(
        r, w, s, o, ckpt_dir=os.environ["FLAGOS_TEST_CKPT"]
    ),
    "rank_dies": scenario_rank_dies,
    "rank_hangs": scenario_rank_hangs,
    "mismatch": scenario_mismatch,
}


def main() -> None:
    scenario, rank, world, store_file, out_dir = sys.argv[1:6]
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
