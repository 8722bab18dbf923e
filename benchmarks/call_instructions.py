"""Instructions per routed call, counted rather than timed: flagos against CPU, builds side by side.

A host's time per call moves between processes by more than a router change does (the H100's
launch-bound loops by up to 1.8x); the instructions a call executes do not. For each case (a
``torch`` function on 8-element tensors, as in ``dispatch_overhead.py``) valgrind's callgrind
counts the instructions executed inside the function's Python binding (``THPVariable_add``, ...):
argument parsing, dispatch, flagos's route kernel, the boxed backend's kernel, the result's
tensor and Python object. Each side runs in two fresh processes, one with ``--calls`` more calls
per case than the other; the difference over ``--calls`` is the figure, so imports, warm-up and
first-call caches cancel. Sides: ``cpu`` (the same calls on CPU tensors) and flagos with the
installed torch_fl, or with each build given (a directory put first on ``PYTHONPATH``, made with
``pip install --no-build-isolation --no-deps --target SITE packages/torch_fl_core``), so a change
is compared with the tree before it in one run.

    python benchmarks/call_instructions.py [SITE_A [SITE_B]] [--cases add,mul,...]
        [--calls 5000] [--json out.json]

On sim (``box:cpu``) flagos/cpu is what the device layer costs, in instructions; between builds,
what a change costs. Deterministic to a few instructions per call. Needs valgrind; prints ratios,
asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from _bench_env import describe, load_avg, record_end
from _report import Table, build_sides, write_record

# case -> (the statement, timed per call, and the binding whose instructions are counted).
CASES = {
    "add": ("torch.add(a, b)", "THPVariable_add"),
    "mul": ("torch.mul(a, b)", "THPVariable_mul"),
    "relu": ("torch.relu(a)", "THPVariable_relu"),
    "relu_": ("torch.relu_(w)", "THPVariable_relu_"),
    "add out=": ("torch.add(a, b, out=o)", "THPVariable_add"),
    "sum": ("torch.sum(a)", "THPVariable_sum"),
    "mm": ("torch.mm(x, y)", "THPVariable_mm"),
    "conv2d": ("torch.conv2d(img, ker, padding=1)", "THPVariable_conv2d"),
}

CHILD = """
import sys, torch
dev, n = sys.argv[1], int(sys.argv[2])
a, b = torch.randn(8, device=dev), torch.randn(8, device=dev)
w, o = torch.randn(8, device=dev), torch.empty(8, device=dev)
x, y = torch.randn(2, 4, device=dev), torch.randn(4, 2, device=dev)
img, ker = torch.randn(1, 2, 4, 4, device=dev), torch.randn(2, 2, 3, 3, device=dev)
for case in sys.argv[3:]:
    f = eval("lambda: " + case)
    for _ in range(n):
        f()
"""


def _count(site: str, device: str, calls: int, statements: list[str], bindings: list[str]) -> dict:
    """Inclusive instructions per binding over `calls` calls of each statement, in one process."""
    env = dict(os.environ, PYTHONHASHSEED="0")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (site, env.get("PYTHONPATH", "")) if p)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        toggles = [f"--toggle-collect=torch::autograd::{b}(*" for b in sorted(set(bindings))]
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *toggles]
        cmd += [sys.executable, "-c", CHILD, device, str(calls), *statements]
        run = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:3])} ... failed:\n{run.stderr[-2000:]}")
        text = subprocess.run(
            ["callgrind_annotate", "--inclusive=yes", "--threshold=100", out],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    counts = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) .*torch::autograd::(\w+)\(", line)
        if m and m.group(2) in bindings:
            counts.setdefault(m.group(2), int(m.group(1).replace(",", "")))
    return counts


def measure(site: str, device: str, cases: list[str], calls: int) -> dict[str, float]:
    """Instructions per call of each case (cases sharing a binding are measured one at a time)."""
    groups: list[list[str]] = []
    for case in cases:  # one process per set of cases with distinct bindings
        for g in groups:
            if all(CASES[c][1] != CASES[case][1] for c in g):
                g.append(case)
                break
        else:
            groups.append([case])
    result = {}
    for g in groups:
        statements, bindings = [CASES[c][0] for c in g], [CASES[c][1] for c in g]
        few = _count(site, device, 200, statements, bindings)
        many = _count(site, device, 200 + calls, statements, bindings)
        for c in g:
            b = CASES[c][1]
            result[c] = (many.get(b, 0) - few.get(b, 0)) / calls
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sites", nargs="*", help="builds: directories first on PYTHONPATH")
    p.add_argument("--cases", default=",".join(CASES), help=f"of: {', '.join(CASES)}")
    p.add_argument("--calls", type=int, default=5000, help="the calls per case counted")
    p.add_argument("--native", choices=("cpu", "cuda"), default="cpu", help="the native side")
    p.add_argument("--quick", action="store_true", help="add and relu, 500 calls (a smoke run)")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    if args.quick:
        args.cases, args.calls = "add,relu", min(args.calls, 500)
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        print("call_instructions: valgrind (callgrind) is not installed here; nothing measured")
        return 0
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        p.error(f"unknown cases {unknown}; known: {', '.join(CASES)}")
    env = describe(load_avg())
    t0 = time.perf_counter()
    native = args.native
    sides = {native: ("", native)}
    sides.update({k: (s, "flagos") for k, s in build_sides(args.sites).items()})
    print(
        f"instructions per call inside the torch function's binding, {args.calls} calls per case "
        "(callgrind, two fresh processes per side); "
        + ", ".join(f"{k}={s or '(installed)'}" for k, (s, _) in sides.items() if k != native),
        flush=True,
    )
    counts = {name: measure(site, dev, cases, args.calls) for name, (site, dev) in sides.items()}
    names = list(sides)
    flagos = [n for n in names if n != native]
    titles = ["case", *names, *[f"{n}/{native}" for n in flagos]]
    if len(flagos) == 2:
        titles.append(f"{flagos[1]}-{flagos[0]}")
    fmt = "{:<12}" + "{:>10.0f}" * len(names) + "{:>12.3f}" * len(flagos)
    fmt += "{:>+10.0f}" if len(flagos) == 2 else ""
    table = Table(fmt, *titles)
    print()
    table.header()
    rows = []
    for c in cases:
        per = {n: counts[n][c] for n in names}
        ratios = {n: per[n] / per[native] for n in flagos}
        extra = [per[flagos[1]] - per[flagos[0]]] if len(flagos) == 2 else []
        table.row(c, *per.values(), *ratios.values(), *extra)
        rows.append({"case": c, "instructions": per, "ratio_to_native": ratios})
    sides_summary = {
        n: {
            "median_ratio": sorted(r["ratio_to_native"][n] for r in rows)[len(rows) // 2],
            "total": sum(r["instructions"][n] for r in rows),
        }
        for n in flagos
    }
    last = flagos[-1]
    summary = {
        "sides": sides_summary,
        # The last side (the new build): its median over the cases; and what it adds to the first.
        "median_ratio": sides_summary[last]["median_ratio"],
        "change": sides_summary[last]["total"] - sides_summary[flagos[0]]["total"]
        if len(flagos) == 2
        else None,
    }
    print()
    for n in flagos:
        print(
            f"{n}: median flagos/{native} instructions per call "
            f"{sides_summary[n]['median_ratio']:.3f}, {sides_summary[n]['total']:.0f} over the "
            f"{len(rows)} cases"
        )
    if summary["change"] is not None:
        print(f"{last} - {flagos[0]}: {summary['change']:+.0f} instructions over the cases")
    record_end(env, time.perf_counter() - t0)
    method = {
        "statistic": "inclusive instructions in the binding per call (callgrind), difference of "
        "two processes",
        "calls": args.calls,
        "cases": {c: CASES[c][0] for c in cases},
    }
    write_record(args.json, "call_instructions", env, method, rows=rows, summary=summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
