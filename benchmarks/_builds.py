"""Builds of torch-fl against each other and native, in fresh ``gpt_step.py --serve`` children.

Whole-process figures on the H200 host vary between processes more than a router change moves them
(the same code read 0.77-1.17 of native in two processes of one round), so a change is judged by
running the builds side by side, many times. Each round starts one fresh child per side: native
(``cuda``, or ``cpu``), and flagos with each build. A build is a directory put first on the child's
``PYTHONPATH`` (``''``: the installed torch-fl), made with

    pip install --no-build-isolation --no-deps --target SITE packages/torch_fl_core

from that commit's checkout. The children start in parallel; once all are ready their main threads
are pinned (``cpus``) and ``reps`` timed blocks run per child in rotating order. Per round: the
median block time of each child and the ratio native/build. Over the rounds: the median ratio of
each build, and (two builds) B/A per round.
"""

from __future__ import annotations

import argparse
import os
import statistics

import gpt_step as G


def add_round_args(p: argparse.ArgumentParser, rounds: int, reps: int) -> None:
    """The options every builds benchmark takes: rounds, blocks per child, pinning, native."""
    p.add_argument("--rounds", type=int, default=rounds)
    p.add_argument("--reps", type=int, default=reps)
    p.add_argument("--cpus", default="auto", help="auto (one CPU near the GPU), none, or N,N,...")
    p.add_argument("--native", choices=("cuda", "cpu"), default=None)
    p.add_argument("--quick", action="store_true", help="small model (CPU smoke runs)")
    p.add_argument("--json", default=None)


def native_and_sizes(args: argparse.Namespace) -> tuple[str, dict]:
    """The native device (cuda where there is one) and the model's sizes: the smoke ones
    against the CPU or with ``--quick``, as ``gpt_step.py`` chooses them."""
    import torch
    from _models import GPT_FULL, GPT_QUICK

    native = args.native or ("cuda" if torch.cuda.is_available() else "cpu")
    small = args.quick or native == "cpu"
    return native, dict(GPT_QUICK, **G.QUICK_RUN) if small else dict(GPT_FULL, **G.FULL_RUN)


def spawn(cfg: dict, dev: str, site: str, base_path: str) -> G.RemoteSide:
    """A child whose ``torch_fl`` comes from ``site`` (``''``: the installed one)."""
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (site, base_path) if p)
    try:
        return G.RemoteSide(cfg, dev, wait=False, cpus=None)
    finally:
        if base_path:
            os.environ["PYTHONPATH"] = base_path
        else:
            os.environ.pop("PYTHONPATH", None)


def _warm_up(side: G.RemoteSide, work: str, arg: int):
    if work == "decode":
        return side.decode(arg)
    side.step()
    return side.step()  # the second step's loss: after one optimizer update


def rounds(
    cfg: dict,
    native: str,
    sites: dict[str, str],
    work: str,
    arg: int,
    units: int,
    unit: str,
    n_rounds: int,
    reps: int,
    cpus: list[int] | None,
    phases: int = 0,
) -> dict:
    """``n_rounds`` rounds of fresh children, native and one per entry of ``sites`` (label ->
    site), each running ``reps`` timed blocks of ``work`` (``"decode"`` or ``"step"``) with ``arg``;
    a block is ``units`` of ``unit``. Returns ms per unit per side and round, ratios native/build
    per round, and how each build's results compared with native's: decoded tokens equal in every
    round, or the largest relative difference of a training loss (bf16 steps with atomic-add
    backward kernels differ between two native runs too). With ``phases`` (training steps), each
    child then also times that many steps phase by phase (``gpt_step.Side.phases``): ``phases``
    in the result holds each side's per-round medians."""
    base_path = os.environ.get("PYTHONPATH", "")
    labels = list(sites)
    ms: dict[str, list[float]] = {k: [] for k in ["native", *labels]}
    ratios: dict[str, list[float]] = {k: [] for k in labels}
    split: dict[str, list[dict]] = {k: [] for k in ["native", *labels]}
    equal: dict[str, bool] = dict.fromkeys(labels, True)
    loss_diff: dict[str, float] = dict.fromkeys(labels, 0.0)
    for i in range(n_rounds):
        sides = {"native": spawn(cfg, native, "", base_path)}
        sides.update({k: spawn(cfg, "flagos", sites[k], base_path) for k in labels})
        try:
            for side in sides.values():
                side.wait_ready()
                if cpus and hasattr(os, "sched_setaffinity"):
                    os.sched_setaffinity(side.proc.pid, cpus)
            # Warm-up; its results are compared (tokens, or the first step's loss).
            got = {k: _warm_up(side, work, arg) for k, side in sides.items()}
            for k in labels:
                equal[k] = equal[k] and bool((got[k] == got["native"]).all())
                if work == "step":
                    d = abs(float(got[k]) - float(got["native"])) / abs(float(got["native"]))
                    loss_diff[k] = max(loss_diff[k], d)
            times: dict[str, list[float]] = {k: [] for k in sides}
            order = list(sides)
            for r in range(reps):
                s = r % len(order)
                for k in order[s:] + order[:s]:
                    times[k].append(sides[k].timed_block(work, arg))
            for k in order if phases else ():
                split[k].append(sides[k].phases(phases))
        finally:
            for side in sides.values():
                side.close()
        med = {k: statistics.median(v) / units * 1e3 for k, v in times.items()}
        for k, v in med.items():
            ms[k].append(v)
        for k in labels:
            ratios[k].append(med["native"] / med[k])
        print(
            f"round {i}: ms/{unit} {native} {med['native']:.3f} "
            + " ".join(f"{k} {med[k]:.3f}" for k in labels)
            + "; ratio "
            + " ".join(f"{k} {ratios[k][-1]:.3f}" for k in labels),
            flush=True,
        )
    out = {
        "ms_per_" + unit: ms,
        "ratios": ratios,
        "median_ratio": {k: statistics.median(v) for k, v in ratios.items()},
        "results_equal_native": equal,
        **({"loss_rel_diff_native": loss_diff} if work == "step" else {}),
        "pinned_cpus": cpus,
        **({"phases": split} if phases else {}),
    }
    if len(labels) == 2:
        a, b = labels
        b_over_a = [y / x for x, y in zip(ratios[a], ratios[b], strict=True)]
        out["b_over_a"] = b_over_a
        out["b_faster_rounds"] = sum(x > 1 for x in b_over_a)
    return out


def summary(result: dict, native: str) -> str:
    """One paragraph: each build's median ratio with its range, and B/A where there are two."""
    lines = [
        f"median ratio ({native} / flagos): "
        + ", ".join(
            f"{k} {result['median_ratio'][k]:.3f} ({min(v):.3f}-{max(v):.3f})"
            for k, v in result["ratios"].items()
        )
    ]
    if "b_over_a" in result:
        n = len(result["b_over_a"])
        lines.append(
            f"B/A median {statistics.median(result['b_over_a']):.3f}, "
            f"B faster in {result['b_faster_rounds']} of {n}"
        )
    if "loss_rel_diff_native" in result:
        diff = result["loss_rel_diff_native"]
        lines.append(
            "loss vs native, largest relative difference: "
            + ", ".join(f"{k} {v:.1e}" for k, v in diff.items())
        )
    else:
        eq = result["results_equal_native"]
        lines.append("results equal native: " + ", ".join(f"{k} {v}" for k, v in eq.items()))
    return "; ".join(lines)
