"""``python -m torch_fl.conformance``: run PyTorch's OpInfo entries on ``flagos`` against CPU.

    python -m torch_fl.conformance                      # every entry, float32, writes the report
    python -m torch_fl.conformance --ops add,mm,nn.functional.conv2d --output -
    python -m torch_fl.conformance --dtype bfloat16 --json conformance-bf16.json

Writes ``docs/operator-conformance.md`` (``--output``; ``-`` prints a short list instead) and,
with ``--json``, every result as JSON. Entries run in ``--workers`` processes, so a crash or a
hang in one entry is recorded as an error and the run goes on. Exit status 0, or 1 when
``--min-pass`` is given and the pass percentage is below it.
"""

from __future__ import annotations

import argparse
import datetime
import difflib
import os
import shlex
import sys
import time
from collections.abc import Sequence

import torch

from torch_fl.conformance.engine import CHECKS, DEFAULT_MAX_SAMPLES, check_op
from torch_fl.conformance.opdb import find, op_db
from torch_fl.conformance.report import Run, summary, write_json, write_markdown
from torch_fl.conformance.results import OpResult
from torch_fl.conformance.runner import run_entries

_ENV_KEYS = ("torch-fl:", "vendor:", "runtime:", "routes:")


def _environment() -> str:
    """torch_fl.info() without the device lines (free memory changes from run to run) and with
    the install location shortened to ``<torch_fl>``."""
    import torch_fl

    package_dir = os.path.dirname(torch_fl.__file__)
    kept, keep = [], False
    for line in torch_fl.info().replace(package_dir, "<torch_fl>").splitlines():
        if not line.startswith(" "):
            keep = line.startswith(_ENV_KEYS)
        if keep:
            kept.append(line)
    return "\n".join(kept)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m torch_fl.conformance",
        description="Run PyTorch's OpInfo entries on flagos against CPU and write a report.",
    )
    p.add_argument("--dtype", default="float32", help="dtype to test (default float32)")
    p.add_argument(
        "--output",
        default="docs/operator-conformance.md",
        help="Markdown report path; '-' prints failures to stdout instead",
    )
    p.add_argument("--json", metavar="PATH", help="also write every result as JSON")
    p.add_argument("--ops", help="comma-separated OpInfo names (name or name.variant); default all")
    p.add_argument(
        "--checks",
        default=",".join(CHECKS),
        help=f"comma-separated subset of {','.join(CHECKS)}",
    )
    p.add_argument("--max-samples", type=int, default=DEFAULT_MAX_SAMPLES)
    p.add_argument(
        "--workers",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="worker processes (0: run in this process, no crash isolation)",
    )
    p.add_argument("--op-timeout", type=float, default=120.0, help="seconds per entry")
    p.add_argument("--min-pass", type=float, help="exit 1 if the pass percentage is below this")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    return p.parse_args(argv)


def _names(spec: str | None) -> list[str]:
    everything = [op.full_name for op in op_db()]
    if not spec:
        return everything
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if find(n) is None]
    if unknown:
        hints = {
            n: [e for e in everything if e.endswith("." + n)][:3]
            or difflib.get_close_matches(n, everything, n=3)
            for n in unknown
        }
        raise SystemExit(
            "not in this torch's op_db: "
            + "; ".join(f"{n} (did you mean {', '.join(h)}?)" if h else n for n, h in hints.items())
        )
    return names


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    dtype = getattr(torch, args.dtype, None)
    if not isinstance(dtype, torch.dtype):
        raise SystemExit(f"unknown dtype {args.dtype!r}")
    checks = tuple(c.strip() for c in args.checks.split(",") if c.strip())
    bad = [c for c in checks if c not in CHECKS]
    if bad:
        raise SystemExit(f"unknown checks {bad}; choose from {list(CHECKS)}")
    names = _names(args.ops)

    def progress(result: OpResult, done: int, total: int) -> None:
        if args.quiet:
            return
        if result.outcome in ("wrong", "error"):
            print(f"[{done}/{total}] {result.full_name}: {result.outcome}", file=sys.stderr)
        elif done % 50 == 0 or done == total:
            print(f"[{done}/{total}]", file=sys.stderr)

    start = time.perf_counter()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    if args.workers <= 0:
        results = []
        for i, name in enumerate(names, 1):
            results.append(check_op(find(name), dtype, max_samples=args.max_samples, checks=checks))
            progress(results[-1], i, len(names))
    else:
        results = run_entries(
            names,
            dtype,
            workers=args.workers,
            max_samples=args.max_samples,
            checks=checks,
            op_timeout=args.op_timeout,
            progress=progress,
        )
    import torch_fl

    run = Run(
        command="python -m torch_fl.conformance"
        + "".join(f" {shlex.quote(a)}" for a in (sys.argv[1:] if argv is None else argv)),
        dtype=args.dtype,
        date=date,
        seconds=time.perf_counter() - start,
        max_samples=args.max_samples,
        checks=checks,
        torch_version=torch.__version__,
        torch_fl_version=torch_fl.__version__,
        environment=_environment(),
    )
    s = summary(results)
    if args.output == "-":
        for r in results:
            if r.outcome != "pass":
                print(f"{r.full_name}: {r.outcome}: {r.detail}")
    else:
        write_markdown(results, args.output, run)
    if args.json:
        write_json(results, args.json, run)
    print(
        f"{s['pass']} of {s['with_samples']} entries with {args.dtype} samples pass "
        f"({s['pass_percent']}%); wrong {s['wrong']}, error {s['error']}, "
        f"skipped {s['skipped']}; {s['no_samples']} entries have no {args.dtype} samples"
        + ("" if args.output == "-" else f"; report: {args.output}"),
        file=sys.stderr,
    )
    if args.min_pass is not None and float(s["pass_percent"]) < args.min_pass:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
