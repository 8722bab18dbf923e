"""Hugging Face ``generate()`` decode speed on flagos against the native device, in process pairs.

A Qwen3-style causal LM from a config (random weights, nothing downloaded; about 220M parameters
by default), bfloat16, batch 1, a 16-token prompt and ``--new-tokens`` greedy tokens (128; EOS is
ignored so every run decodes all of them). Two ways:

- ``eager``: ``model.generate(...)`` as a user writes it (dynamic KV cache);
- ``graphs``: the static KV cache, the prompt run eagerly, then one decode step (the model's
  forward over the static cache, and the greedy pick) captured once as a device graph
  (``torch.cuda.graph`` natively, ``torch.flagos.graph`` on flagos) and replayed per token: the
  launch-bound part of decode with no host work per kernel;
- ``static``: the same static-cache loop with the step run eagerly per token (what the graph
  saves is the difference between the two).

Method: decode is launch-bound, so it runs at the speed of its process's host thread, and on the
one-GPU host that speed differs by up to 1.8x from one process to the next. Each side therefore
runs in fresh child processes, ``--pairs`` (flagos, native) pairs in alternating order, both
children of a pair pinned to the same CPU; each child warms up (and compiles), then times
``--reps`` generate() calls. The figure per pair is the ratio of the children's median ms/token;
the result is the median over pairs, with its spread. The native child never imports torch-fl
(``TORCH_DEVICE_BACKEND_AUTOLOAD=0``). Greedy ids of both sides are compared (bf16 kernels may
legitimately differ late in a long decode; the share of equal ids is printed).

``--in-process`` runs both sides in this process instead (torch-fl loaded; inference needs no
autograd on the native tensors): ``--rounds`` rounds of one generate() per side, the side going
first alternating, the figure the median of the per-round ratios, so process-to-process speed
cancels. In a core built with ``TORCH_FL_ROUTE_PHASES=ON`` it also prints the router's steps per
token beside the flagos - native delta.

    python benchmarks/hf_generate.py [--modes eager,graphs] [--pairs 5] [--native cuda]
    python benchmarks/hf_generate.py --in-process [--rounds 12] [--modes eager,graphs]

Prints ratios (native ms/token over flagos ms/token: 1.0 is parity, higher is faster); asserts
nothing about timings.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

#: The steps a profiling build counts per routed call (benchmarks/route_phases.py).
ROUTE_STEPS = ("pick", "scope", "args", "kernel", "results", "other")

SIZES = {
    "default": {"hidden": 1024, "layers": 12, "heads": 16, "kv_heads": 8, "ffn": 3072},
    "quick": {"hidden": 128, "layers": 2, "heads": 4, "kv_heads": 2, "ffn": 256},
}


def build(size: str, device: str):
    import torch
    import transformers

    s = SIZES[size]
    config = transformers.Qwen3Config(
        vocab_size=32000,
        hidden_size=s["hidden"],
        intermediate_size=s["ffn"],
        num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"],
        num_key_value_heads=s["kv_heads"],
        head_dim=s["hidden"] // s["heads"],
        max_position_embeddings=512,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = transformers.Qwen3ForCausalLM(config).to(dtype=torch.bfloat16).eval()
    return model.to(device), config


def graphed_decoder(model, config, prompt, new_tokens: int, dev, capture: bool = True):
    """Greedy decode of ``new_tokens`` after ``prompt``: the prompt eagerly into a static cache,
    then a decode step captured once and replayed per token (see the module docstring); without
    ``capture`` the same step runs eagerly per token (mode ``static``)."""
    import torch
    import transformers

    graphs = torch.get_device_module(dev)
    length = prompt.shape[1]
    cache = transformers.StaticCache(config=config, max_cache_len=length + new_tokens + 1)
    token = torch.zeros(1, 1, dtype=torch.long, device=dev)
    position = torch.zeros(1, dtype=torch.long, device=dev)

    def step() -> torch.Tensor:
        out = model(input_ids=token, past_key_values=cache, cache_position=position, use_cache=True)
        return out.logits[:, -1:].argmax(-1)

    def prefill() -> None:
        cache.reset()
        positions = torch.arange(length, device=dev)
        out = model(
            input_ids=prompt, past_key_values=cache, cache_position=positions, use_cache=True
        )
        token.copy_(out.logits[:, -1:].argmax(-1))
        position.fill_(length)

    if not capture:

        def decode_eagerly() -> torch.Tensor:
            prefill()
            ids = [token.clone()]
            for _ in range(new_tokens - 1):
                token.copy_(step())
                position.add_(1)
                ids.append(token.clone())
            return torch.cat([prompt, *ids], dim=1)

        return decode_eagerly

    with torch.no_grad():
        prefill()
        side = graphs.Stream()
        side.wait_stream(graphs.current_stream())
        with graphs.stream(side):
            for _ in range(2):  # warm-up outside the graph (cuBLAS workspaces, lazy state)
                step()
        graphs.current_stream().wait_stream(side)
        graph = graphs.CUDAGraph() if dev.type == "cuda" else graphs.Graph()
        with graphs.graph(graph):
            picked = step()

    def decode() -> torch.Tensor:
        prefill()
        ids = [token.clone()]
        for _ in range(new_tokens - 1):
            graph.replay()
            token.copy_(picked)
            position.add_(1)
            ids.append(picked.clone())
        return torch.cat([prompt, *ids], dim=1)

    return decode


def decoder(mode: str, size: str, device: str, new_tokens: int):
    """A side's model and its greedy decode for ``mode``: (model, prompt on the device, decode,
    synchronize)."""
    import torch

    dev = torch.device(device)
    sync = torch.get_device_module(dev).synchronize if dev.type != "cpu" else (lambda: None)
    model, config = build(size, device)
    prompt = torch.randint(
        3, config.vocab_size, (1, 16), generator=torch.Generator().manual_seed(1)
    )
    prompt = prompt.to(dev)
    kwargs = {
        "max_new_tokens": new_tokens,
        "min_new_tokens": new_tokens,
        "do_sample": False,
        "pad_token_id": 0,
    }
    if mode in ("graphs", "static"):
        decode = graphed_decoder(model, config, prompt, new_tokens, dev, mode == "graphs")
    else:

        def decode():
            return model.generate(prompt, **kwargs)

    return model, prompt, decode, sync


def child(args: argparse.Namespace) -> None:
    """One side: build, warm up, time; print one JSON line."""
    import torch

    if args.device == "flagos":
        import torch_fl  # noqa: F401
    dev = torch.device(args.device)
    model, prompt, decode, sync = decoder(args.mode, args.size, args.device, args.new_tokens)
    t0 = time.perf_counter()
    with torch.no_grad():
        for _ in range(args.warmup):
            ids = decode()
        sync()
        warm_s = time.perf_counter() - t0
        times = []
        for _ in range(args.reps):
            sync()
            t = time.perf_counter()
            ids = decode()
            sync()
            times.append(time.perf_counter() - t)
    report = {
        "ms_per_token": [x / args.new_tokens * 1e3 for x in times],
        "warmup_s": warm_s,
        "ids": ids[0, prompt.shape[1] :].tolist(),
        "params_m": sum(p.numel() for p in model.parameters()) / 1e6,
    }
    if dev.type == "flagos":
        from torch_fl.compile import graph_wrapping

        report["graphs"] = graph_wrapping.stats()
    print("RESULT " + json.dumps(report), flush=True)


def run_child(device: str, mode: str, args: argparse.Namespace, cpus: list[int] | None) -> dict:
    env = dict(os.environ)
    if device != "flagos":
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    cmd = [sys.executable, __file__, "--child", "--device", device, "--mode", mode]
    cmd += ["--size", args.size, "--new-tokens", str(args.new_tokens), "--reps", str(args.reps)]
    cmd += ["--warmup", str(args.warmup)]

    def pin() -> None:
        if cpus:
            os.sched_setaffinity(0, cpus)

    out = subprocess.run(cmd, env=env, capture_output=True, text=True, preexec_fn=pin)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    raise RuntimeError(f"{device}/{mode} child failed (rc {out.returncode}):\n{out.stderr[-3000:]}")


def ids_equal(a: list[int], b: list[int]) -> float:
    return sum(x == y for x, y in zip(a, b, strict=True)) / len(a)


def pairs_of_processes(mode: str, args: argparse.Namespace, cpus: list[int] | None) -> dict:
    """``--pairs`` fresh (flagos, native) child pairs; per pair the ratio of the children's
    median ms/token."""
    ratios, f_ms, n_ms, equal, detail = [], [], [], [], []
    for i in range(args.pairs):
        order = ["flagos", args.native] if i % 2 == 0 else [args.native, "flagos"]
        got = {dev: run_child(dev, mode, args, cpus) for dev in order}
        f = statistics.median(got["flagos"]["ms_per_token"])
        n = statistics.median(got[args.native]["ms_per_token"])
        f_ms.append(f)
        n_ms.append(n)
        ratios.append(n / f)
        equal.append(ids_equal(got["flagos"]["ids"], got[args.native]["ids"]))
        detail.append({dev: {k: v for k, v in r.items() if k != "ids"} for dev, r in got.items()})
    return {
        "flagos_ms_per_token": statistics.median(f_ms),
        "native_ms_per_token": statistics.median(n_ms),
        "ratio": statistics.median(ratios),
        "pair_ratios": ratios,
        "ids_equal": min(equal),
        "pairs": detail,
    }


def one_process(mode: str, args: argparse.Namespace) -> dict:
    """Both sides in this process (torch-fl loaded), generate() calls alternating: ``--rounds``
    rounds of one call per side, the side going first alternating; per round the ratio of the
    two calls. Process-to-process speed differences cancel; what the two sides share (the
    interpreter, torch's dispatcher, the CUDA caching allocator) is warm for both."""
    import torch
    import torch_fl  # noqa: F401

    sides = {dev: decoder(mode, args.size, dev, args.new_tokens) for dev in ("flagos", args.native)}
    times: dict[str, list[float]] = {dev: [] for dev in sides}
    # A profiling build (TORCH_FL_ROUTE_PHASES=ON) also counts the router's steps of every
    # routed call the flagos side makes: the router's share of the delta in the real loop.
    counting = torch_fl._C.route_phases()["enabled"]
    if counting:
        from route_phases import ticks_per_us  # beside this script; loads torch_fl, as here

    rate = ticks_per_us() if counting else 0.0
    steps: list[dict[str, float]] = []
    ids = {}
    with torch.no_grad():
        for _, _prompt, decode, sync in sides.values():
            for _ in range(args.warmup):
                decode()
            sync()
        for r in range(args.rounds):
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            for dev in order:
                _, prompt, decode, sync = sides[dev]
                sync()
                torch_fl._C.route_phases()  # drops what was counted before
                t = time.perf_counter()
                out = decode()
                sync()
                times[dev].append((time.perf_counter() - t) / args.new_tokens * 1e3)
                counted = torch_fl._C.route_phases()
                if counting and dev == "flagos":
                    per_token = {k: counted[k] / rate / args.new_tokens for k in ROUTE_STEPS}
                    per_token["calls"] = counted["calls"] / args.new_tokens
                    steps.append(per_token)
                ids[dev] = out[0, prompt.shape[1] :].tolist()
    ratios = [n / f for f, n in zip(times["flagos"], times[args.native], strict=True)]
    result = {
        "flagos_ms_per_token": statistics.median(times["flagos"]),
        "native_ms_per_token": statistics.median(times[args.native]),
        "ratio": statistics.median(ratios),
        "pair_ratios": ratios,
        "ids_equal": ids_equal(ids["flagos"], ids[args.native]),
        "ms_per_token": times,
    }
    if steps:
        deltas = [1e3 * (f - n) for f, n in zip(times["flagos"], times[args.native], strict=True)]
        result["delta_us_per_token"] = statistics.median(deltas)
        result["route_steps_us_per_token"] = {
            k: statistics.median(s[k] for s in steps) for k in (*ROUTE_STEPS, "calls")
        }
    return result


def print_route_steps(results: dict) -> None:
    """The router's steps per token beside the flagos - native delta (profiling builds)."""
    for mode, r in results.items():
        got = r.get("route_steps_us_per_token")
        if not got:
            continue
        router = sum(got[k] for k in ROUTE_STEPS if k != "kernel")
        print(
            f"{mode}: flagos - native {r['delta_us_per_token']:.0f} us/token; router steps "
            f"{router:.0f} us/token over {got['calls']:.0f} routed calls "
            f"({router / max(got['calls'], 1e-9):.2f} us/call): "
            + ", ".join(f"{k} {got[k]:.0f}" for k in ROUTE_STEPS)
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--modes", default="eager,graphs")
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--size", choices=sorted(SIZES), default="default")
    p.add_argument("--native", default="cuda")
    p.add_argument("--cpus", default="auto", help="CPUs of every child ('auto': the last allowed)")
    p.add_argument(
        "--in-process",
        action="store_true",
        help="both sides in this process, generate() calls alternating (--rounds), not process pairs",
    )
    p.add_argument("--rounds", type=int, default=12, help="rounds of --in-process")
    p.add_argument("--json", default=None)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--device", default=None, help=argparse.SUPPRESS)
    p.add_argument("--mode", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
        return

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _bench_env import describe, load_avg
    from _report import Table, write_record

    env = describe(load_avg())
    cpus = None
    if args.cpus != "none" and hasattr(os, "sched_getaffinity"):
        allowed = sorted(os.sched_getaffinity(0))
        cpus = allowed[-1:] if args.cpus == "auto" else [int(c) for c in args.cpus.split(",")]
    how = (
        f"one process, {args.rounds} rounds of one generate() per side"
        if args.in_process
        else f"{args.pairs} process pairs x {args.reps} timed generate() each"
    )
    print(
        f"Qwen3-style {args.size} config, bf16, batch 1, 16-token prompt, {args.new_tokens} new "
        f"tokens; {how}; CPUs {cpus}"
    )
    results = {}
    table = Table(
        "{:<8}{:>12.3f}{:>12.3f}{:>9.3f}{:>17}{:>11.3f}",
        "mode",
        "flagos ms",
        "native ms",
        "ratio",
        "range",
        "ids equal",
    )
    if args.in_process and cpus:
        import torch

        os.sched_setaffinity(0, cpus)
        torch.set_num_threads(len(cpus))  # as many as a child pinned at its start would take
    for mode in args.modes.split(","):
        if mode == "graphs" and args.native == "cpu":
            print("graphs: skipped (the CPU records no device graphs to compare with)")
            continue
        results[mode] = (
            one_process(mode, args) if args.in_process else pairs_of_processes(mode, args, cpus)
        )
    print()
    table.header()
    for mode, r in results.items():
        spread = f"{min(r['pair_ratios']):.3f}-{max(r['pair_ratios']):.3f}"
        table.row(
            mode,
            r["flagos_ms_per_token"],
            r["native_ms_per_token"],
            r["ratio"],
            spread,
            r["ids_equal"],
        )
    over = "rounds in one process" if args.in_process else "process pairs"
    print(f"ratio = native ms/token / flagos ms/token (median over {over})")
    print_route_steps(results)
    write_record(args.json, "hf_generate", env, vars(args), results=results)


if __name__ == "__main__":
    main()
