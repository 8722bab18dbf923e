"""The FlagGems survey: is each FlagGems kernel right, and is it faster than torch's own CUDA kernel?

::

    python -m torch_fl_cuda.survey [--jobs 12] [--time-budget 600] [--ops abs,mm] [--output PATH]

For every overload FlagGems claims (``_FULL_CONFIG``) that a route may name, the survey builds
profiles from the overload's schema (float32/float16/bfloat16/int64/bool; 1-d, 2-d, 2-d strided,
3-d and 4-d shapes, an ``out=`` tensor where the schema has one, and one large 2-d shape so
launch-grid limits show), runs each profile on the CPU (the reference) and on ``flagos`` twice:
once with the overload routed to ``flaggems`` and once routed to ``box:cuda``, and compares both
to the CPU result with per-dtype tolerances. A profile the CPU itself rejects is not a profile of
that overload. Random operators are checked for shape, dtype and finiteness only.

Phase 1 (correctness) runs in ``--jobs`` worker processes on the one GPU, because most of its time
is Triton compiling FlagGems' kernels on the host; an overload that takes longer than
``--op-timeout`` (autotuning) is recorded as ``timeout``. Phase 2 (timing) runs in this process
alone, from the warm Triton cache, for the overloads correct on at least one dtype: per dtype, the
median time of a call through each route, on the largest and a small profile.

The verdict per overload is ``flaggems`` when at least one dtype was correct on every profile and not
slower than ``box:cuda`` by more than ``--noise`` (``flaggems_dtypes`` lists those dtypes), else one
of ``wrong``, ``slower``, ``error``, ``timeout``, ``no-profile`` or ``unsurveyed`` (budget ran
out). The route generator reads the JSON: ``python -m torch_fl_cuda.routing.generate``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

DTYPES = ("float32", "float16", "bfloat16", "int64", "bool")
#: Shapes per profile; every tensor argument gets the shape (square trailing dims so matrix
#: operators accept the same-shape rule).
SHAPES: dict[str, tuple[int, ...]] = {
    "1d": (1023,),
    "2d": (64, 64),
    "2d-strided": (64, 64),  # a transposed view
    "3d": (4, 32, 32),
    "4d": (2, 3, 16, 16),
    "large": (4096, 4096),
}
RANDOM_WORDS = (
    "rand",
    "uniform",
    "normal",
    "bernoulli",
    "dropout",
    "multinomial",
    "exponential",
    "geometric",
    "cauchy",
    "log_normal",
    "random",
)
TOL = {
    "float32": (1e-4, 1e-4),
    "float16": (1e-2, 1e-2),
    "bfloat16": (5e-2, 5e-2),
}


def _is_random(op: str) -> bool:
    base = op.partition(".")[0]
    return any(w in base for w in RANDOM_WORDS)


# --------------------------------------------------------------------------------------------
# argument synthesis from the schema
# --------------------------------------------------------------------------------------------


class NoProfile(Exception):
    """The schema has an argument the generic profiles cannot fill."""


def _tensor(torch, shape, dtype, gen, strided=False):
    if dtype == torch.bool:
        t = torch.rand(shape, generator=gen) > 0.5
    elif dtype == torch.int64:
        t = torch.randint(-8, 9, shape, generator=gen)
    else:
        t = (torch.rand(shape, generator=gen) * 4 - 2).to(dtype)
    if strided and t.dim() >= 2:
        t = t.transpose(-1, -2).contiguous().transpose(-1, -2)
    return t


def build_args(torch, schema, shape, dtype, strided, seed=0):
    """Positional args and kwargs for one profile (CPU tensors), or raise NoProfile."""
    gen = torch.Generator().manual_seed(seed)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    # Python's schema objects spell types "Tensor", "Optional[Tensor]", "List[int]", "number"...
    for arg in schema.arguments:
        t = str(arg.type)
        name = arg.name
        if arg.kwarg_only and arg.alias_info is not None and arg.alias_info.is_write:
            kwargs[name] = torch.empty(0, dtype=dtype)
            continue
        if t == "Tensor":
            if name in ("index", "indices"):
                v = torch.randint(0, shape[-1], shape, generator=gen)
            elif name in ("mask", "condition"):
                v = torch.rand(shape, generator=gen) > 0.5
            else:
                v = _tensor(torch, shape, dtype, gen, strided)
        elif t == "List[Tensor]":
            v = [_tensor(torch, shape, dtype, gen, strided) for _ in range(2)]
        elif t == "List[Optional[Tensor]]":
            v = [torch.randint(0, shape[0], (shape[0],), generator=gen)]
        elif arg.has_default_value():
            v = arg.default_value
        elif t.startswith("Optional["):
            v = None
        elif t == "number":
            v = True if dtype == torch.bool else 2
        elif t == "int":
            v = -1 if name.startswith("dim") else 1
        elif t == "List[int]":
            if name.startswith("dim"):
                v = [-1]
            elif name == "normalized_shape":
                v = [shape[-1]]
            elif name in ("size", "shape"):
                v = list(shape)
            elif name in ("kernel_size", "stride"):
                v = [2, 2]
            elif name == "padding":
                v = [0, 0]
            elif name == "dilation":
                v = [1, 1]
            elif name == "output_size":
                v = [2 * s for s in shape[-2:]]
            else:
                raise NoProfile(f"{name}: {t}")
        elif t == "bool":
            v = False
        elif t == "float":
            v = 1e-5 if "eps" in name else 0.5
        elif t == "ScalarType":
            v = dtype
        else:
            raise NoProfile(f"{name}: {t}")
        if arg.kwarg_only:
            kwargs[name] = v
        else:
            args.append(v)
    return args, kwargs


def _to(torch, value, device):
    if isinstance(value, torch.Tensor):
        if value.dim() >= 2 and not value.is_contiguous():
            # Keep the strided layout on the device: transposed contiguous storage.
            return value.transpose(-1, -2).contiguous().to(device).transpose(-1, -2)
        return value.to(device)
    if isinstance(value, list):
        return [_to(torch, v, device) for v in value]
    return value


def _cpu(torch, value):
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, (list, tuple)):
        return [_cpu(torch, v) for v in value]
    return value


def compare(torch, actual, expected, dtype_name, random_op) -> str | None:
    """None when equal within tolerance, else why not."""
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            return "different number of results"
        for a, e in zip(actual, expected, strict=True):
            why = compare(torch, a, e, dtype_name, random_op)
            if why:
                return why
        return None
    if not isinstance(expected, torch.Tensor):
        if isinstance(actual, torch.Tensor):
            actual = actual.item()
        ok = actual == expected or (
            isinstance(expected, float) and math.isclose(actual, expected, rel_tol=1e-3)
        )
        return None if ok else f"scalar {actual!r} != {expected!r}"
    if not isinstance(actual, torch.Tensor):
        return f"returned {type(actual).__name__}, expected a tensor"
    if actual.shape != expected.shape:
        return f"shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype} != {expected.dtype}"
    if random_op:
        if actual.is_floating_point() and not torch.isfinite(actual).all():
            return "non-finite values from a random operator"
        return None
    rtol, atol = TOL.get(str(expected.dtype).removeprefix("torch."), (0.0, 0.0))
    try:
        torch.testing.assert_close(
            actual, expected, rtol=rtol, atol=atol, equal_nan=True, check_device=False
        )
    except AssertionError as exc:
        return str(exc).splitlines()[0][:200] + " " + " ".join(str(exc).splitlines()[1:3])[:200]
    return None


# --------------------------------------------------------------------------------------------
# one overload (worker side)
# --------------------------------------------------------------------------------------------


def _call(torch, packet, args, kwargs):
    return packet(*args, **kwargs)


# The router's own wrapping of a Python backend's error: op and backend are known here.
_ROUTER_PREFIX = re.compile(r"^flagos python backend '[^']+' failed in \S+: ")


def _kernel_message(exc: Exception) -> str:
    return _ROUTER_PREFIX.sub("", str(exc).splitlines()[0])


def survey_correctness(op: str, table_flaggems: str, table_box: str) -> dict[str, Any]:
    import torch
    from torch_fl.routing import load_routes

    from torch_fl_cuda.flaggems import table as gems_table

    name, _, overload = op.partition(".")
    packet = getattr(getattr(torch.ops.aten, name), overload or "default")
    schema = packet._schema
    random_op = _is_random(op)
    result: dict[str, Any] = {"profiles": {}, "random": random_op}
    if gems_table().get(op) is None:
        result["verdict"] = "error"
        result["reason"] = "FlagGems has no enabled kernel for it on this GPU"
        return result
    cases = []  # (key, args, kwargs, expected)
    for dtype_name in DTYPES:
        dtype = getattr(torch, dtype_name)
        for shape_name, shape in SHAPES.items():
            if shape_name == "large" and dtype_name != "float32":
                continue
            try:
                args, kwargs = build_args(torch, schema, shape, dtype, shape_name == "2d-strided")
            except NoProfile as exc:
                result["verdict"] = "no-profile"
                result["reason"] = f"cannot synthesise {exc}"
                return result
            try:
                expected = _call(torch, packet, args, kwargs)
                if expected is None and kwargs.get("out") is not None:
                    expected = kwargs["out"]
            except Exception:
                continue  # the CPU does not take this profile: not a profile of this overload
            cases.append((f"{dtype_name}/{shape_name}", dtype_name, args, kwargs, expected))
    if not cases:
        result["verdict"] = "no-profile"
        result["reason"] = "the CPU accepted none of the generic profiles"
        return result
    # One table load per route; every profile runs under it.
    for label, table_path in (("flaggems", table_flaggems), ("box", table_box)):
        load_routes(path=table_path)
        for key, dtype_name, args, kwargs, expected in cases:
            dargs = _to(torch, args, "flagos")
            dkwargs = {k: _to(torch, v, "flagos") for k, v in kwargs.items()}
            if kwargs.get("out") is not None:
                dkwargs["out"] = torch.empty(0, dtype=kwargs["out"].dtype, device="flagos")
            try:
                got = _call(torch, packet, dargs, dkwargs)
                if got is None and "out" in dkwargs:
                    got = dkwargs["out"]
                torch.flagos.synchronize()
                why = compare(torch, _cpu(torch, got), expected, dtype_name, random_op)
            except Exception as exc:
                why = f"raised {type(exc).__name__}: {_kernel_message(exc)[:200]}"
            result["profiles"].setdefault(key, {})[label] = why or "ok"
    return result


def worker_main() -> int:
    """Reads overload names from stdin, writes one JSON line per overload to stdout."""
    table_flaggems, table_box = sys.argv[sys.argv.index("--worker") + 1 :][:2]
    out = sys.stdout
    sys.stdout = sys.stderr  # kernels' prints must not corrupt the protocol
    for line in sys.stdin:
        op = line.strip()
        if not op:
            continue
        try:
            res = survey_correctness(op, table_flaggems, table_box)
        except Exception as exc:
            res = {"verdict": "error", "reason": f"{type(exc).__name__}: {exc}"[:300]}
        # A kernel fault (illegal address, ...) is sticky: every later call in this process
        # would fail too. Report this overload, then ask for a fresh worker.
        lost = _context_lost()
        out.write(json.dumps({"op": op, "result": res, "restart": lost}) + "\n")
        out.flush()
        if lost:
            return 0
    return 0


def _context_lost() -> bool:
    import torch

    try:
        torch.cuda.synchronize()
        return torch.ones(1, device="cuda").add_(1).item() != 2.0
    except Exception:
        return True


# --------------------------------------------------------------------------------------------
# the manager
# --------------------------------------------------------------------------------------------


def candidates() -> list[str]:
    """FlagGems overloads a route may name on this torch: the box-table rules of core's generator
    (not core's own, not excluded, no CompositeImplicit, no Device argument, no views/sparse)."""
    from torch_fl.routing.generate import classify_box_routes

    from torch_fl_cuda.flaggems import _servable, claimed_overloads

    claimed = {f"aten::{op}" for op in _servable(claimed_overloads())}
    routed, _ = classify_box_routes(claimed.__contains__, route_composite_implicit=False)
    return [op.removeprefix("aten::") for op in routed if op in claimed]


def _tables(ops: list[str], workdir: Path) -> tuple[str, str]:
    from torch_fl_cuda.vendor import ROUTE_TABLE

    gems = workdir / "survey-flaggems.conf"
    gems.write_text(
        f"include {ROUTE_TABLE}\n" + "".join(f"{op} = flaggems\n" for op in ops), encoding="utf-8"
    )
    return str(gems), str(ROUTE_TABLE)


_RESULTS: dict[str, dict] = {}


def run_correctness(
    ops: list[str], jobs: int, op_timeout: float, budget: float, tables: tuple[str, str]
) -> dict[str, dict]:
    pending = list(ops)
    results = _RESULTS  # shared with the SIGTERM handler, which writes what exists
    workers: list[dict] = []
    start = time.monotonic()
    env = dict(os.environ, FLAGOS_VENDOR="cuda")

    def spawn() -> dict:
        p = subprocess.Popen(
            [sys.executable, "-m", "torch_fl_cuda.survey", "--worker", *tables],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        return {"p": p, "op": None, "since": 0.0}

    def feed(w: dict) -> None:
        if pending and time.monotonic() - start < budget:
            w["op"] = pending.pop(0)
            w["since"] = time.monotonic()
            w["p"].stdin.write(w["op"] + "\n")
            w["p"].stdin.flush()
        else:
            w["op"] = None

    for _ in range(min(jobs, len(pending))):
        w = spawn()
        workers.append(w)
        feed(w)
    while any(w["op"] for w in workers):
        busy = [w for w in workers if w["op"]]
        ready, _, _ = select.select([w["p"].stdout for w in busy], [], [], 5.0)
        for w in busy:
            if w["p"].stdout in ready:
                line = w["p"].stdout.readline()
                if not line:  # the worker died (a crash inside a kernel)
                    results[w["op"]] = {"verdict": "error", "reason": "worker process crashed"}
                    w.update(spawn())
                else:
                    msg = json.loads(line)
                    results[msg["op"]] = msg["result"]
                    if msg.get("restart"):  # its CUDA context is lost; the op's verdict stands
                        w["p"].stdin.close()
                        w["p"].wait(timeout=30)
                        w.update(spawn())
                print(f"[survey] {len(results)}/{len(ops)} {w['op']}", file=sys.stderr, flush=True)
                feed(w)
            elif time.monotonic() - w["since"] > op_timeout:
                results[w["op"]] = {
                    "verdict": "timeout",
                    "reason": f"no result within {op_timeout:.0f} s (autotuning or a hang)",
                }
                w["p"].kill()
                w.update(spawn())
                feed(w)
    for w in workers:
        w["p"].stdin.close()
        w["p"].wait(timeout=30)
    for op in pending:
        results[op] = {"verdict": "unsurveyed", "reason": "time budget ran out"}
    return results


def _median_us(torch, fn, iters: int) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e6)
    times.sort()
    return times[len(times) // 2]


def run_timing(results: dict[str, dict], tables: tuple[str, str], noise: float) -> None:
    for op, res in sorted(results.items()):
        try:
            _time_one(op, res, tables, noise)
        except Exception as exc:  # one overload's failure must not lose the others' results
            res["verdict"] = "error"
            res["reason"] = f"timing failed: {type(exc).__name__}: {exc}"[:300]


def _time_one(op: str, res: dict, tables: tuple[str, str], noise: float) -> None:
    import torch
    from torch_fl.routing import load_routes

    profiles = res.get("profiles")
    if not profiles:
        return
    good_dtypes = []
    for dtype_name in DTYPES:
        keys = [k for k in profiles if k.startswith(dtype_name + "/")]
        if keys and all(profiles[k].get("flaggems") == "ok" for k in keys):
            good_dtypes.append(dtype_name)
    wrong = [k for k, v in profiles.items() if v.get("flaggems") != "ok" and v.get("box") == "ok"]
    name, _, overload = op.partition(".")
    packet = getattr(getattr(torch.ops.aten, name), overload or "default")
    timing: dict[str, dict] = {}
    winners = []
    for dtype_name in good_dtypes:
        dtype = getattr(torch, dtype_name)
        shapes = [s for s in ("large", "2d") if f"{dtype_name}/{s}" in profiles]
        ratios = []
        for shape_name in shapes:
            args, kwargs = build_args(torch, packet._schema, SHAPES[shape_name], dtype, False)
            dargs = _to(torch, args, "flagos")
            dkwargs = {k: _to(torch, v, "flagos") for k, v in kwargs.items()}
            row = {}
            for label, table_path in (("flaggems", tables[0]), ("box", tables[1])):
                load_routes(path=table_path)
                try:
                    row[label] = _median_us(
                        torch,
                        lambda p=packet, a=dargs, k=dkwargs: p(*a, **k),
                        20 if shape_name == "large" else 50,
                    )
                except Exception as exc:
                    row[label] = None
                    row["error"] = str(exc).splitlines()[0][:200]
            if row.get("flaggems") and row.get("box"):
                row["ratio"] = row["flaggems"] / row["box"]
                ratios.append(row["ratio"])
            timing[f"{dtype_name}/{shape_name}"] = row
        if ratios and max(ratios) <= 1.0 + noise:
            winners.append(dtype_name)
    res["timing_us"] = timing
    res["flaggems_dtypes"] = winners
    if "verdict" in res:
        return
    if winners:
        res["verdict"] = "flaggems"
    elif good_dtypes:
        res["verdict"] = "slower"
    elif wrong:
        res["verdict"] = "wrong"
    else:
        res["verdict"] = "error"
        res.setdefault(
            "reason",
            "; ".join(sorted({str(v.get("flaggems")) for v in profiles.values()}))[:300],
        )


def _compact(res: dict[str, Any]) -> dict[str, Any]:
    """A result as stored: profiles correct on both routes listed by name in ``ok_profiles``,
    ``profiles`` keeping only those with something to say (idempotent)."""
    profiles = res.get("profiles")
    if not profiles:
        return res
    both_ok = {"box": "ok", "flaggems": "ok"}
    out = dict(res)
    out["ok_profiles"] = sorted(
        set(res.get("ok_profiles", ())) | {k for k, v in profiles.items() if v == both_ok}
    )
    out["profiles"] = {k: v for k, v in profiles.items() if v != both_ok}
    return out


def dump(doc: dict[str, Any]) -> str:
    """The survey file's text: one compact line per overload, so a re-survey diffs overload by
    overload; it is measured on a GPU, so it is committed (the route generator reads it)."""
    lines = [
        "{",
        f' "meta": {json.dumps(doc["meta"], sort_keys=True)},',
        ' "overloads": {',
    ]
    items = sorted(doc["overloads"].items())
    for i, (op, res) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        lines.append(f"  {json.dumps(op)}: {json.dumps(_compact(res), sort_keys=True)}{comma}")
    lines += [" }", "}"]
    return "\n".join(lines) + "\n"


def main(argv: Iterable[str] | None = None) -> int:
    if "--worker" in sys.argv:
        return worker_main()
    parser = argparse.ArgumentParser(prog="python -m torch_fl_cuda.survey")
    parser.add_argument("--jobs", type=int, default=max(1, min(12, (os.cpu_count() or 2) - 2)))
    parser.add_argument("--op-timeout", type=float, default=120.0)
    parser.add_argument("--time-budget", type=float, default=900.0, help="seconds for phase 1")
    parser.add_argument("--noise", type=float, default=0.05, help="allowed slowdown (0.05 = 5%%)")
    parser.add_argument("--ops", default="", help="comma-separated overloads (default: all)")
    parser.add_argument("--output", default=None)
    parser.add_argument(
        "--merge-into",
        default=None,
        metavar="JSON",
        help="replace these overloads' entries in an earlier survey file and write it to --output "
        "(a survey split over several runs)",
    )
    args = parser.parse_args(None if argv is None else list(argv))
    os.environ.setdefault("FLAGOS_VENDOR", "cuda")
    import torch

    from torch_fl_cuda import flaggems
    from torch_fl_cuda.routing.generate import SURVEY

    if flaggems.status().startswith("off"):
        print(f"flaggems backend {flaggems.status()}", file=sys.stderr)
        return 2
    allowed = candidates()
    requested = [o for o in args.ops.split(",") if o]
    ops = [o for o in requested if o in allowed] if requested else allowed
    for o in sorted(set(requested) - set(ops)):
        print(
            f"[survey] {o}: not a FlagGems overload a route may name here; skipped", file=sys.stderr
        )
    import flag_gems

    path = Path(args.output) if args.output else SURVEY
    t0 = time.monotonic()

    earlier: dict[str, Any] = {}
    if args.merge_into:
        earlier = json.loads(Path(args.merge_into).read_text(encoding="utf-8"))

    def write(results: dict[str, dict], **extra: Any) -> dict[str, int]:
        if earlier:
            merged = dict(earlier["overloads"])
            merged.update(results)
            runs = list(earlier["meta"].get("runs", [])) or [
                {k: earlier["meta"].get(k) for k in ("requested", "phase1_s", "phase2_s", "jobs")}
            ]
            runs.append({"requested": len(ops), "jobs": args.jobs, **extra})
            extra = {"runs": runs}
            results = merged
        counts: dict[str, int] = {}
        for r in results.values():
            counts[r.get("verdict", "?")] = counts.get(r.get("verdict", "?"), 0) + 1
        doc = {
            "meta": {
                "flag_gems": flag_gems.__version__,
                "torch": torch.__version__,
                "device": torch.cuda.get_device_name(0),
                "dtypes": list(DTYPES),
                "shapes": {k: list(v) for k, v in SHAPES.items()},
                "noise": args.noise,
                "jobs": args.jobs,
                "requested": len(results) if earlier else len(ops),
                "verdicts": dict(sorted(counts.items())),
                **extra,
            },
            "overloads": dict(sorted(results.items())),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dump(doc), encoding="utf-8")
        return counts

    def on_term(signum: int, frame: Any) -> None:
        # Killed by a time limit: keep the verdicts measured so far (unmeasured ones say so).
        partial = {op: dict(r) for op, r in _RESULTS.items()}
        for r in partial.values():
            r.setdefault("verdict", "unsurveyed")  # correct or not, never timed: not routed
            r.setdefault("reason", "the survey was stopped before timing it")
        for op in ops:
            partial.setdefault(op, {"verdict": "unsurveyed", "reason": "the survey was stopped"})
        write(partial, interrupted=True)
        os._exit(3)

    signal.signal(signal.SIGTERM, on_term)
    with tempfile.TemporaryDirectory() as tmp:
        tables = _tables(ops, Path(tmp))
        results = run_correctness(ops, args.jobs, args.op_timeout, args.time_budget, tables)
        t1 = time.monotonic()
        run_timing(results, tables, args.noise)
    t2 = time.monotonic()
    counts = write(results, phase1_s=round(t1 - t0, 1), phase2_s=round(t2 - t1, 1))
    print(f"wrote {path}: {dict(sorted(counts.items()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
