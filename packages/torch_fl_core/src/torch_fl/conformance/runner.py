"""Running many OpInfo entries in worker processes, surviving crashes and hangs.

The parent hands entries one at a time to each worker (a ``spawn``-ed process: a fresh interpreter
that brings up its own ``flagos`` runtime) and waits for its :class:`OpResult`. If a worker dies
(a crash in native code) or one entry runs longer than ``op_timeout`` seconds, the parent records
that entry as an ``error`` ("worker process died" / "timed out"), ends that worker and starts a new
one for the remaining entries.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any

import torch

from torch_fl.conformance.results import CheckResult, OpResult

__all__ = ["run_entries"]


def _worker(conn: Any, dtype_name: str, max_samples: int, checks: tuple[str, ...]) -> None:
    import torch_fl  # noqa: F401  (brings up flagos in this interpreter)
    from torch_fl.conformance.engine import check_op
    from torch_fl.conformance.opdb import find, op_db

    op_db()  # load before the first entry, so its timeout covers the entry only
    dtype = getattr(torch, dtype_name)
    conn.send(("ready", None))
    while True:
        name = conn.recv()
        if name is None:
            return
        op = find(name)
        if op is None:
            result = _failed(name, dtype_name, "skipped", "not in this torch's op_db", 0.0)
        else:
            result = check_op(op, dtype, max_samples=max_samples, checks=checks)
        conn.send(("done", result.to_dict()))


def _failed(name: str, dtype_name: str, outcome: str, reason: str, seconds: float) -> OpResult:
    from torch_fl.conformance.opdb import find

    op = find(name)
    base, variant = (op.name, op.variant_test_name) if op is not None else (name, "")
    return OpResult(
        base,
        variant,
        dtype_name,
        has_samples=outcome != "skipped",
        checks=[CheckResult("forward", outcome, reason)],
        seconds=seconds,
    )


@dataclass
class _Worker:
    process: Any
    conn: Any
    entry: str | None = None
    started: float = 0.0
    ready: bool = False


def run_entries(
    names: Sequence[str],
    dtype: torch.dtype,
    *,
    workers: int = 2,
    max_samples: int,
    checks: tuple[str, ...],
    op_timeout: float = 120.0,
    progress: Callable[[OpResult, int, int], None] | None = None,
) -> list[OpResult]:
    """Check every entry in ``names`` (OpInfo full names) in ``workers`` processes, in order."""
    dtype_name = str(dtype).removeprefix("torch.")
    ctx = mp.get_context("spawn")
    pending = deque(names)
    results: dict[str, OpResult] = {}
    pool: list[_Worker] = []

    def start() -> None:
        parent, child = ctx.Pipe()
        p = ctx.Process(target=_worker, args=(child, dtype_name, max_samples, checks), daemon=True)
        p.start()
        child.close()
        pool.append(_Worker(p, parent))

    def record(result: OpResult, name: str) -> None:
        results[name] = result
        if progress:
            progress(result, len(results), len(names))

    def retire(w: _Worker, outcome_reason: str | None) -> None:
        if w.entry is not None and outcome_reason is not None:
            record(
                _failed(w.entry, dtype_name, "error", outcome_reason, time.monotonic() - w.started),
                w.entry,
            )
        if w.process.is_alive():
            w.process.kill()
        w.process.join()
        w.conn.close()
        pool.remove(w)

    for _ in range(max(1, min(workers, len(names)))):
        start()
    try:
        while len(results) < len(names):
            for w in pool:
                if w.ready and w.entry is None and pending:
                    w.entry, w.started = pending.popleft(), time.monotonic()
                    w.conn.send(w.entry)
            ready = wait([w.conn for w in pool] + [w.process.sentinel for w in pool], timeout=1.0)
            for w in list(pool):
                if w.conn in ready:
                    try:
                        kind, payload = w.conn.recv()
                    except (EOFError, OSError):
                        kind, payload = "died", None
                    if kind == "ready":
                        w.ready = True
                        continue
                    if kind == "done":
                        record(OpResult.from_dict(payload), w.entry)
                        w.entry = None
                        continue
                if not w.process.is_alive() or (w.conn in ready and kind == "died"):
                    code = w.process.exitcode
                    retire(w, f"worker process died while running it (exit code {code})")
                    if pending or any(x.entry for x in pool) or len(results) < len(names):
                        start()
                elif w.entry is not None and time.monotonic() - w.started > op_timeout:
                    retire(w, f"timed out after {op_timeout:g} s")
                    start()
            if not pool and len(results) < len(names):
                start()
    finally:
        for w in list(pool):
            try:
                w.conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            w.process.join(timeout=5)
            retire(w, None)
    return [results[n] for n in names]
