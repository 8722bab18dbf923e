"""Foreach ops over lists that may overlap (one tensor twice, views of one storage)."""

from __future__ import annotations


def foreach(g):
    r = g.r
    xs = [g.pick() for _ in range(r.randint(1, 3))]
    xs = [x for x in xs if x]
    if not xs:
        return
    if r.random() < 0.5:
        sib = g.same_storage(xs[0])
        if sib:
            xs.append(r.choice(sib))
    ys = []
    for x in xs:
        t = g.T(x)
        cand = g.tensors(lambda u, t=t: u.shape == t.shape)
        sib = g.same_storage(x, lambda u, t=t: u.shape == t.shape)
        pool = sib if sib and r.random() < 0.5 else cand
        ys.append(r.choice(pool) if pool else x)
    f = r.choice(
        [
            "_foreach_add_",
            "_foreach_add",
            "_foreach_mul_",
            "_foreach_neg_",
            "_foreach_copy_",
            "_foreach_zero_",
            "_foreach_addcmul_",
            "_foreach_lerp_",
            "_foreach_norm",
            "_foreach_max",
            "_foreach_sub_",
            "_foreach_div_",
            "_foreach_abs_",
            "_foreach_maximum_",
            "_foreach_clamp_min_",
            "_foreach_pow",
            "_foreach_sqrt_",
            "_foreach_mul_tensor",
        ]
    )
    name = g.fresh("r")
    L = "[" + ", ".join(xs) + "]"
    Y = "[" + ", ".join(ys) + "]"
    uses = xs + ys
    if f in (
        "_foreach_add_",
        "_foreach_add",
        "_foreach_sub_",
        "_foreach_mul_",
        "_foreach_div_",
        "_foreach_maximum_",
        "_foreach_pow",
    ):
        arg = r.choice(
            [
                Y,
                "2",
                "[" + ", ".join(["0.5"] * len(xs)) + "]",
                Y + ", alpha=2" if "add" in f or "sub" in f else Y,
            ]
        )
        line = f"{name} = torch.{f}({L}, {arg})"
    elif f == "_foreach_mul_tensor":
        c = g.pick(lambda u: u.dim() == 0, tags=("D0", "C0"))
        if c is None:
            return
        uses.append(c)
        line = f"{name} = torch._foreach_mul_({L}, {c})"
    elif f in (
        "_foreach_neg_",
        "_foreach_zero_",
        "_foreach_abs_",
        "_foreach_sqrt_",
        "_foreach_norm",
        "_foreach_max",
    ):
        line = f"{name} = torch.{f}({L})"
    elif f == "_foreach_copy_":
        line = f"{name} = torch._foreach_copy_({L}, {Y})"
    elif f == "_foreach_addcmul_":
        line = f"{name} = torch._foreach_addcmul_({L}, {Y}, {Y}, {r.choice(['2', '0.5'])})"
    elif f == "_foreach_lerp_":
        line = f"{name} = torch._foreach_lerp_({L}, {Y}, 0.5)"
    elif f == "_foreach_clamp_min_":
        line = f"{name} = torch._foreach_clamp_min_({L}, 0)"
    g.try_emit(line, uses, f, name, allow_error=0.2)
