"""Unary, binary and ternary pointwise ops in functional, method, in-place, ``out=`` and
``alpha=`` forms."""

from __future__ import annotations

import torch

UNARY = [
    "abs",
    "neg",
    "exp",
    "sin",
    "sqrt",
    "floor",
    "sign",
    "sigmoid",
    "logical_not",
    "bitwise_not",
    "reciprocal",
    "round",
    "trunc",
    "square",
    "frac",
    "erf",
    "relu",
    "nan_to_num",
    "log",
    "tanh",
    "ceil",
    "isnan",
    "signbit",
    "angle",
    "positive",
    "conj_physical",
    "sgn",
    "expm1",
    "rsqrt",
    "clone",
    "deg2rad",
    "log1p",
    "isinf",
]
BINARY = [
    "add",
    "sub",
    "mul",
    "div",
    "maximum",
    "minimum",
    "pow",
    "eq",
    "lt",
    "ge",
    "logical_and",
    "logical_or",
    "bitwise_and",
    "bitwise_xor",
    "fmod",
    "remainder",
    "atan2",
    "hypot",
    "copysign",
    "floor_divide",
    "fmax",
    "fmin",
    "xlogy",
    "ne",
    "bitwise_left_shift",
    "true_divide",
    "heaviside",
    "nextafter",
    "rsub",
]


def unary(g):
    x = g.pick()
    if x is None:
        return
    f = g.r.choice(UNARY)
    form = g.r.choice(["fn", "inplace", "out", "out", "method"])
    name = g.fresh("r")
    if form == "fn":
        line = f"{name} = torch.{f}({x})"
    elif form == "method":
        line = f"{name} = {x}.{f}()"
    elif form == "inplace":
        line = f"{name} = {x}.{f}_()"
    else:
        t = g.T(x)
        try:
            ref = getattr(torch, f)(t)
        except Exception:
            ref = t
        o = g.out_for(ref.shape, ref.dtype, [x])
        line = f"{name} = torch.{f}({x}, out={o})"
        g.try_emit(line, [x, o], f"{f}:{form}", name, allow_error=0.25)
        return
    g.try_emit(line, [x], f"{f}:{form}", name, allow_error=0.1)


def binary(g):
    x = g.pick()
    if x is None:
        return
    f = g.r.choice(BINARY)
    y, yu = g.operand(x)
    form = g.r.choice(["fn", "inplace", "inplace", "out", "out", "alpha"])
    name = g.fresh("r")
    if form == "fn":
        line = f"{name} = torch.{f}({x}, {y})"
    elif form == "alpha" and f in ("add", "sub"):
        line = f"{name} = torch.{f}({x}, {y}, alpha={g.r.choice(['2', '0.5', '-1'])})"
    elif form in ("inplace", "alpha"):
        line = f"{name} = {x}.{f}_({y})" if f != "rsub" else f"{name} = {x}.sub_({y})"
    else:
        try:
            ref = getattr(torch, f)(g.T(x), eval(y, g.ns))
        except Exception:
            ref = g.T(x)
        o = g.out_for(ref.shape, ref.dtype, [x] + yu)
        line = f"{name} = torch.{f}({x}, {y}, out={o})"
        g.try_emit(line, [x, o] + yu, f"{f}:{form}", name, allow_error=0.25)
        return
    g.try_emit(line, [x] + yu, f"{f}:{form}", name, allow_error=0.15)


def ternary(g):
    x = g.pick()
    if x is None:
        return
    r = g.r
    y, yu = g.operand(x, allow_scalar=False)
    z, zu = g.operand(x, allow_scalar=False)
    f = r.choice(
        [
            "where",
            "lerp",
            "addcmul",
            "addcdiv",
            "clamp",
            "addcmul_",
            "lerp_",
            "clamp_",
            "where_out",
            "addcmul_out",
            "clamp_out",
        ]
    )
    name = g.fresh("r")
    uses = [x] + yu + zu
    if f == "where":
        line = (
            f"{name} = torch.where({x} > 0, {y}, {z})"
            if r.random() < 0.7
            else f"{name} = torch.where({y}.bool(), {x}, {z})"
        )
    elif f == "where_out":
        o = g.out_for(g.T(x).shape, g.T(x).dtype, uses)
        line = f"{name} = torch.where({x} > 0, {y}, {z}, out={o})"
        uses.append(o)
    elif f == "lerp":
        line = f"{name} = torch.lerp({x}, {y}, {r.choice(['0.5', z])})"
    elif f == "lerp_":
        line = f"{name} = {x}.lerp_({y}, {r.choice(['0.5', z])})"
    elif f in ("addcmul", "addcdiv"):
        line = f"{name} = torch.{f}({x}, {y}, {z}, value={r.choice(['1', '2', '-0.5'])})"
    elif f == "addcmul_":
        line = f"{name} = {x}.{r.choice(['addcmul_', 'addcdiv_'])}({y}, {z})"
    elif f == "addcmul_out":
        o = g.out_for(g.T(x).shape, g.T(x).dtype, uses)
        line = f"{name} = torch.addcmul({x}, {y}, {z}, out={o})"
        uses.append(o)
    elif f == "clamp":
        line = (
            f"{name} = torch.clamp({x}, {y}, {z})"
            if r.random() < 0.5
            else f"{name} = torch.clamp({x}, min={r.choice(['-1', '0.5', 'None'])}, max={r.choice(['2', '1.5', 'None'])})"
        )
    elif f == "clamp_":
        line = (
            f"{name} = {x}.clamp_({y}, {z})"
            if r.random() < 0.5
            else f"{name} = {x}.clamp_(min=-1, max=1)"
        )
    else:
        o = g.out_for(g.T(x).shape, g.T(x).dtype, uses)
        line = f"{name} = torch.clamp({x}, {y}, {z}, out={o})"
        uses.append(o)
    g.try_emit(line, uses, f, name, allow_error=0.15)
