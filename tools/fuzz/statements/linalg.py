"""Small matrix ops, complex right-hand solves with ``out=`` among them (conj bits on
outputs)."""

from __future__ import annotations

import torch

from ..values import DTYPES


def linalg(g):
    """Small matrix ops, incl. complex right-hand solves with out= (conj bits on outputs)."""
    r = g.r
    dt = r.choice(["complex64", "float32", "float64"])
    n = r.choice([2, 3])
    a = g.fresh("A")
    g.try_emit(
        f"{a} = (mk(({n}, {n}), {dt!r}, {r.randrange(99)}, dev) + 4 * torch.eye({n}, device=dev)).to(torch.{dt})",
        [],
        "base",
        a,
    )
    g.tags[a] = "D0"
    b = g.fresh("B")
    bshape = r.choice([(n, 2), (2, n), (n,)])
    g.try_emit(f"{b} = mk({bshape!r}, {dt!r}, {r.randrange(99)}, dev)", [], "base", b)
    g.tags[b] = "D0"
    name = g.fresh("r")
    f = r.choice(
        [
            "solve",
            "lu_solve",
            "solve_triangular",
            "inv",
            "cholesky_solve",
            "det",
            "addr_",
            "addmv_",
            "baddbmm_",
            "addmm_",
            "matmul_out",
            "lstsq",
            "cross",
        ]
    )
    left = r.choice(["", ", left=False"])
    use_out = r.random() < 0.7
    uses = [a, b]
    if f == "solve":
        call = f"torch.linalg.solve({a}, {b}{left}"
    elif f == "lu_solve":
        lu = g.fresh("LU")
        g.try_emit(f"{lu} = torch.linalg.lu_factor({a})", [a], "base", lu)
        g.tags[lu] = "D0"
        uses.append(lu)
        call = (
            f"torch.linalg.lu_solve({lu}[0], {lu}[1], {b}{left}{r.choice(['', ', adjoint=True'])}"
        )
    elif f == "solve_triangular":
        call = f"torch.linalg.solve_triangular({a}.triu(), {b}, upper=True{left}"
    elif f == "inv":
        call = f"torch.linalg.inv({a}"
    elif f == "cholesky_solve":
        call = f"torch.cholesky_solve({b}, torch.linalg.cholesky({a} @ {a}.mH)"
    elif f == "det":
        call = f"torch.linalg.det({a}"
    elif f == "lstsq":
        call = f"torch.linalg.lstsq({a}, {b}"
        use_out = False
    elif f == "cross":
        call = f"torch.linalg.cross({b}, {b}.flip(0), dim=0"
    elif f == "matmul_out":
        call = f"torch.matmul({a}, {b}"
    else:
        x = g.pick(lambda u: u.dtype == DTYPES[dt]) or a
        uses.append(x)
        if f == "addr_":
            line = f"{name} = {x}.addr_({b}.flatten(), {b}.flatten()[:{r.choice([1, 2, 3])}])"
        elif f == "addmv_":
            line = f"{name} = {x}.addmv_({a}, {b}.flatten()[:{n}])"
        elif f == "addmm_":
            line = f"{name} = {x}.addmm_({a}, {a})"
        else:
            line = f"{name} = {x}.baddbmm_({a}[None], {a}[None])"
        g.try_emit(line, uses, f, name, allow_error=0.3)
        return
    if use_out:
        try:
            ref = eval(call + ")", g.ns)
        except Exception:
            ref = None
        if isinstance(ref, torch.Tensor):
            shared = ref.shape if f == "matmul_out" else None
            o = g.out_for(ref.shape, ref.dtype, uses, shared)
            uses.append(o)
            call += f", out={o}"
    g.try_emit(f"{name} = {call})", uses, f"linalg.{f}", name, allow_error=0.2)
