"""Every operator the route table sends to FlagGems: flagos (the router's pick) vs box:cuda vs FlagGems.

For each overload the active route table routes to ``flaggems`` (for at least one dtype; read from
``torch_fl.routing.active_table().routes``), at two sizes (``--sizes``, default 64x64 and 4096x4096;
every tensor argument gets the shape; arguments are synthesised from the schema by
``torch_fl_cuda.survey.build_args``, as the survey does), three calls are timed:

- ``routed``: the overload on flagos tensors with the installed table (the router's pick:
  ``flaggems``, through the Python backend), called as user code calls it: ``torch.<name>``
  when that reaches exactly this overload (checked once with a dispatch mode), else
  ``torch.ops.aten.<name>.<overload>`` (which parses its arguments against the schema in Python
  first: 2-17 us more per call on the H200 host);
- ``box``: the same call with the overload forced to ``box:cuda`` (a table that includes the active
  one and adds ``<op> = box:cuda`` for every such overload, loaded once with
  ``torch_fl.routing.load_routes(path=...)``; the installed routes are switched with
  ``torch_fl._C.router_install`` between timed blocks);
- ``gems``: FlagGems as its own users call it, without flagos: the same user call on native CUDA
  tensors holding the same values inside ``flag_gems.use_gems(include=[<its function>])`` (FlagGems
  registers its kernel for the CUDA dispatch key; the scope is entered and left around each timed
  block, never inside it);
- ``direct``: the bare FlagGems callable (``torch_fl_cuda.flaggems.table()[op]``) called from
  Python on those CUDA tensors: no argument parsing by torch, no dispatcher. A floor that no
  operator reached through ATen (flagos, or FlagGems' own registration) can meet; reported as
  ``pick/bare``.

The dtype per overload is the first of float32, bfloat16, float16, int64, bool that the table sends
to ``flaggems`` (``--all-dtypes``: each of them). Every call is warmed up first (FlagGems' first call
may autotune for minutes: never timed). Then, for each of ``--reps`` repetitions, a block of calls
(sized for about ``--block-ms``) is timed per variant from a drained queue to a synchronize after
it, with the variant order reversed every repetition; the figure is the median per-call time. The
verdict is ``ok`` when ``routed`` is at most 5 % slower (``--tolerance``) than the better of ``box``
and ``gems`` (``direct`` stands in where ``gems`` could not run). The routes installed before the
run are reloaded at the end, even on error.

Only runs on the cuda vendor with the FlagGems backend on (``torch_fl_cuda.flaggems.status()``);
anywhere else it prints why it skips and exits 0. ``--time-budget`` (s) stops starting new operators
once spent; the rest are listed as not measured.

    python benchmarks/flaggems_ops.py [--sizes 64x64,4096x4096] [--reps 5] [--ops abs,mm] [--time-budget 50] [--quick] [--json out.json]

Target: the router's pick is never more than 5 % slower than the better of the two.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import torch
import torch_fl
from _bench_env import record_end
from _gpu_bench import add_common_args, start, timed_block
from _report import Table, write_record

DTYPE_ORDER = ("float32", "bfloat16", "float16", "int64", "bool")
VARIANTS = ("routed", "box", "gems", "direct")


def skip_reason(native: str) -> str | None:
    vendor = str(torch_fl.vendor().name)
    if vendor != "cuda":
        return f"the active vendor is {vendor!r}, not 'cuda' (FLAGOS_VENDOR=cuda on a GPU machine)"
    if native != "cuda":
        return "the direct FlagGems calls need native cuda tensors (--native cuda)"
    try:
        from torch_fl_cuda import flaggems
    except ImportError as exc:
        return f"torch_fl_cuda is not importable: {exc}"
    if not flaggems.status().startswith("on"):
        return f"the flaggems backend is {flaggems.status()}"
    table = torch_fl.routing.active_table()
    if table is None:
        return "no route table is installed"
    return None


def flaggems_ops(routes, backend: str, all_dtypes: bool) -> list[tuple[str, list[str]]]:
    """(full op name, dtypes to measure) for every route sending some dtype to ``backend``."""
    out = []
    for op, route in routes.items():
        dtypes = [d for d in DTYPE_ORDER if route.backend_for(d) == backend]
        if dtypes:
            out.append((op, dtypes if all_dtypes else dtypes[:1]))
    return sorted(out)


def _to(value, device):
    if isinstance(value, torch.Tensor):
        if value.dim() >= 2 and not value.is_contiguous():
            return value.transpose(-1, -2).contiguous().to(device).transpose(-1, -2)
        return value.to(device)
    if isinstance(value, list):
        return [_to(v, device) for v in value]
    return value


def packet_of(op: str):
    name, _, overload = op.removeprefix("aten::").partition(".")
    return getattr(getattr(torch.ops.aten, name), overload or "default")


def forced_specs(active, ops: list[str], box_backend: str) -> list:
    """The router specs of the active table with ``ops`` forced to ``box_backend`` (loaded and
    validated by load_routes from a temporary table that includes the active one)."""
    from torch_fl.routing import load_routes

    lines = [f"include {active.path}\n"] if active.path else []
    lines += [f"{op.removeprefix('aten::')} = {box_backend}\n" for op in ops]
    fd, path = tempfile.mkstemp(suffix=".conf", prefix="flaggems_ops_")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.writelines(lines)
        load_routes(path=path)
        return torch_fl._C.router_routes()
    finally:
        os.unlink(path)


def public_call(packet, args: list, kwargs: dict) -> Callable | None:
    """``torch.<name>`` if calling it with these arguments dispatches exactly ``packet``'s
    overload first (how user code reaches it), else None."""
    from torch.utils._python_dispatch import TorchDispatchMode

    fn = getattr(torch, packet._schema.name.split("::", 1)[-1], None)
    if not callable(fn):
        return None
    seen: list = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    try:
        with Record():
            fn(*args, **kwargs)
    except Exception:
        return None
    return fn if seen[:1] == [packet] else None


def measure(
    op: str,
    dtype_name: str,
    shape: tuple[int, ...],
    specs: dict[str, list],
    direct: Callable | None,
    native: torch.device,
    reps: int,
    block_ms: float,
) -> dict:
    from torch_fl_cuda.survey import NoProfile, build_args

    C = torch_fl._C
    packet = packet_of(op)
    dtype = getattr(torch, dtype_name)
    row: dict = {"op": op, "dtype": dtype_name, "shape": "x".join(map(str, shape))}
    try:
        args, kwargs = build_args(torch, packet._schema, shape, dtype, False)
    except NoProfile as exc:
        row["error"] = f"no profile: {exc}"
        return row
    fl = torch.device("flagos", 0)
    fa, fk = _to(args, fl), {k: _to(v, fl) for k, v in kwargs.items()}
    user = public_call(packet, fa, fk) or packet
    row["called_as"] = f"torch.{user.__name__}" if user is not packet else str(packet)
    calls: dict[str, tuple[Callable, torch.device]] = {
        "routed": (lambda: user(*fa, **fk), fl),
        "box": (lambda: user(*fa, **fk), fl),
    }
    if direct is not None:
        try:
            na, nk = _to(args, native), {k: _to(v, native) for k, v in kwargs.items()}
            calls["gems"] = (lambda: user(*na, **nk), native)
            calls["direct"] = (lambda: direct(*na, **nk), native)
        except Exception as exc:
            row["direct_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    else:
        row["direct_note"] = "no FlagGems callable under this name"
    installed = None

    def use(variant: str) -> None:
        nonlocal installed
        want = "box" if variant == "box" else "routed"
        if installed != want:
            C.router_install(specs[want])
            installed = want

    def run_block(v: str, fn: Callable, k: int, dev: torch.device) -> float:
        use(v)
        if v != "gems":
            return timed_block(fn, k, dev)[1]
        import flag_gems

        # FlagGems' registration lives only around the block: box:cuda must reach ATen's kernel.
        with flag_gems.use_gems(include=[direct.__name__]):
            return timed_block(fn, k, dev)[1]

    k: dict[str, int] = {}
    for v, (fn, dev) in list(calls.items()):
        try:
            run_block(v, fn, 2, dev)  # warm up: compilation, autotuning, allocator
            t = run_block(v, fn, 3, dev) / 3
            k[v] = max(1, min(200, int(block_ms * 1e-3 / max(t, 1e-7))))
        except Exception as exc:
            row[f"{v}_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
            del calls[v]
    if "routed" not in calls:
        use("routed")
        return row
    times: dict[str, list[float]] = {v: [] for v in calls}
    order = [v for v in VARIANTS if v in calls]
    for r in range(reps):
        for v in order if r % 2 == 0 else order[::-1]:
            fn, dev = calls[v]
            times[v].append(run_block(v, fn, k[v], dev) / k[v])
    use("routed")
    for v, ts in times.items():
        row[f"{v}_us"] = statistics.median(ts) * 1e6
    return row


def verdict(row: dict, tolerance: float) -> str:
    flaggems = "gems_us" if "gems_us" in row else "direct_us"
    others = [row[k] for k in ("box_us", flaggems) if k in row]
    if "routed_us" not in row or not others:
        return "error"
    row["best_other_us"] = min(others)
    row["routed_over_best"] = row["routed_us"] / row["best_other_us"]
    if "direct_us" in row:
        row["routed_over_bare"] = row["routed_us"] / row["direct_us"]
    return "ok" if row["routed_over_best"] <= 1.0 + tolerance else "slow"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default=None, help="shapes, e.g. 64x64,4096x4096 (the default)")
    p.add_argument("--reps", type=int, default=5, help="interleaved repetitions (default 5)")
    p.add_argument("--block-ms", type=float, default=5.0, help="target ms per timed block")
    p.add_argument("--ops", default="", help="comma-separated overloads (default: all routed)")
    p.add_argument("--all-dtypes", action="store_true", help="every dtype routed to flaggems")
    p.add_argument("--time-budget", type=float, default=50.0, help="s; then stop starting ops")
    p.add_argument("--tolerance", type=float, default=0.05, help="allowed slowdown (0.05 = 5%%)")
    p.add_argument("--backend", default="flaggems", help=argparse.SUPPRESS)
    p.add_argument("--box-backend", default="box:cuda", help=argparse.SUPPRESS)
    add_common_args(p)
    args = p.parse_args(argv)
    native, env = start(args)
    if args.sizes is None:
        args.sizes = "64x64,1024x1024" if args.quick else "64x64,4096x4096"
    if args.quick:
        args.reps = min(args.reps, 3)
        args.time_budget = min(args.time_budget, 20.0)
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",") if s]

    why = skip_reason(native)
    if why:
        print(f"flaggems_ops: skipped: {why}")
        write_record(args.json, "flaggems_ops", env, skipped=why)
        return 0
    from torch_fl.routing import load_routes
    from torch_fl_cuda import flaggems

    active = torch_fl.routing.active_table()
    env["flaggems"] = flaggems.status()
    env["route_table"] = str(active.path)
    print(f"flaggems backend: {flaggems.status()}; route table {active.path}")
    ops = flaggems_ops(active.routes, args.backend, args.all_dtypes)
    if args.ops:
        wanted = {o if o.startswith("aten::") else f"aten::{o}" for o in args.ops.split(",")}
        ops = [(o, d) for o, d in ops if o in wanted or o.removesuffix(".default") in wanted]
    if not ops:
        print(f"flaggems_ops: no overload of the active table is routed to {args.backend}")
        return 0
    print(
        f"{len(ops)} overloads routed to {args.backend}; sizes {args.sizes}; median of {args.reps} "
        f"interleaved blocks (~{args.block_ms:g} ms) per variant; budget {args.time_budget:g} s\n"
    )
    gems = flaggems.table()
    nd = torch.device("cuda", 0) if native == "cuda" else torch.device("cpu")
    rows: list[dict] = []
    skipped_ops: list[str] = []
    t0 = time.perf_counter()
    table = Table(
        "{:<34}{:<9}{:>10}{:>11.1f}{:>10.1f}{:>10.1f}{:>10.1f}{:>11.2f}{:>11.2f}  {}",
        *("op", "dtype", "shape", "routed us", "box us", "gems us", "bare us", "pick/best"),
        *("pick/bare", "verdict"),
    )
    figures = (
        "routed_us",
        "box_us",
        "gems_us",
        "direct_us",
        "routed_over_best",
        "routed_over_bare",
    )
    try:
        box_specs = forced_specs(active, [o for o, _ in ops], args.box_backend)
        load_routes()  # back to the default table; its specs are the "routed" variant
        specs = {"routed": torch_fl._C.router_routes(), "box": box_specs}
        table.header()
        for op, dtypes in ops:
            if time.perf_counter() - t0 > args.time_budget:
                skipped_ops.append(op)
                continue
            short = op.removeprefix("aten::")
            direct = gems.get(short) or gems.get(short.removesuffix(".default"))
            for dtype_name in dtypes:
                for shape in shapes:
                    try:
                        row = measure(
                            op, dtype_name, shape, specs, direct, nd, args.reps, args.block_ms
                        )
                    except Exception as exc:  # a failure on one op never ends the run
                        row = {"op": op, "dtype": dtype_name, "shape": "x".join(map(str, shape))}
                        row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
                    row["verdict"] = verdict(row, args.tolerance)
                    rows.append(row)
                    table.row(
                        *(short, dtype_name, row["shape"]),
                        *(row.get(k, "-") for k in figures),
                        row["verdict"],
                    )
    finally:
        load_routes()
    elapsed = time.perf_counter() - t0
    measured = [r for r in rows if r["verdict"] != "error"]
    slow = [r for r in rows if r["verdict"] == "slow"]
    bare = [r for r in measured if "routed_over_bare" in r]
    summary = {
        "overloads": len(ops),
        "measured_cases": len(measured),
        "ok_cases": len(measured) - len(slow),
        "slow_cases": [f"{r['op']} {r['dtype']} {r['shape']}" for r in slow],
        "error_cases": [
            f"{r['op']} {r['dtype']} {r['shape']}: "
            + str(next((r[k] for k in r if k.endswith("error")), ""))
            for r in rows
            if r["verdict"] == "error"
        ],
        "not_measured_budget": skipped_ops,
        "median_routed_over_best": (
            statistics.median(r["routed_over_best"] for r in measured) if measured else None
        ),
        "median_routed_over_bare": (
            statistics.median(r["routed_over_bare"] for r in bare) if bare else None
        ),
    }
    print(
        f"\nrouter's pick within {args.tolerance:.0%} of the better of box:cuda and FlagGems "
        f"called directly through its own registration (target: every case): "
        f"{summary['ok_cases']}/{len(measured)} cases"
    )
    if summary["median_routed_over_best"] is not None:
        print(f"median pick/best: {summary['median_routed_over_best']:.3f}")
    if summary["median_routed_over_bare"] is not None:
        print(
            f"median pick/bare (against the bare Python callable, no ATen): "
            f"{summary['median_routed_over_bare']:.3f}"
        )
    for s in summary["slow_cases"]:
        print(f"  slower: {s}")
    for s in summary["error_cases"]:
        print(f"  error: {s}")
    if skipped_ops:
        print(
            f"not measured (time budget spent): {len(skipped_ops)} overloads, e.g. {skipped_ops[:5]}"
        )
    record_end(env, elapsed)
    method = {
        "statistic": "median per-call time over interleaved blocks, per variant",
        "sizes": args.sizes,
        "reps": args.reps,
        "block_ms": args.block_ms,
        "tolerance": args.tolerance,
    }
    write_record(args.json, "flaggems_ops", env, method, rows=rows, summary=summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
