"""``python -m torch_fl.census [--json] [--output FILE] -- script.py args``: where operators ran.

Runs a workload in this process (``script.py`` with ``sys.argv`` set as Python would, or
``-m module args``), then prints, per ATen overload called on ``flagos``, which backend served it
and how often, and every operator the CPU fallback served (copy in, compute on the CPU, copy out):
those routed to ``cpu`` by the table and those no route covers. ``--json`` prints one JSON document
instead, for tools; ``--output`` writes the report to a file (the workload's own output stays on
stdout). The exit status is the workload's.

Counts come from the router (``torch_fl._C.dispatch_counts()``); operators core serves natively
(allocation, copies, views, ``.item()``) are not routed and not counted.

From Python::

    from torch_fl import census
    with census.counting() as counts:      # deltas over the block
        model(x)
    print(census.summary(counts))
"""

from __future__ import annotations

import argparse
import contextlib
import json
import runpy
import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

__all__ = [
    "FALLBACK",
    "Counts",
    "collect",
    "counting",
    "fallback_ops",
    "fallback_share",
    "main",
    "report",
    "resolutions",
    "summary",
]

#: The backend name under which the router reports calls served by the CPU fallback.
FALLBACK = "cpu"

#: op full name -> backend -> calls.
Counts = dict[str, dict[str, int]]


def collect() -> Counts:
    """The router's counters now (since the last reset)."""
    from torch_fl import _C

    if hasattr(_C, "dispatch_counts"):
        raw = _C.dispatch_counts()
        return {op: {b: int(n) for b, n in per.items() if n} for op, per in raw.items() if per}
    # A build without the router: everything counted was the CPU fallback.
    return {op: {FALLBACK: int(n)} for op, n in _C.fallback_counts().items() if n}


def _delta(after: Counts, before: Counts) -> Counts:
    out: Counts = {}
    for op, per in after.items():
        for backend, n in per.items():
            d = n - before.get(op, {}).get(backend, 0)
            if d > 0:
                out.setdefault(op, {})[backend] = d
    return out


@contextlib.contextmanager
def counting() -> Iterator[Counts]:
    """Per-op, per-backend calls inside the block (filled when it exits; counters not reset)."""
    before = collect()
    counts: Counts = {}
    try:
        yield counts
    finally:
        counts.update(_delta(collect(), before))


def _routed_to(op: str) -> str | None:
    from torch_fl import routing

    active = routing.active_table()
    if active is None:
        return None
    route = active.routes.get(op)
    return None if route is None else route.backend


def resolutions(ops: Iterable[str]) -> dict[str, dict[str, Any]]:
    """op -> how its preference list resolved at load (``winner``, ``choices``, ``skipped``:
    choice -> why), for the ``ops`` whose route in force came from a preference list."""
    from torch_fl import routing

    active = routing.active_table()
    out: dict[str, dict[str, Any]] = {}
    if active is None:
        return out
    for op in ops:
        live, _ = active.rules_for(op)
        for rule in live:
            if not rule.choices:
                continue
            key = op + (f"[{','.join(rule.dtypes)}]" if rule.dtypes else "")
            out[key] = {
                "winner": rule.backend_name,
                "choices": list(rule.choices),
                "skipped": dict(rule.skipped_choices),
                "rule": rule.where,
            }
    return out


def fallback_ops(counts: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """op -> calls the CPU fallback served (routed to ``cpu`` or not routed at all)."""
    return {op: per[FALLBACK] for op, per in counts.items() if per.get(FALLBACK)}


def _table_line() -> str:
    from torch_fl import routing

    active = routing.active_table()
    if active is None:
        return "none loaded"
    return f"{active.path or 'no table'} ({active.source})"


def report(counts: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    """The census as a JSON-able document."""
    import torch

    import torch_fl

    by_backend: dict[str, int] = {}
    for per in counts.values():
        for backend, n in per.items():
            by_backend[backend] = by_backend.get(backend, 0) + n
    fallback = fallback_ops(counts)
    try:
        vendor = torch_fl.vendor().name
    except RuntimeError:
        vendor = None
    return {
        "torch_fl": torch_fl.__version__,
        "torch": torch.__version__,
        "vendor": vendor,
        "route_table": _table_line(),
        "ops": {op: dict(sorted(per.items())) for op, per in sorted(counts.items())},
        "calls": sum(by_backend.values()),
        "by_backend": dict(sorted(by_backend.items())),
        "fallback": {
            op: {"calls": n, "routed": _routed_to(op) == FALLBACK}
            for op, n in sorted(fallback.items(), key=lambda kv: (-kv[1], kv[0]))
        },
        "preference_lists": resolutions(sorted(counts)),
    }


def fallback_share(counts: Mapping[str, Mapping[str, int]]) -> tuple[int, int]:
    """(calls the CPU fallback served, all counted calls)."""
    total = sum(n for per in counts.values() for n in per.values())
    return sum(fallback_ops(counts).values()), total


def summary(counts: Mapping[str, Mapping[str, int]], *, title: str = "Operator census") -> str:
    """A text table: per op, backend and calls; then the CPU-fallback operators."""
    rows = [
        (op.removeprefix("aten::"), backend, n)
        for op, per in counts.items()
        for backend, n in per.items()
        if n
    ]
    rows.sort(key=lambda r: (-r[2], r[0], r[1]))
    total = sum(r[2] for r in rows)
    ops = len({r[0] for r in rows})
    lines = [f"{title}: {ops} operators, {total} calls (route table: {_table_line()})"]
    if rows:
        w_op = max(len(r[0]) for r in rows)
        w_b = max(len("backend"), *(len(r[1]) for r in rows))
        lines.append(f"  {'operator':<{w_op}}  {'backend':<{w_b}}  {'calls':>7}")
        for op, backend, n in rows:
            lines.append(f"  {op:<{w_op}}  {backend:<{w_b}}  {n:>7}")
    fallback = fallback_ops(counts)
    if fallback:
        n_calls = sum(fallback.values())
        lines.append(
            f"CPU fallback (copy in, compute on CPU, copy out): {len(fallback)} operators, "
            f"{n_calls} calls:"
        )
        for op, n in sorted(fallback.items(), key=lambda kv: (-kv[1], kv[0])):
            why = "routed to cpu" if _routed_to(op) == FALLBACK else "no route"
            lines.append(f"  {op.removeprefix('aten::')}  {n}  ({why})")
    else:
        lines.append("CPU fallback: none")
    resolved = resolutions(sorted(counts))
    if resolved:
        lines.append("Preference lists of these operators (resolved at load):")
        lines += _preference_lines(resolved)
    return "\n".join(lines)


#: Operators named in a shared reason's line before the rest are counted.
_NAMED = 8


def _preference_lines(resolved: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per list; a (choice, why) shared by several lists once, after them: one absent
    backend (FlagGems without Triton) is otherwise the same sentence on every operator's line."""
    sharing: dict[tuple[str, str], list[str]] = {}
    for op, res in sorted(resolved.items()):
        for skipped in res["skipped"].items():
            sharing.setdefault(skipped, []).append(op.removeprefix("aten::"))
    lines = []
    for op, res in sorted(resolved.items()):
        passed = "".join(
            f"; skipped {c}: {why}"
            for c, why in res["skipped"].items()
            if len(sharing[c, why]) == 1
        )
        lines.append(
            f"  {op.removeprefix('aten::')} = {', '.join(res['choices'])} -> {res['winner']}{passed}"
        )
    for (choice, why), ops in sharing.items():
        if len(ops) == 1:
            continue
        named = ", ".join(ops[:_NAMED]) + (
            f" and {len(ops) - _NAMED} more" if len(ops) > _NAMED else ""
        )
        lines.append(f"  skipped {choice} for {len(ops)} operators ({named}): {why}")
    return lines


def _run(target: list[str]) -> int:
    """Run ``script.py args`` or ``-m module args`` as ``__main__``; returns its exit status."""
    if target[0] == "-m":
        if len(target) < 2:
            raise SystemExit("census: -m needs a module name")
        module, args = target[1], target[2:]
        sys.argv = [module, *args]
        runner = lambda: runpy.run_module(module, run_name="__main__", alter_sys=True)  # noqa: E731
    else:
        script, args = target[0], target[1:]
        sys.argv = [script, *args]
        runner = lambda: runpy.run_path(script, run_name="__main__")  # noqa: E731
    try:
        runner()
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" in argv:
        split = argv.index("--")
        own, target = argv[:split], argv[split + 1 :]
    else:
        own, target = [], argv
        # Options before the script without "--": take the leading ones that are ours.
        while target and target[0] in ("--json",):
            own.append(target.pop(0))
        if target and target[0] in ("--output", "-o") and len(target) > 1:
            own += target[:2]
            target = target[2:]
    parser = argparse.ArgumentParser(
        prog="python -m torch_fl.census",
        usage="python -m torch_fl.census [--json] [--output FILE] -- script.py [args ...]",
        description="Run a workload and report which backend served each operator on flagos.",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON document")
    parser.add_argument("-o", "--output", help="write the report to FILE instead of stdout")
    opts = parser.parse_args(own)
    if not target:
        parser.error("no workload: give `-- script.py [args]` or `-- -m module [args]`")

    import torch_fl  # noqa: F401  (sets up flagos and loads the route table)

    before = collect()
    sys.path.insert(0, "" if target[0] == "-m" else str(_script_dir(target[0])))
    code = _run(target)
    counts = _delta(collect(), before)
    text = (
        json.dumps({**report(counts), "exit_code": code}, indent=2) + "\n"
        if opts.json
        else summary(counts) + "\n"
    )
    if opts.output:
        with open(opts.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.flush()
        sys.stdout.write(("" if opts.json else "\n") + text)
    return code


def _script_dir(script: str) -> str:
    from pathlib import Path

    return str(Path(script).resolve().parent)


if __name__ == "__main__":
    sys.exit(main())
