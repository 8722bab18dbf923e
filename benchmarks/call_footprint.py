"""What a routed call costs inside a real op mix: instructions, cache misses and mispredicts.

``call_instructions.py`` counts one operator called over and over: its code and data stay in the
first-level caches, and the router's cost is its instructions. A model interleaves dozens of
operators, and then each routed call also fetches the router's code and data again. This counts
that, deterministically, with valgrind's callgrind and its cache and branch simulation: greedy
decode steps of ``_models.GPT`` (2 layers, d_model 128, a KV cache grown with ``torch.cat``; the
op mix of ``gpt_step.py``'s decode) on flagos and on CPU tensors. Each side runs in two fresh
processes, one decoding ``--steps`` more tokens than the other, with collection on only inside the
decode (the loop is entered through a ``ctypes`` callback, and callgrind collects inside
``ffi_call``): the difference over ``--steps`` is the figure per token, so imports, the model's
build and warm-up cancel. Per token and per routed call (the router's counters in the flagos
child): instructions (Ir), first-level instruction-cache misses (I1mr), data-cache misses (D1mr +
D1mw) and mispredicted branches (Bcm + Bim), flagos less CPU. A decode's code does not fit a
first-level instruction cache, so on a real host each I1 miss is a second-level fetch (about 15
cycles) and each mispredict costs about as much: that is where a routed call's time goes beyond
its instructions.

    python benchmarks/call_footprint.py [SITE_A [SITE_B]] [--steps 8] [--keep DIR] [--json out.json]

With build sites (directories first on ``PYTHONPATH``, ``pip install --no-build-isolation
--no-deps --target SITE packages/torch_fl_core``) each build is a side, so a change to the
router's code size is judged against the tree before it in one run. The simulated caches have one
fixed geometry (``CACHES``), whatever the host. On sim, flagos's figures include sim's own: the
box:cpu host-result allocator and the runtime's stream synchronisation. Needs valgrind; about two
minutes per pair of processes on 2 cores; prints figures, asserts nothing. ``--keep DIR`` keeps
callgrind's outputs (``SIDE.STEPS``), which name the functions the misses fall in:
``callgrind_annotate --auto=no --show=Ir,I1mr,D1mr DIR/B.10``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from _bench_env import describe, load_avg, record_end
from _report import Table, build_sides, write_record

#: A fixed cache geometry, so the figures do not depend on the host measuring them: a current
#: server core's (32 KiB 8-way instruction cache, 48 KiB 12-way data cache, 64-byte lines; the
#: last level as a 2 MiB 16-way second level).
CACHES = ("--I1=32768,8,64", "--D1=49152,12,64", "--LL=2097152,16,64")
EVENTS = ("Ir", "I1mr", "D1mr", "D1mw", "Bcm", "Bim")
#: The columns printed: callgrind's events, summed where two make one figure.
FIGURES = {
    "Ir": ("Ir",),
    "I1 misses": ("I1mr",),
    "D1 misses": ("D1mr", "D1mw"),
    "mispredicts": ("Bcm", "Bim"),
}

CHILD = r"""
import ctypes, json, sys
sys.path.insert(0, sys.argv[4])
import torch
import _models
dev, steps, prompt_len = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.manual_seed(0)
cfg = dict(_models.GPT_QUICK, prompt=prompt_len, decode_steps=max(steps, 4))  # positions
model = _models.gpt(cfg).eval().to(dev)
prompt = torch.randint(0, cfg["vocab"], (1, prompt_len)).to(dev)

def decode(n):
    with torch.no_grad():
        caches = [{} for _ in model.blocks]
        logits = model(prompt, caches)
        tok = logits[:, -1:].argmax(-1)
        for i in range(n):
            logits = model(tok, caches, pos0=prompt_len + i)
            tok = logits[:, -1:].argmax(-1)
        return tok.item()

decode(4), decode(4)  # warm-up: first calls, caches, pools
counts = None
if dev != "cpu":
    from torch_fl import census
    before = census.collect()
decode_in_ffi = ctypes.CFUNCTYPE(None)(lambda: decode(steps))
decode_in_ffi()  # callgrind collects inside ffi_call only
if dev != "cpu":
    after = census.collect()
    counts = sum(n - before.get(op, {}).get(b, 0) for op, per in after.items() for b, n in per.items())
print("ROUTED", json.dumps(counts))
"""


def _run(
    site: str, device: str, steps: int, prompt: int, keep: str | None = None
) -> tuple[dict, int | None]:
    """callgrind's summary events and the routed calls of one child decoding `steps` tokens.

    ``keep``: where to copy callgrind's output (per function), for ``callgrind_annotate``."""
    env = dict(os.environ, PYTHONHASHSEED="0", OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (site, env.get("PYTHONPATH", "")) if p)
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        cmd = [
            "valgrind",
            "--tool=callgrind",
            "--cache-sim=yes",
            "--branch-sim=yes",
            *CACHES,
            f"--callgrind-out-file={out}",
            "--toggle-collect=ffi_call*",
            sys.executable,
            "-c",
            CHILD,
            device,
            str(steps),
            str(prompt),
            here,
        ]
        run = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"callgrind child ({device}) failed:\n{run.stderr[-2000:]}")
        names = summary = None
        with open(out) as f:
            for line in f:
                if line.startswith("events:"):
                    names = line.split()[1:]
                elif line.startswith("summary:"):
                    summary = [int(x) for x in line.split()[1:]]
        if names is None or summary is None:
            raise RuntimeError(f"no summary in {out}")
        if keep:
            shutil.copyfile(out, keep)
    routed = re.search(r"^ROUTED (\S+)$", run.stdout, re.M)
    counts = dict(zip(names, summary, strict=True))
    n = None if routed is None or routed.group(1) == "null" else int(routed.group(1))
    return counts, n


def measure(site: str, device: str, steps: int, prompt: int, keep: str | None = None) -> dict:
    """Per decoded token: each event, and the routed calls (flagos)."""
    few_out = many_out = None
    if keep:
        few_out, many_out = f"{keep}.{2}", f"{keep}.{2 + steps}"
    with concurrent.futures.ThreadPoolExecutor(2) as pool:  # the two processes side by side
        few_run = pool.submit(_run, site, device, 2, prompt, few_out)
        many_run = pool.submit(_run, site, device, 2 + steps, prompt, many_out)
        (few, n_few), (many, n_many) = few_run.result(), many_run.result()
    per = {e: (many.get(e, 0) - few.get(e, 0)) / steps for e in EVENTS}
    routed = (n_many - n_few) / steps if n_few is not None and n_many is not None else None
    return {"per_token": per, "routed_per_token": routed}


def figure(per: dict, name: str) -> float:
    return sum(per[e] for e in FIGURES[name])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sites", nargs="*", help="builds: directories first on PYTHONPATH")
    p.add_argument("--steps", type=int, default=8, help="the tokens the figures are taken over")
    p.add_argument("--prompt", type=int, default=8, help="prompt tokens")
    p.add_argument("--quick", action="store_true", help="2 steps (a smoke run)")
    p.add_argument("--json", default=None)
    p.add_argument(
        "--keep",
        default=None,
        metavar="DIR",
        help="keep callgrind's outputs there (SIDE.STEPS), to diff per function with "
        "callgrind_annotate",
    )
    args = p.parse_args(argv)
    if args.quick:
        args.steps = 2
    if shutil.which("valgrind") is None:
        print("call_footprint: valgrind (callgrind) is not installed here; nothing measured")
        return 0
    env = describe(load_avg())
    t0 = time.perf_counter()
    sides = {"cpu": ("", "cpu")}
    sides.update({k: (s, "flagos") for k, s in build_sides(args.sites).items()})
    print(
        f"per decoded token of _models.GPT (GPT_QUICK, batch 1, KV cache), {args.steps} tokens "
        "(callgrind with cache and branch simulation, two fresh processes per side); "
        + ", ".join(f"{k}={s or '(installed)'}" for k, (s, _) in sides.items() if k != "cpu"),
        flush=True,
    )
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
    results = {
        k: measure(site, dev, args.steps, args.prompt, args.keep and os.path.join(args.keep, k))
        for k, (site, dev) in sides.items()
    }
    print(f"simulated caches: {' '.join(CACHES)}")
    native = results["cpu"]["per_token"]
    table = Table(
        "{:<8}{:>10}" + "{:>14.0f}{:>12.1f}" * len(FIGURES),
        "side",
        "routed",
        *[t for name in FIGURES for t in (name, "per call")],
    )
    print()
    table.header()
    rows = []
    for k in sides:
        per = results[k]["per_token"]
        routed = results[k]["routed_per_token"]
        extra = {name: figure(per, name) - figure(native, name) for name in FIGURES}
        per_call = {name: (extra[name] / routed if routed else float("nan")) for name in FIGURES}
        cells = [
            v for name in FIGURES for v in (figure(per, name), "" if k == "cpu" else per_call[name])
        ]
        table.row(k, "" if routed is None else f"{routed:.0f}", *cells)
        rows.append(
            {
                "side": k,
                "per_token": per,
                "routed_per_token": routed,
                "extra_per_routed_call": None if k == "cpu" else per_call,
            }
        )
    print("\n'per call': the side's figure per token less CPU's, over its routed calls per token")
    record_end(env, time.perf_counter() - t0)
    method = {
        "statistic": "callgrind (cache and branch simulation) events inside the decode loop, "
        "difference of two processes over --steps tokens",
        "steps": args.steps,
        "caches": list(CACHES),
    }
    # The last side (the new build): what a routed call adds to CPU's figures.
    last = rows[-1]["extra_per_routed_call"] or {}
    summary = {
        "side": rows[-1]["side"],
        "instructions": last.get("Ir"),
        "i1_misses": last.get("I1 misses"),
        "d1_misses": last.get("D1 misses"),
        "mispredicts": last.get("mispredicts"),
    }
    write_record(args.json, "call_footprint", env, method, rows=rows, summary=summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
