"""Indexing ops: gathers, scatters, index_* ops, masks, item assignment; bad and CPU
indices."""

from __future__ import annotations

import torch

from ..values import FILLS, bcastable


def indexing(g):
    x = g.pick(lambda t: t.dim() >= 1)
    if x is None:
        return
    r = g.r
    t = g.T(x)
    d = t.dim()
    dim = r.randrange(d)
    n = t.shape[dim]
    bad = r.random() < 0.08
    f = r.choice(
        [
            "index_select",
            "index_select_out",
            "gather",
            "gather_out",
            "scatter_",
            "scatter_add_",
            "scatter_reduce_",
            "index_add_",
            "index_copy_",
            "index_fill_",
            "index_put_",
            "masked_fill_",
            "masked_scatter_",
            "masked_select",
            "masked_select_out",
            "take",
            "put_",
            "setitem",
            "getitem",
            "nonzero",
            "nonzero_out",
            "index_add_out",
            "scatter",
            "index_reduce_",
            "getitem_bool",
            "setitem_bool",
            "take_along_dim",
            "index_put_acc",
        ]
    )
    name = g.fresh("r")
    uses = [x]
    line = None
    k = r.randint(0, 4)
    if f in ("index_select", "index_select_out"):
        i = g.index_tensor(n, k, allow_neg=False, bad=bad)
        uses.append(i)
        if f == "index_select":
            line = f"{name} = torch.index_select({x}, {dim}, {i})"
        else:
            sh = list(t.shape)
            sh[dim] = k
            o = g.out_for(sh, t.dtype, [x])
            uses.append(o)
            line = f"{name} = torch.index_select({x}, {dim}, {i}, out={o})"
    elif f in ("gather", "gather_out", "take_along_dim"):
        sh = [r.randint(0, s) for s in t.shape]
        sh[dim] = r.randint(0, 3)
        total = 1
        for s in sh:
            total *= s
        vals = [r.randint(0, max(0, n - 1)) for _ in range(total)]
        if bad and vals:
            vals[0] = n + 1
        i = g.fresh("i")
        g.try_emit(
            f"{i} = torch.tensor({vals!r}, dtype=torch.int64).reshape({tuple(sh)!r}).clone().to(dev)",
            [],
            "idx",
            i,
        )
        g.tags[i] = "D0"
        uses.append(i)
        if f == "gather":
            line = f"{name} = torch.gather({x}, {dim}, {i})"
        elif f == "take_along_dim":
            line = f"{name} = torch.take_along_dim({x}, {i}, {dim})"
        else:
            o = g.out_for(sh, t.dtype, [x])
            uses.append(o)
            line = f"{name} = torch.gather({x}, {dim}, {i}, out={o})"
    elif f in ("scatter_", "scatter_add_", "scatter_reduce_", "scatter"):
        src = g.pick(lambda u: u.dtype == t.dtype and u.dim() == d) or x
        s = g.T(src)
        sh = [min(a, b) for a, b in zip(s.shape, t.shape, strict=True)]
        total = 1
        for q in sh:
            total *= q
        vals = [r.randint(0, max(0, n - 1)) for _ in range(total)]
        if bad and vals:
            vals[0] = -1
        i = g.fresh("i")
        g.try_emit(
            f"{i} = torch.tensor({vals!r}, dtype=torch.int64).reshape({tuple(sh)!r}).clone().to(dev)",
            [],
            "idx",
            i,
        )
        g.tags[i] = "D0"
        uses += [i, src]
        if f == "scatter_":
            if r.random() < 0.3:
                line = f"{name} = {x}.scatter_({dim}, {i}, {r.choice(['1.5', '2', 'True'])})"
            else:
                red = r.choice(["", ", reduce='add'", ", reduce='multiply'"])
                line = f"{name} = {x}.scatter_({dim}, {i}, {src}{red})"
        elif f == "scatter":
            line = f"{name} = torch.scatter({x}, {dim}, {i}, {src})"
        elif f == "scatter_add_":
            line = f"{name} = {x}.scatter_add_({dim}, {i}, {src})"
        else:
            red = r.choice(["sum", "prod", "mean", "amax", "amin"])
            line = f"{name} = {x}.scatter_reduce_({dim}, {i}, {src}, {red!r}, include_self={r.choice([True, False])})"
    elif f in ("index_add_", "index_copy_", "index_add_out", "index_reduce_"):
        i = g.index_tensor(n, k, allow_neg=False, bad=bad)
        sh = list(t.shape)
        sh[dim] = k
        src = g.pick(lambda u: list(u.shape) == sh and u.dtype == t.dtype)
        if src is None:
            src = g.fresh("s")
            g.try_emit(
                f"{src} = mk({tuple(sh)!r}, {str(t.dtype).replace('torch.', '')!r}, {r.randrange(99)}, dev)",
                [],
                "base",
                src,
            )
            g.tags[src] = "D0"
        uses += [i, src]
        if f == "index_add_":
            line = f"{name} = {x}.index_add_({dim}, {i}, {src}{r.choice(['', ', alpha=2'])})"
        elif f == "index_copy_":
            line = f"{name} = {x}.index_copy_({dim}, {i}, {src})"
        elif f == "index_reduce_":
            line = f"{name} = {x}.index_reduce_({dim}, {i}, {src}, {r.choice(['prod', 'mean', 'amax', 'amin'])!r}, include_self={r.choice([True, False])})"
        else:
            o = g.out_for(t.shape, t.dtype, [x, src])
            uses.append(o)
            line = f"{name} = torch.index_add({x}, {dim}, {i}, {src}, out={o})"
    elif f == "index_fill_":
        i = g.index_tensor(n, k, bad=bad)
        uses.append(i)
        line = f"{name} = {x}.index_fill_({dim}, {i}, {r.choice(['-2', '0.5', 'True'])})"
    elif f in ("index_put_", "index_put_acc", "setitem"):
        i = g.index_tensor(n, k, bad=bad)
        uses.append(i)
        v, vu = g.operand(x)
        uses += vu
        idx = ", ".join([":"] * dim + [i])
        if f == "setitem":
            line = f"{x}[{idx}] = {v}"
            name = None
        else:
            acc = "True" if f == "index_put_acc" else "False"
            line = (
                f"{name} = {x}.index_put_(({', '.join(['slice(None)'] * 0)}{i},), {v if vu else 'torch.tensor(' + v + ')'}, accumulate={acc})"
                if dim == 0
                else f"{name} = {x}.index_put_(({i},), {v if vu else 'torch.tensor(' + v + ')'}, accumulate={acc})"
            )
    elif f in (
        "masked_fill_",
        "masked_scatter_",
        "masked_select",
        "masked_select_out",
        "getitem_bool",
        "setitem_bool",
    ):
        m = g.pick(lambda u: u.dtype == torch.bool and bcastable(u.shape, t.shape))
        if m is None or r.random() < 0.5:
            m = g.fresh("m")
            vals = [r.random() < 0.5 for _ in range(t.numel())]
            g.try_emit(
                f"{m} = torch.tensor({vals!r}, dtype=torch.bool).reshape({tuple(t.shape)!r}).clone().to(dev)",
                [],
                "mask",
                m,
            )
            g.tags[m] = "D0"
        uses.append(m)
        if f == "masked_fill_":
            v, vu = g.operand(x)
            uses += vu
            line = f"{name} = {x}.masked_fill_({m}, {v})"
        elif f == "masked_scatter_":
            src = g.pick(lambda u: u.dtype == t.dtype) or x
            uses.append(src)
            line = f"{name} = {x}.masked_scatter_({m}, {src})"
        elif f == "masked_select":
            line = f"{name} = torch.masked_select({x}, {m})"
        elif f == "getitem_bool":
            line = f"{name} = {x}[{m}]"
        elif f == "setitem_bool":
            line = f"{x}[{m}] = {r.choice(FILLS)}"
            name = None
        else:
            o = g.out_for((0,), t.dtype, [x])
            uses.append(o)
            line = f"{name} = torch.masked_select({x}, {m}, out={o})"
    elif f in ("take", "put_"):
        i = g.index_tensor(max(1, t.numel()), k, bad=bad)
        uses.append(i)
        if f == "take":
            line = f"{name} = torch.take({x}, {i})"
        else:
            src = g.pick(lambda u: u.dtype == t.dtype and u.numel() == k)
            if src is None:
                src = g.fresh("s")
                g.try_emit(
                    f"{src} = mk(({k},), {str(t.dtype).replace('torch.', '')!r}, {r.randrange(99)}, dev)",
                    [],
                    "base",
                    src,
                )
                g.tags[src] = "D0"
            uses.append(src)
            line = f"{name} = {x}.put_({i}, {src}, accumulate={r.choice([True, False])})"
    elif f == "getitem":
        i = g.index_tensor(n, k, bad=bad)
        uses.append(i)
        idx = ", ".join([":"] * dim + [i])
        line = f"{name} = {x}[{idx}]"
    elif f in ("nonzero", "nonzero_out"):
        if f == "nonzero":
            line = f"{name} = torch.nonzero({x}{r.choice(['', ', as_tuple=True'])})"
        else:
            o = g.out_for((0, d), torch.int64, [x])
            uses.append(o)
            line = f"{name} = torch.nonzero({x}, out={o})"
    if line is None:
        return
    g.try_emit(line, uses, f, name, allow_error=0.25)
