"""Reductions, scans and sorts, with dims, keepdim, dtype and (tuple) ``out=``."""

from __future__ import annotations

import torch

REDUCE = [
    "sum",
    "mean",
    "prod",
    "amax",
    "amin",
    "max",
    "min",
    "argmax",
    "argmin",
    "all",
    "any",
    "std",
    "var",
    "norm",
    "logsumexp",
    "cumsum",
    "cumprod",
    "cummax",
    "sort",
    "topk",
    "kthvalue",
    "median",
    "nansum",
    "aminmax",
    "argsort",
    "count_nonzero",
    "std_mean",
    "mode",
    "nanmedian",
    "logcumsumexp",
    "var_mean",
    "msort",
    "cummin",
]


def reduction(g):
    x = g.pick()
    if x is None:
        return
    r = g.r
    t = g.T(x)
    f = r.choice(REDUCE)
    d = t.dim()
    args = []
    if f in ("cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "kthvalue", "mode"):
        args.append(str(r.randint(-max(1, d), max(0, d - 1))) if d else "0")
        if f == "kthvalue":
            args.insert(0, str(r.randint(1, 2)))
    elif f == "topk":
        args.append(str(r.randint(0, 2)))
        if d and r.random() < 0.5:
            args.append(f"dim={r.randrange(d)}")
        if r.random() < 0.3:
            args.append("largest=False")
    elif f in ("sort", "argsort"):
        if d and r.random() < 0.7:
            args.append(f"dim={r.randint(-d, d - 1)}")
        if r.random() < 0.4:
            args.append("descending=True")
        if r.random() < 0.3:
            args.append("stable=True")
    elif f != "msort":
        if r.random() < 0.7 and d:
            if r.random() < 0.2 and f in (
                "sum",
                "mean",
                "amax",
                "amin",
                "std",
                "var",
                "logsumexp",
                "nansum",
                "count_nonzero",
                "prod",
                "all",
                "any",
                "norm",
            ):
                dims = tuple(sorted(r.sample(range(d), min(d, 2))))
                args.append(f"dim={dims!r}" if f != "prod" else f"dim={dims[0]}")
            else:
                args.append(f"dim={r.randint(-d, d - 1)}")
            if r.random() < 0.5 and f not in ("count_nonzero",):
                args.append("keepdim=True")
        elif f in ("aminmax",) and r.random() < 0.5:
            args.append("dim=0")
        if f in ("sum", "mean", "prod", "nansum", "cumsum") and r.random() < 0.2:
            args.append(f"dtype=torch.{r.choice(['float64', 'int64', 'float32'])}")
    form = r.choice(["fn", "fn", "out", "method"])
    name = g.fresh("r")
    argstr = ", ".join(args)
    sep = ", " if argstr else ""
    uses = [x]
    if form == "method":
        line = f"{name} = {x}.{f}({argstr})"
    elif form == "fn":
        line = f"{name} = torch.{f}({x}{sep}{argstr})"
    else:
        try:
            ref = eval(f"torch.{f}(T{sep}{argstr})", {"torch": torch, "T": t})
        except Exception:
            ref = t
        if isinstance(ref, tuple):
            shared = f == "kthvalue"
            outs = [g.out_for(e.shape, e.dtype, [x], e.shape if shared else None) for e in ref]
            uses += outs
            line = f"{name} = torch.{f}({x}{sep}{argstr}, out=({', '.join(outs)},))"
            if r.random() < 0.5 and len(outs) == 2:
                names = {"aminmax": ("min", "max"), "std_mean": None, "var_mean": None}.get(
                    f, ("values", "indices")
                )
                if names:
                    line = f"{name} = torch.{f}({x}{sep}{argstr}, out=({outs[0]}, {outs[1]}))"
        else:
            o = g.out_for(ref.shape, ref.dtype, [x])
            uses.append(o)
            line = f"{name} = torch.{f}({x}{sep}{argstr}, out={o})"
    g.try_emit(line, uses, f"{f}:{form}", name, allow_error=0.2)
