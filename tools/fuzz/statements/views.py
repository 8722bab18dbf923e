"""Views of a variable: transposes, slices, diagonals, overlapping ``as_strided``, expands,
dtype and conj/neg views."""

from __future__ import annotations

import torch


def view(g):
    src = g.pick()
    if src is None:
        return
    t = g.T(src)
    r = g.r
    d = t.dim()
    cands = []
    if d <= 2:
        cands.append(f"{src}.t()")
    if d >= 2:
        i, j = r.sample(range(d), 2)
        cands.append(f"{src}.transpose({i}, {j})")
        perm = list(range(d))
        r.shuffle(perm)
        cands.append(f"{src}.permute{tuple(perm)!r}")
        cands.append(f"{src}.diagonal({r.randint(-1, 1)}, {i}, {j})")
    if d >= 1:
        k = r.randrange(d)
        n = t.shape[k]
        s = r.randint(0, max(0, n - 1)) if n else 0
        ln = r.randint(0, n - s) if n else 0
        cands.append(f"{src}.narrow({k}, {s}, {ln})")
        step = r.choice([1, 2, 3])
        idx = [":"] * d
        idx[k] = f"{r.choice(['', '1'])}::{step}"
        cands.append(f"{src}[{', '.join(idx)}]")
        if n:
            cands.append(f"{src}.select({k}, {r.randrange(n)})")
        sz = r.randint(1, max(1, n)) if n else 1
        cands.append(f"{src}.unfold({k}, {sz}, {r.choice([1, 2])})")
        cands.append(f"{src}.flip({k})")  # not a view: a copy (control)
        cands.append(f"{src}.movedim({k}, 0)")
    if d == 4:
        cands.append(f"{src}.contiguous(memory_format=torch.channels_last)")
        cands.append(f"{src}.permute(0, 2, 3, 1)")
    cands.append(f"{src}.unsqueeze({r.randint(0, d)})")
    cands.append(f"{src}.squeeze()")
    cands.append(f"{src}.view(-1)")
    cands.append(f"{src}.reshape(-1)")
    cands.append(f"{src}.flatten()")
    cands.append(f"{src}.detach()")
    cands.append(f"{src}[None]")
    cands.append(f"{src}.expand({(2,) + tuple(t.shape)!r})")
    if d >= 1 and 1 in t.shape:
        sh = [3 if s == 1 else s for s in t.shape]
        cands.append(f"{src}.expand({sh!r})")
    # as_strided inside the storage, overlapping strides allowed
    nel = t.untyped_storage().nbytes() // max(1, t.element_size())
    if nel > 0:
        size = r.choice([(2,), (3,), (2, 2), (2, 3), (3, 2)])
        stride = tuple(r.choice([0, 1, 2, 3]) for _ in size)
        span = sum((s - 1) * st for s, st in zip(size, stride, strict=True))
        if span < nel:
            off = r.randint(0, nel - 1 - span)
            cands.append(f"{src}.as_strided({size!r}, {stride!r}, {off})")
    if t.is_complex():
        cands += [f"{src}.real", f"{src}.imag", f"{src}.conj()", f"torch.view_as_real({src})"]
    if t.dtype in (torch.float32, torch.float64, torch.int64):
        cands.append(f"torch._neg_view({src})")
    if t.dtype == torch.float32:
        cands.append(f"{src}.view(torch.int32)")
    if t.dtype == torch.float64 and d >= 1 and t.shape[-1] % 2 == 0:
        cands.append(f"{src}.view(torch.int64)")
    if t.dtype == torch.float32 and d >= 1 and t.shape[-1] % 2 == 0 and t.stride(-1) == 1:
        cands.append(f"torch.view_as_complex({src}.unflatten(-1, (-1, 2)))")
    cands.append(f"{src}.split(2)[-1]" if d >= 1 else f"{src}.view(1)")
    cands.append(f"{src}.chunk(2)[0]" if d >= 1 else f"{src}.view(1)")
    if d >= 1:
        cands.append(f"{src}.unbind()[0]")
    cands.append(f"{src}.mT" if d >= 2 else f"{src}.view_as({src})")
    expr = r.choice(cands)
    name = g.fresh("v")
    g.try_emit(f"{name} = {expr}", [src], "view:" + expr.split(src, 1)[-1].split("(")[0][:20], name)
