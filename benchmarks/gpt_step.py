"""GPT-style decoder on flagos against native tensors: training throughput and batch-1 decoding.

The model (``_models.GPT``): token and position embeddings, ``--layers`` pre-LayerNorm blocks
(causal self-attention through ``torch.nn.functional.scaled_dot_product_attention``, a 4x GELU
MLP), a final LayerNorm and an LM head tied to the token embedding. Defaults: 12 layers, d_model 768, 12 heads, vocab 32000,
sequence 512 (about 110M parameters), batch 64 (at 16 the H200 finishes a step's kernels in about
the time the host takes to launch them, which measures launch speed, not throughput). Both copies
start from the same weights (one state dict) and see the same batches. Native is ``cuda`` on the cuda vendor, ``cpu`` elsewhere
(``--native`` overrides); on the CPU the sizes default to the ``--quick`` ones.

- **Training step**: ``zero_grad(set_to_none=True)``, forward and cross-entropy under
  ``torch.autocast(device_type, dtype=torch.bfloat16)``, backward, AdamW as constructed by default
  (PyTorch then picks its ``foreach`` implementation on both sides). Throughput in tokens/s.
- **Decode** (launch-bound): batch 1, a ``--prompt``-token prefill, then ``--decode-steps`` greedy
  steps of one token with a KV cache (per layer, ``torch.cat`` of keys and values), in bf16 autocast
  under ``torch.no_grad``. Nothing reads back to the host inside the loop.

Method: warm-up steps on both sides, then ``--reps`` repetitions; in each, a block of ``--steps``
training steps (or one decode of ``--decode-steps`` tokens) is timed on flagos and on native, back
to back, from a drained queue to a synchronize after the block (which side goes first alternates).
Throughput per side is the median over the repetitions; ``ratio`` is flagos / native (higher is
better); ``paired`` is the median of the per-repetition ratios.

    python benchmarks/gpt_step.py [--batch 64] [--seq 512] [--layers 12] [--d-model 768] [--heads 12]
        [--vocab 32000] [--steps 4] [--reps 7] [--decode-steps 64] [--native cuda|cpu] [--quick] [--json out.json]

Targets, against cuda on the H200: training ratio >= 0.97, decode ratio >= 0.9. Asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import json
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
from _bench_env import record_end
from _gpu_bench import add_common_args, gpu_local_cpus, start, sync
from _models import GPT, GPT_FULL, GPT_QUICK, gpt, optimizer_impl
from _report import median_ratio, write_record

FULL_RUN = {"steps": 4, "reps": 7, "decode_steps": 64, "prompt": 16}
QUICK_RUN = {"steps": 2, "reps": 3, "decode_steps": 16, "prompt": 8}
#: The parts of a training step whose host time Side.phases reports.
PHASES = ("zero_grad", "forward", "backward", "optimizer", "wait")


def _no_mark(_t: float) -> None:
    pass


class Side:
    """One copy of the model, its optimizer and its data on one device."""

    def __init__(self, base: GPT, dev: torch.device, x: torch.Tensor, y: torch.Tensor, prompt):
        self.dev = dev
        self.model = copy.deepcopy(base).to(dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        self.x, self.y, self.prompt = x.to(dev), y.to(dev), prompt.to(dev)
        self.amp = dev.type

    def step(self, marks: list[float] | None = None) -> torch.Tensor:
        """One training step; with ``marks``, the host clock at the start and after each of
        PHASES but the last (``zero_grad``, forward and loss, ``backward()``, ``opt.step()``)."""
        mark = marks.append if marks is not None else _no_mark
        mark(time.perf_counter())
        self.opt.zero_grad(set_to_none=True)
        mark(time.perf_counter())
        with torch.autocast(self.amp, dtype=torch.bfloat16):
            logits = self.model(self.x)
            loss = F.cross_entropy(logits.flatten(0, 1).float(), self.y.flatten())
        mark(time.perf_counter())
        loss.backward()
        mark(time.perf_counter())
        self.opt.step()
        mark(time.perf_counter())
        return loss.detach()

    def phases(self, steps: int) -> dict[str, float]:
        """Host milliseconds of each of PHASES, median over ``steps`` steps, each started on a
        drained queue: what the host spends where (``wait``: the final synchronize, the GPU
        still behind the host)."""
        rows = []
        for _ in range(steps):
            sync(self.dev)
            marks: list[float] = []
            self.step(marks)
            sync(self.dev)
            marks.append(time.perf_counter())
            rows.append([b - a for a, b in zip(marks, marks[1:], strict=False)])
        return {k: statistics.median(r[i] for r in rows) * 1e3 for i, k in enumerate(PHASES)}

    @torch.no_grad()
    def decode(self, steps: int) -> torch.Tensor:
        caches = [{} for _ in self.model.blocks]
        with torch.autocast(self.amp, dtype=torch.bfloat16):
            logits = self.model(self.prompt, caches)
            tok = logits[:, -1].argmax(-1, keepdim=True)
            out = [tok]
            pos = self.prompt.shape[1]
            for _ in range(steps - 1):
                logits = self.model(tok, caches, pos)
                tok = logits[:, -1].argmax(-1, keepdim=True)
                out.append(tok)
                pos += 1
        return torch.cat(out, dim=1)

    def opt_impl(self) -> str:
        """Which AdamW implementation runs (foreach or the per-tensor loop)."""
        return optimizer_impl(self.opt)

    def timed(self, fn) -> float:
        sync(self.dev)
        t0 = time.perf_counter()
        fn()
        sync(self.dev)
        return time.perf_counter() - t0


class RemoteSide:
    """One side in a child process: the native side never loads torch-fl there.

    Why: once a PrivateUse1 backend is registered, ``at::getAccelerator()`` is PrivateUse1 and the
    autograd engine asserts (``opt_ready_stream && opt_parent_stream``) on any backward over CUDA
    tensors in that process (seen with torch 2.11 on the H200). The child builds the same model from the
    same seeds and runs each timed block itself; blocks still alternate with the other side's.
    ``--decode-processes`` also runs the flagos side in children (``device == "flagos"``).
    """

    def __init__(
        self, cfg: dict, device: str, wait: bool = True, cpus: list[int] | None = None
    ) -> None:
        env = dict(os.environ)
        if device != "flagos":
            env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
        with pinned(cpus):  # the child inherits the affinity from its first instruction on
            self.proc = subprocess.Popen(
                [sys.executable, __file__, "--serve", device, "--serve-cfg", json.dumps(cfg)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        """Until the child has built its side (several children may build at once)."""
        self._ask("ready")

    def _ask(self, *cmd):
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("a benchmark child died (see its stderr above)")
        return json.loads(line)

    def step(self):
        return torch.tensor(self._ask("step"))

    def decode(self, steps: int):
        return torch.tensor(self._ask("decode", steps))

    def opt_impl(self) -> str:
        return self._ask("opt_impl")

    def process_info(self) -> dict:
        return self._ask("info")

    def timed_block(self, fn_name: str, arg: int) -> float:
        return self._ask("timed", fn_name, arg)

    def phases(self, steps: int) -> dict[str, float]:
        return self._ask("phases", steps)

    def zero_grad(self) -> None:
        self._ask("zero_grad")

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def serve(device: str, cfg: dict) -> int:
    """The child side of RemoteSide: JSON commands on stdin, one JSON reply per line."""
    out = sys.stdout
    sys.stdout = sys.stderr
    if device != "flagos":
        # The point of a native child: PrivateUse1 must not be registered in this process.
        assert "torch_fl" not in sys.modules, "the native child loaded torch-fl"
    side, _ = build_side(cfg, torch.device(device, 0))
    tokens = 0  # decoded in this process (for per-token figures in process_info)
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd[0] == "ready":
            reply = True
        elif cmd[0] == "step":
            reply = side.step().item()
        elif cmd[0] == "decode":
            reply = side.decode(cmd[1]).cpu().tolist()
            tokens += cmd[1]
        elif cmd[0] == "opt_impl":
            reply = side.opt_impl()
        elif cmd[0] == "info":
            reply = process_info(tokens)
        elif cmd[0] == "phases":
            reply = side.phases(cmd[1])
        elif cmd[0] == "zero_grad":
            side.opt.zero_grad(set_to_none=True)
            reply = True
        else:
            reply = local_block(side, cmd[1], cmd[2])
            tokens += cmd[2] if cmd[1] == "decode" else 0
        out.write(json.dumps(reply) + "\n")
        out.flush()
    return 0


def process_info(tokens: int = 0) -> dict:
    """What could make one process slower than another with the same code (kept in the JSON);
    in a flagos process also the routed calls and the operand-alias pool's work per token."""
    info: dict = {
        "threads": len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else None,
        "gc_collections": [g["collections"] for g in gc.get_stats()],
        "gc_tracked_objects": len(gc.get_objects()),
        "modules": len(sys.modules),
        "flag_gems_imported": "flag_gems" in sys.modules,
    }
    if hasattr(os, "sched_getaffinity"):
        info["affinity"] = sorted(os.sched_getaffinity(0))
    if "torch_fl" in sys.modules and tokens:
        from torch_fl import _C

        routed = sum(n for per in _C.dispatch_counts().values() for n in per.values())
        info["routed_calls_per_token"] = routed / tokens
        if hasattr(_C, "alias_pool_stats"):
            info["alias_pool_per_token"] = {k: v / tokens for k, v in _C.alias_pool_stats().items()}
    try:
        with open("/proc/self/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        info["last_cpu"] = int(fields[36])  # field 39 of proc(5), counted after the name
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(("VmRSS", "voluntary_ctxt", "nonvoluntary_ctxt")):
                    k, v = line.split(":", 1)
                    info[k] = v.strip()
    except OSError:
        pass
    return info


def build_side(cfg: dict, dev: torch.device):
    """The model, batch and prompt from fixed seeds (identical in every process) on ``dev``."""
    torch.manual_seed(0)
    base = gpt(cfg)
    x = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"]))
    y = torch.roll(x, -1, dims=1)
    prompt = torch.randint(0, cfg["vocab"], (1, cfg["prompt"]))
    n_params = sum(p.numel() for p in base.parameters())
    return Side(base, dev, x, y, prompt), n_params


def local_block(side, fn_name: str, arg: int) -> float:
    fn = getattr(side, fn_name)
    if fn_name == "step":
        return side.timed(lambda: [fn() for _ in range(arg)])
    return side.timed(lambda: fn(arg))


def interleave(fl: Side, nat, fn_name: str, arg: int, reps: int) -> tuple[list, list]:
    f_s, n_s = [], []
    for r in range(reps):
        pair = ((fl, f_s), (nat, n_s))
        for side, acc in pair if r % 2 == 0 else pair[::-1]:
            if isinstance(side, RemoteSide):
                acc.append(side.timed_block(fn_name, arg))
            else:
                acc.append(local_block(side, fn_name, arg))
    return f_s, n_s


def throughput(f_s: list, n_s: list, tokens: int, per: int, unit: str) -> dict:
    """Tokens/s per side from the median block time, ms per ``unit`` (``per`` of them in a
    block), ``ratio`` flagos / native and the median of the per-block ratios."""
    f, n = statistics.median(f_s), statistics.median(n_s)
    return {
        "flagos_tokens_per_s": tokens / f,
        "native_tokens_per_s": tokens / n,
        f"flagos_{unit}": f / per * 1e3,
        f"native_{unit}": n / per * 1e3,
        "ratio": n / f,
        "paired_median_ratio": median_ratio(n_s, f_s),
    }


def side_lines(d: dict, native: str, unit: str, digits: int, native_note: str = "") -> str:
    """Two lines, native then flagos: tokens/s and the time per step or token."""
    label = {"step_ms": "ms/step", "ms_per_token": "ms/token"}[unit]
    return "".join(
        f"  {name:<7}{d[f'{key}_tokens_per_s']:>12.{digits}f} tokens/s  "
        f"({d[f'{key}_{unit}']:.{digits + 2}f} {label}{note})\n"
        for name, key, note in ((native, "native", native_note), ("flagos", "flagos", ""))
    )


@contextlib.contextmanager
def pinned(cpus: list[int] | None):
    """Children started inside run on ``cpus`` (Linux affinity is per thread and inherited)."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def decode_cpus(spec: str, native: str) -> list[int] | None:
    """The CPUs both children of a decode pair run on: ``auto`` is one CPU of this process's
    affinity set, near the GPU where sysfs says which those are; ``none`` leaves them unpinned."""
    if spec == "none" or not hasattr(os, "sched_getaffinity"):
        return None
    if spec != "auto":
        return [int(c) for c in spec.split(",")]
    allowed = sorted(os.sched_getaffinity(0))
    near = set(gpu_local_cpus() if native == "cuda" else [])
    choice = [c for c in allowed if c in near] or allowed
    return choice[-1:]  # not CPU 0, where interrupts and housekeeping tend to land


def decode_in_process_pairs(cfg: dict, native: str, pairs: int, cpus: list[int] | None) -> dict:
    """Decode throughput from ``pairs`` fresh (flagos, native) child-process pairs.

    Why: a launch-bound loop runs at the speed of its process's host thread, and on a shared VM
    that speed was seen to differ by up to 1.8x from one process to the next (the H200 host, same
    code, the same 8-CPU set for every process), which one pair of processes cannot tell from a
    difference between the sides. Both children of a pair run on the same ``cpus`` (default: one
    CPU near the GPU), so where the scheduler put a process is not part of the comparison. Each
    pair interleaves its blocks as the in-process measurement does; the figure is the median over
    the pairs.
    """
    steps = cfg["decode_steps"]
    ratios, f_ms, n_ms, matches, detail = [], [], [], [], []
    for i in range(pairs):
        order = ("flagos", native) if i % 2 == 0 else (native, "flagos")
        # Both children start at once (their startup overlaps); blocks run one at a time.
        sides = {dev: RemoteSide(cfg, dev, wait=False, cpus=cpus) for dev in order}
        try:
            for side in sides.values():
                side.wait_ready()
            fl, nat = sides["flagos"], sides[native]
            a, b = fl.decode(steps), nat.decode(steps)  # warm-up, and the tokens to compare
            matches.append((a == b).float().mean().item())
            f_s, n_s = interleave(fl, nat, "decode", steps, cfg["reps"])
            detail.append(
                {
                    "flagos_block_ms_per_token": [t / steps * 1e3 for t in f_s],
                    "native_block_ms_per_token": [t / steps * 1e3 for t in n_s],
                    "flagos_process": fl.process_info(),
                    "native_process": nat.process_info(),
                }
            )
        finally:
            for side in sides.values():
                side.close()
        f, n = statistics.median(f_s), statistics.median(n_s)
        f_ms.append(f / steps * 1e3)
        n_ms.append(n / steps * 1e3)
        ratios.append(n / f)
    f_med, n_med = statistics.median(f_ms), statistics.median(n_ms)
    return {
        "flagos_tokens_per_s": 1e3 / f_med,
        "native_tokens_per_s": 1e3 / n_med,
        "flagos_ms_per_token": f_med,
        "native_ms_per_token": n_med,
        "ratio": statistics.median(ratios),
        "pair_ratios": ratios,
        "flagos_ms_per_token_per_pair": f_ms,
        "native_ms_per_token_per_pair": n_ms,
        "process_pairs": pairs,
        "pinned_cpus": cpus,
        "pairs": detail,
        "token_match": min(matches),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for k in (*GPT_FULL, *FULL_RUN):
        p.add_argument("--" + k.replace("_", "-"), type=int, default=None)
    p.add_argument("--no-decode", action="store_true", help="skip the batch-1 decode loop")
    p.add_argument("--no-train", action="store_true", help="skip the training step")
    p.add_argument(
        "--native-in-child",
        action="store_true",
        help="run the native side in a child process without torch-fl (always so for cuda)",
    )
    p.add_argument(
        "--decode-processes",
        type=int,
        default=None,
        help="measure decode in this many fresh pairs of child processes (flagos, native), the "
        "ratio being the median of the per-pair ratios (default: 3 against cuda, where a "
        "launch-bound loop's speed varies from process to process; 0 elsewhere: in-process)",
    )
    p.add_argument(
        "--decode-cpus",
        default="auto",
        help="CPUs both children of a decode pair run on: auto (one CPU near the GPU), none, or "
        "a list such as 5 or 5,6",
    )
    p.add_argument("--serve", default=None, help=argparse.SUPPRESS)
    p.add_argument("--serve-cfg", default=None, help=argparse.SUPPRESS)
    add_common_args(p)
    args = p.parse_args(argv)
    if args.serve:
        return serve(args.serve, json.loads(args.serve_cfg))
    native, env = start(args)
    small = args.quick or native == "cpu"
    cfg = {**(GPT_QUICK if small else GPT_FULL), **(QUICK_RUN if small else FULL_RUN)}
    for k in cfg:
        if getattr(args, k) is not None:
            cfg[k] = getattr(args, k)

    fl = torch.device("flagos", 0)
    nd = torch.device("cuda", 0) if native == "cuda" else torch.device("cpu")

    pairs = args.decode_processes
    if pairs is None:
        pairs = 3 if native == "cuda" else 0
    fl_side = nat_side = None
    if not args.no_train or (not args.no_decode and pairs == 0):
        fl_side, n_params = build_side(cfg, fl)
        if native == "cuda" or args.native_in_child:
            nat_side = RemoteSide(cfg, native)  # CUDA autograd cannot share a process with flagos
        else:
            nat_side, _ = build_side(cfg, nd)
    else:
        n_params = sum(p.numel() for p in gpt(cfg).parameters())
    print(
        f"model: {cfg['layers']} layers, d_model {cfg['d_model']}, {cfg['heads']} heads, vocab "
        f"{cfg['vocab']}, {n_params / 1e6:.1f}M parameters; batch {cfg['batch']} x seq {cfg['seq']}"
        f"{' (quick sizes)' if small else ''}"
    )
    gc.collect()
    t0 = time.perf_counter()
    results: dict = {"config": cfg, "params": n_params}

    if not args.no_train:
        # Same weights, same batch: the first losses agree (a sanity check, not a timing).
        loss_gap = abs(fl_side.step().item() - nat_side.step().item())
        for _ in range(2):
            fl_side.step()
            nat_side.step()
        f_s, n_s = interleave(fl_side, nat_side, "step", cfg["steps"], cfg["reps"])
        tokens = cfg["batch"] * cfg["seq"] * cfg["steps"]
        results["train"] = t = {
            **throughput(f_s, n_s, tokens, cfg["steps"], "step_ms"),
            "first_loss_gap": loss_gap,
            "adamw_impl": {"flagos": fl_side.opt_impl(), "native": nat_side.opt_impl()},
        }
        print(
            f"\ntraining step (bf16 autocast, AdamW {t['adamw_impl']['flagos']} on flagos, "
            f"{t['adamw_impl']['native']} on {native}), median of {cfg['reps']} blocks of "
            f"{cfg['steps']} steps:\n{side_lines(t, native, 'step_ms', 0)}"
            f"  ratio {t['ratio']:.3f} (paired {t['paired_median_ratio']:.3f}); target (vs cuda): "
            f">= 0.97; first-step loss gap {loss_gap:.2e}"
        )
        fl_side.opt.zero_grad(set_to_none=True)
        if isinstance(nat_side, RemoteSide):
            nat_side.zero_grad()
        else:
            nat_side.opt.zero_grad(set_to_none=True)

    if not args.no_decode and pairs > 0:
        cpus = decode_cpus(args.decode_cpus, native)
        results["decode"] = decode_in_process_pairs(cfg, native, pairs, cpus)
        d = results["decode"]
        per_pair = ", ".join(f"{r:.3f}" for r in d["pair_ratios"])
        where = f"both on CPU {','.join(map(str, cpus))}" if cpus else "unpinned"
        print(
            f"\nbatch-1 decode ({cfg['prompt']}-token prompt, {cfg['decode_steps']} tokens, KV "
            f"cache), {pairs} fresh process pairs ({where}), median of {cfg['reps']} interleaved "
            f"blocks each:\n{side_lines(d, native, 'ms_per_token', 1, ', median of the pairs')}"
            f"  ratio {d['ratio']:.3f} (median of the per-pair ratios {per_pair}); target (vs "
            f"cuda): >= 0.9; greedy tokens equal on both sides: {d['token_match']:.0%}"
        )
    elif not args.no_decode:
        steps = cfg["decode_steps"]
        a = fl_side.decode(steps)
        b = nat_side.decode(steps)
        match = (a.cpu() == b.cpu()).float().mean().item()
        f_s, n_s = interleave(fl_side, nat_side, "decode", steps, cfg["reps"])
        results["decode"] = d = {
            **throughput(f_s, n_s, steps, steps, "ms_per_token"),
            "token_match": match,
        }
        print(
            f"\nbatch-1 decode ({cfg['prompt']}-token prompt, {steps} tokens, KV cache), median of "
            f"{cfg['reps']}:\n{side_lines(d, native, 'ms_per_token', 1)}"
            f"  ratio {d['ratio']:.3f} (paired {d['paired_median_ratio']:.3f}); target (vs cuda): "
            f">= 0.9; greedy tokens equal on both sides: {match:.0%}"
        )

    if isinstance(nat_side, RemoteSide):
        nat_side.close()
    elapsed = time.perf_counter() - t0
    print()
    record_end(env, elapsed)
    method = {
        "statistic": "median per side over interleaved timed blocks; ratio flagos/native "
        "throughput",
        "native": native,
    }
    write_record(args.json, "gpt_step", env, method, **results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
