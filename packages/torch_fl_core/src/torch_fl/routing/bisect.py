"""``python -m torch_fl.routing bisect -- script.py args``: which routes change a workload's result.

The workload publishes what it computed with :func:`bisect_report` (a no-op outside bisect). Bisect
runs it in child processes (``python -m torch_fl.routing._bisect_worker``):

1. the *normal* run, with the routes as configured; its census (:mod:`torch_fl.census`) names the
   *candidates*: the overloads it called through a backend other than ``cpu``;
2. the *reference*, every candidate routed to ``cpu`` (``FLAGOS_OP_<op>=cpu``), twice at once: the
   two must agree within tolerance, else the workload is nondeterministic and cannot be bisected;
3. if the normal run matches the reference, there is no culprit. Otherwise it searches: a run with
   a subset ``T`` of the candidates on their routes (the others on ``cpu``) either matches the
   reference or not; halving a deviating set (both halves tested at once) ends at single
   overloads, and a deviating set neither of whose halves deviates alone is shrunk to one minimal
   group of overloads that deviate only together.

Exit status: 0 no culprit, 1 culprits printed, 2 usage error or a workload that cannot be bisected
(the reference fails, publishes nothing, or is nondeterministic).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["bisect_report", "main"]

# Set by the worker: name -> published value (CPU tensors). None outside bisect.
_collector: dict[str, Any] | None = None


def bisect_report(value: Any, name: str | None = None) -> None:
    """Publish ``value`` for ``python -m torch_fl.routing bisect``; a no-op otherwise.

    ``value``: a tensor, a Python number or bool, or a dict / list / tuple of those (nested names
    ``name.key`` and ``name[i]``; an unnamed dict publishes its keys as names). Other unnamed
    values are named ``#0``, ``#1`` ... in call order; a name published again gets ``@1``, ``@2``
    ... appended. Values are copied to the CPU when published.
    """
    if _collector is None:
        return
    if name is None and isinstance(value, Mapping):
        for k, v in value.items():
            _publish(str(k), v)
        return
    if name is None:
        name = f"#{sum(1 for k in _collector if k.startswith('#'))}"
    _publish(name, value)


def _publish(name: str, value: Any) -> None:
    import torch

    assert _collector is not None
    if isinstance(value, Mapping):
        for k, v in value.items():
            _publish(f"{name}.{k}", v)
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _publish(f"{name}[{i}]", v)
        return
    if isinstance(value, torch.Tensor):
        stored = value.detach().to("cpu", copy=True)
    elif isinstance(value, (bool, int, float)):
        stored = torch.tensor(value, dtype=torch.float64 if isinstance(value, float) else None)
    else:
        raise TypeError(
            f"bisect_report({name!r}): expected a tensor, number, bool, or a dict/list of those, "
            f"got {type(value).__name__}"
        )
    key, n = name, 0
    while key in _collector:
        n += 1
        key = f"{name}@{n}"
    _collector[key] = stored


# ---- comparing runs ------------------------------------------------------------------------


@dataclasses.dataclass
class Run:
    """One child run: what it published, its census, how it ended."""

    exit_code: int
    values: dict[str, Any]
    counts: dict[str, dict[str, int]]
    stderr: str = ""
    crashed: bool = False  # ended without writing its results (signal, os._exit)


@dataclasses.dataclass
class Deviation:
    differs: bool
    what: str  # one line: where and by how much
    ratio: float = 0.0  # largest |a - e| / (atol + rtol |e|); > 1 beyond tolerance


def _tolerance(dtype: Any, rtol: float | None, atol: float | None) -> Any:
    import torch

    from torch_fl.conformance import tolerances as tol

    if dtype == torch.float32 or dtype == torch.complex64:
        base = tol.FLOAT32_STEPS
    elif dtype in (torch.float16, torch.bfloat16):
        base = tol.for_lower_precision(dtype, cpu_kernels=False)
    else:
        base = tol.for_dtype(dtype)
    if base.exact:  # integers and bools compare exactly whatever --rtol/--atol say
        return base
    return tol.Tolerance(base.rtol if rtol is None else rtol, base.atol if atol is None else atol)


def compare(
    actual: Run, expected: Run, rtol: float | None = None, atol: float | None = None
) -> Deviation:
    """How ``actual`` deviates from ``expected`` (exit status, published names, values)."""
    import torch

    if actual.crashed or actual.exit_code != expected.exit_code:
        how = "crashed" if actual.crashed else f"exit status {actual.exit_code}"
        return Deviation(True, f"{how} (reference: exit status {expected.exit_code})", math.inf)
    if actual.values.keys() != expected.values.keys():
        missing = sorted(expected.values.keys() - actual.values.keys())
        extra = sorted(actual.values.keys() - expected.values.keys())
        return Deviation(
            True, f"published other values (missing {missing}, extra {extra})", math.inf
        )
    worst = Deviation(False, "identical", 0.0)
    for name, e in expected.values.items():
        a = actual.values[name]
        if a.shape != e.shape or a.dtype != e.dtype:
            return Deviation(
                True,
                f"{name!r}: {a.dtype} {tuple(a.shape)} (reference: {e.dtype} {tuple(e.shape)})",
                math.inf,
            )
        tol = _tolerance(e.dtype, rtol, atol)
        if tol.exact or not (e.is_floating_point() or e.is_complex()):
            bad = int((a != e).sum())
            if bad:
                return Deviation(True, f"{name!r}: {bad} of {e.numel()} elements differ", math.inf)
            continue
        a64, e64 = (
            a.to(torch.complex128 if e.is_complex() else torch.float64),
            e.to(torch.complex128 if e.is_complex() else torch.float64),
        )
        close = torch.isclose(a64, e64, rtol=tol.rtol, atol=tol.atol, equal_nan=True)
        diff = (a64 - e64).abs()
        finite = torch.isfinite(diff)
        if not bool(close.all()):
            n_bad = int((~close).sum())
            if bool(finite[~close].any()):
                d = diff[~close & finite]
                lim = (tol.atol + tol.rtol * e64.abs())[~close & finite]
                i = int((d / lim).argmax())
                ratio = float(d[i] / lim[i])
                what = (
                    f"{name!r}: max |diff| {float(d.max()):.3g}, {n_bad} of {e.numel()} elements "
                    f"beyond {tol} ({ratio:.3g}x)"
                )
            else:
                ratio = math.inf
                what = (
                    f"{name!r}: {n_bad} of {e.numel()} elements non-finite where the other is not"
                )
            if ratio > worst.ratio or not worst.differs:
                worst = Deviation(True, what, ratio)
        elif not worst.differs and e.numel():
            lim = tol.atol + tol.rtol * e64.abs()
            r = float((torch.where(finite, diff, 0) / lim).max())
            if r > worst.ratio:
                worst = Deviation(False, f"{name!r}: within {tol} ({r:.3g}x)", r)
    return worst


# ---- child runs ----------------------------------------------------------------------------


def env_name(op: str) -> str:
    """``aten::mul.Tensor`` -> ``FLAGOS_OP_mul__Tensor`` (``.`` is written ``__``)."""
    from torch_fl.routing.environment import OP_PREFIX

    return OP_PREFIX + op.removeprefix("aten::").replace(".", "__")


class Runner:
    """Runs the workload with sets of candidates routed to ``cpu``; remembers every result."""

    def __init__(self, target: list[str], workdir: Path, jobs: int) -> None:
        from torch_fl.routing import environment

        self.target = target
        self.workdir = workdir
        self.jobs = max(1, jobs)
        self.runs = 0
        self._n = 0
        env = dict(os.environ)
        # Forcing overloads to cpu must not trip the budget check (it exits with its own status).
        env.pop(environment.BUDGET_VAR, None)
        self.base_env = env
        # The user's FLAGOS_OP_* variables, by the overload each names (ours replace them).
        self.user_vars: dict[str, str] = {}
        for var in env:
            if var.startswith(environment.OP_PREFIX):
                try:
                    op = environment.op_from_variable(var[len(environment.OP_PREFIX) :])
                except ValueError:
                    continue
                self.user_vars[var] = op

    def _env(self, to_cpu: Iterable[str]) -> dict[str, str]:
        to_cpu = set(to_cpu)
        env = {k: v for k, v in self.base_env.items() if self.user_vars.get(k) not in to_cpu}
        for op in to_cpu:
            env[env_name(op)] = "cpu"
        return env

    def run(self, to_cpu: Iterable[str]) -> Run:
        return self.run_many([to_cpu])[0]

    def run_many(self, sets: list[Iterable[str]]) -> list[Run]:
        sets = [frozenset(s) for s in sets]
        with concurrent.futures.ThreadPoolExecutor(self.jobs) as pool:
            return list(pool.map(self._one, sets))

    def _one(self, to_cpu: frozenset[str]) -> Run:
        import torch

        self._n += 1
        self.runs += 1
        out = self.workdir / f"run{self._n}.pt"
        proc = subprocess.run(
            [sys.executable, "-m", "torch_fl.routing._bisect_worker", str(out), "--", *self.target],
            env=self._env(to_cpu),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        if not out.exists():
            return Run(proc.returncode, {}, {}, proc.stderr, crashed=True)
        data = torch.load(out, weights_only=True)
        out.unlink()
        return Run(int(data["exit_code"]), data["values"], data["counts"], proc.stderr)


# ---- the search ----------------------------------------------------------------------------


class Search:
    """Finds the minimal sets of candidates whose routes (others on cpu) deviate from the
    reference."""

    def __init__(self, runner: Runner, candidates: list[str], reference: Run, tol: tuple) -> None:
        self.runner = runner
        self.candidates = candidates
        self.reference = reference
        self.tol = tol
        self.memo: dict[frozenset[str], Deviation] = {}

    def deviations(self, on_route: list[frozenset[str]]) -> list[Deviation]:
        todo = [s for s in dict.fromkeys(on_route) if s not in self.memo]
        everything = set(self.candidates)
        for s, run in zip(todo, self.runner.run_many([everything - s for s in todo]), strict=True):
            self.memo[s] = compare(run, self.reference, *self.tol)
        return [self.memo[s] for s in on_route]

    def culprits(self, group: frozenset[str], keep: frozenset[str] = frozenset()) -> list:
        """Minimal deviating sets within ``group`` (``group | keep`` deviates)."""
        if len(group) == 1:
            return [group]
        a, b = _halves(group)
        da, db = self.deviations([a | keep, b | keep])
        found: list[frozenset[str]] = []
        if da.differs:
            found += self.culprits(a, keep)
        if db.differs:
            found += self.culprits(b, keep)
        if not da.differs and not db.differs:
            # Only together: the part of a needed with b, then the part of b needed with that.
            part_a = self.shrink(a, keep | b)
            found.append(part_a | self.shrink(b, keep | part_a))
        return found

    def shrink(self, group: frozenset[str], context: frozenset[str]) -> frozenset[str]:
        """A minimal part of ``group`` that deviates together with ``context``."""
        if len(group) == 1:
            return group
        a, b = _halves(group)
        da, db = self.deviations([a | context, b | context])
        if da.differs:
            return self.shrink(a, context)
        if db.differs:
            return self.shrink(b, context)
        part_a = self.shrink(a, context | b)
        return part_a | self.shrink(b, context | part_a)


def _halves(group: frozenset[str]) -> tuple[frozenset[str], frozenset[str]]:
    ordered = sorted(group)
    mid = len(ordered) // 2
    return frozenset(ordered[:mid]), frozenset(ordered[mid:])


# ---- the command ---------------------------------------------------------------------------

USAGE = (
    "python -m torch_fl.routing bisect [--rtol R] [--atol A] [--jobs N] "
    "-- script.py [args ...] | -- -m module [args ...]"
)


def _say(text: str) -> None:
    print(f"bisect: {text}", flush=True)


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join("    " + line for line in text.rstrip().splitlines()[-lines:])


def _routes(run: Run, op: str) -> str:
    per = run.counts.get(op, {})
    return ", ".join(f"{b} ({n} calls)" for b, n in sorted(per.items()))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    split = argv.index("--") if "--" in argv else len(argv)
    own, target = argv[:split], argv[split + 1 :]
    parser = argparse.ArgumentParser(
        prog="python -m torch_fl.routing bisect",
        usage=USAGE,
        description="Find the overloads whose route changes a workload's published results "
        "(torch_fl.routing.bisect_report) beyond tolerance, against the CPU reference.",
    )
    parser.add_argument("--rtol", type=float, help="relative tolerance (default: by dtype)")
    parser.add_argument("--atol", type=float, help="absolute tolerance (default: by dtype)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (default 2)")
    try:
        opts = parser.parse_args(own)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    if not target or (target[0] == "-m" and len(target) < 2):
        print(f"usage: {USAGE}\nbisect: give the workload after `--`", file=sys.stderr)
        return 2
    if target[0] != "-m" and not Path(target[0]).is_file():
        print(f"bisect: {target[0]}: no such file", file=sys.stderr)
        return 2
    for name in ("rtol", "atol"):
        value = getattr(opts, name)
        if value is not None and not value >= 0:
            print(f"bisect: --{name} {value}: expected a number >= 0", file=sys.stderr)
            return 2
    if opts.jobs < 1:
        print(f"bisect: --jobs {opts.jobs}: expected at least 1", file=sys.stderr)
        return 2
    tol = (opts.rtol, opts.atol)
    with tempfile.TemporaryDirectory(prefix="flagos-bisect-") as tmp:
        runner = Runner(target, Path(tmp), opts.jobs)
        return _bisect(runner, tol)


def _bisect(runner: Runner, tol: tuple) -> int:
    normal = runner.run(())
    if normal.crashed:
        _say(f"the normal run crashed (status {normal.exit_code}):\n{_tail(normal.stderr)}")
    elif normal.exit_code:
        _say(f"the normal run exited with status {normal.exit_code}:\n{_tail(normal.stderr)}")
    candidates = sorted(op for op, per in normal.counts.items() if any(b != "cpu" for b in per))
    _say(
        f"normal run: {len(normal.values)} values published, {len(candidates)} overloads called "
        f"through non-cpu routes"
    )
    if not candidates and not normal.crashed:
        _say("nothing to bisect: every overload the workload called ran on cpu")
        return 0
    ref = runner.run(candidates)
    if ref.crashed or ref.exit_code:
        _say(
            f"the reference run (candidates on cpu) failed with status {ref.exit_code}; "
            f"bisect needs one that succeeds:\n{_tail(ref.stderr)}"
        )
        return 2
    if not ref.values:
        _say(
            "the workload published nothing: call torch_fl.routing.bisect_report(value) with the "
            "results to compare (a loss, outputs, parameters)"
        )
        return 2
    first = compare(normal, ref, *tol)
    if not first.differs:
        _say(f"no culprit: the normal run matches the cpu reference ({first.what})")
        return 0
    _say(f"the normal run differs from the cpu reference: {first.what}")
    search = Search(runner, candidates, ref, tol)
    search.memo[frozenset(candidates)] = first
    # The reference again, to tell a route's effect from run-to-run noise, together with the
    # search's first two runs (the halves of the candidates).
    everything = frozenset(candidates)
    halves = list(_halves(everything)) if len(candidates) > 1 else []
    ref2, *runs = runner.run_many([everything, *(everything - h for h in halves)])
    noise = compare(ref2, ref, *tol)
    if noise.differs:
        _say(
            "the workload is nondeterministic: two runs with every candidate on cpu differ: "
            f"{noise.what}. Seed its random numbers (torch.manual_seed) and avoid "
            "order-dependent work, or loosen --rtol/--atol."
        )
        return 2
    for half, run in zip(halves, runs, strict=True):
        search.memo[half] = compare(run, ref, *tol)
    found = search.culprits(frozenset(candidates))
    _say(f"{runner.runs} runs")
    print(f"Culprits ({len(found)}): routes that change the result (others on cpu):")
    for group in sorted(found, key=lambda g: sorted(g)):
        dev = search.memo.get(group)
        together = " (only together)" if len(group) > 1 else ""
        print(f"  {' + '.join(op.removeprefix('aten::') for op in sorted(group))}{together}")
        for op in sorted(group):
            print(f"    {op.removeprefix('aten::')}: {_routes(normal, op)}")
        if dev is not None:
            print(f"    deviation: {dev.what}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
