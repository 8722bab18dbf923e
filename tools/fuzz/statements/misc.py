"""Everything else a program does to one variable: joins, copies and fills, in-place view ops,
``resize_``/``set_``, the matmul family, conversions and comparisons, ``out=`` forms of
creation ops.

A statement is a table entry: a template of ``{name}`` (the result variable) and ``{x}`` (the
picked variable), or a builder called with the statement's context that returns the line (or
None to emit nothing) and may add the variables it uses. ``ORDER`` is the draw: a name is
picked uniformly from it, so a name listed once more is drawn more often, and the order is
part of what a seed means (the same seed gives the same program).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..values import FILLS2, MAIN_DTYPES, bcastable


@dataclass
class Context:
    g: Any  # the Gen
    x: str
    name: str
    uses: list[str] = field(default_factory=list)

    @property
    def r(self):
        return self.g.r

    @property
    def t(self) -> torch.Tensor:
        return self.g.T(self.x)

    @property
    def d(self) -> int:
        return self.t.dim()

    def same_dtype(self) -> str:
        """Another variable of x's dtype (x itself if none), used by the statement."""
        y = self.g.pick(lambda u: u.dtype == self.t.dtype) or self.x
        self.uses.append(y)
        return y

    def any_other(self, pred=None) -> str:
        y = self.g.pick(pred) or self.x
        self.uses.append(y)
        return y

    def out(self, shape, dtype, inputs, exact_if_shared=None) -> str:
        o = self.g.out_for(shape, dtype, inputs, exact_if_shared)
        self.uses.append(o)
        return o

    def operand(self) -> str:
        y, used = self.g.operand(self.x)
        self.uses += used
        return y


Builder = Callable[[Context], "str | None"]

TEMPLATES: dict[str, str] = {
    "zero_": "{name} = {x}.zero_()",
    "contiguous": "{name} = {x}.contiguous()",
    "clone_fmt": "{name} = {x}.clone(memory_format=torch.preserve_format)",
    "histc": "{name} = torch.histc({x}, bins=4, min=-2, max=2)",
    "cumsum_": "{name} = {x}.cumsum_(0)",
    "sort_stable": "{name} = torch.sort({x}, stable=True, dim=0)",
    "view_as_real_add": "{name} = torch.view_as_real({x}).add_(1)",
    "detach_": "{name} = {x}.detach_()",
    "requires_grad_": "{name} = {x}.requires_grad_()",
    "renorm": "{name} = torch.renorm({x}, 2, 0, 1.0)",
    "diff": "{name} = torch.diff({x})",
    "bitwise_not_": "{name} = {x}.bitwise_not_()",
    "t_": "{name} = {x}.t_()",
    "unsqueeze_": "{name} = {x}.unsqueeze_(0)",
    "squeeze_": "{name} = {x}.squeeze_()",
    "item": "{name} = {x}.item()",
    "tolist": "{name} = {x}.tolist()",
}

# Templates with one drawn part: {pick} is replaced by a choice among the listed strings.
CHOICES: dict[str, tuple[str, list[str]]] = {
    "bincount": ("{name} = torch.bincount({x}{pick})", ["", ", minlength=7"]),
    "real_add": ("{name} = {x}.{pick}.mul_(2)", ["real", "imag"]),
    "float": ("{name} = {x}.{pick}()", ["float", "double", "long", "bool", "bfloat16", "int"]),
    "clamp_min_": ("{name} = {x}.clamp_min_({pick})", ["0", "0.5"]),
    "exp_": ("{name} = {x}.{pick}()", ["exp_", "sqrt_", "abs_", "sigmoid_", "floor_", "log_"]),
}

BUILDERS: dict[str, Builder] = {}


def builder(*names: str) -> Callable[[Builder], Builder]:
    def register(fn: Builder) -> Builder:
        for n in names:
            BUILDERS[n] = fn
        return fn

    return register


@builder("cat", "cat_out", "stack", "stack_out", "hstack", "hstack_out", "cat_dim")
def _join(c: Context, f: str) -> str:
    g, r, x, t, d = c.g, c.r, c.x, c.t, c.d
    others = [x] + [
        g.pick(lambda u: u.dtype == t.dtype or r.random() < 0.2) or x
        for _ in range(r.randint(0, 3))
    ]
    sib = g.same_storage(x)
    if sib and r.random() < 0.5:
        others.append(r.choice(sib))
    c.uses[:] = list(dict.fromkeys(others))
    lst = ", ".join(others)
    fn = f.split("_")[0]
    dimarg = (
        f", dim={r.randint(-1, max(0, d - 1))}"
        if f == "cat_dim" or (fn != "hstack" and r.random() < 0.3)
        else ""
    )
    if f == "cat_dim":
        fn = "cat"
    if not f.endswith("_out"):
        return f"{c.name} = torch.{fn}([{lst}]{dimarg})"
    try:
        ref = getattr(torch, fn)([g.T(o) for o in others])
        sh, dt = ref.shape, ref.dtype
    except Exception:
        sh, dt = t.shape, t.dtype
    o = c.out(sh, dt, others)
    return f"{c.name} = torch.{fn}([{lst}]{dimarg}, out={o})"


@builder("copy_", "copy_bcast")
def _copy(c: Context, f: str) -> str | None:
    g, r, t = c.g, c.r, c.t
    src = g.pick() if f == "copy_" else g.pick(lambda u: bcastable(u.shape, t.shape))
    if src is None:
        return None
    if r.random() < 0.1:
        g.cpu_const(r.random() < 0.5)
        src = list(g.tags)[-1]
    c.uses.append(src)
    return f"{c.name} = {c.x}.copy_({src}{r.choice(['', ', non_blocking=True'])})"


@builder("fill_")
def _fill(c: Context, f: str) -> str:
    r = c.r
    line = f"{c.name} = {c.x}.fill_({r.choice(FILLS2)})"
    if r.random() < 0.2:
        k = c.g.pick(tags=("C0",))
        if k:
            c.uses.append(k)
            return f"{c.name} = {c.x}.fill_({k})"
    return line


@builder("to")
def _to(c: Context, f: str) -> str:
    dt = c.r.choice(MAIN_DTYPES)
    return f"{c.name} = {c.x}.to(torch.{dt}{c.r.choice(['', ', copy=True'])})"


@builder("flip")
def _flip(c: Context, f: str) -> str:
    return f"{c.name} = torch.flip({c.x}, {tuple(range(c.d))!r})"


@builder("roll")
def _roll(c: Context, f: str) -> str:
    return f"{c.name} = torch.roll({c.x}, {c.r.randint(-3, 3)}{', 0' if c.d else ''})"


@builder("tril_", "triu", "tril_out")
def _triangle(c: Context, f: str) -> str | None:
    k = c.r.randint(-1, 1)
    if f == "tril_":
        return f"{c.name} = {c.x}.tril_({k})"
    if f == "triu":
        return f"{c.name} = torch.triu({c.x}, {k})"
    if c.d > 3:
        return None  # CPU's own bug: tril out= a permuted 4-d tensor writes out of bounds
    o = c.out(c.t.shape, c.t.dtype, [c.x])
    return f"{c.name} = torch.tril({c.x}, {k}, out={o})"


@builder("repeat")
def _repeat(c: Context, f: str) -> str:
    return f"{c.name} = {c.x}.repeat({', '.join(['2'] + ['1'] * c.d)})"


@builder("diag")
def _diag(c: Context, f: str) -> str:
    return f"{c.name} = torch.diag({c.x}, {c.r.randint(-1, 1)})"


# The matmul family: a second operand of x's dtype, some a third.
MATMUL_PLAIN = ("cross", "mm", "mv", "dot", "matmul", "outer", "bmm", "ger", "kron", "vdot")
# In-place forms with a third operand: (method, extra keyword arguments drawn after it)
MATMUL_INPLACE = {"addmm_": "addmm_", "baddbmm": "baddbmm_", "addmv_": "addmv_", "addr_": "addr_"}


@builder(*MATMUL_PLAIN, "mm_out", "addmm_out", *MATMUL_INPLACE)
def _matmul(c: Context, f: str) -> str:
    g, r, t, x = c.g, c.r, c.t, c.x
    y = c.same_dtype()
    if f == "mm_out":
        try:
            sh = torch.mm(t, g.T(y)).shape
        except Exception:
            sh = t.shape
        o = c.out(sh, t.dtype, [x, y], sh)
        return f"{c.name} = torch.mm({x}, {y}, out={o})"
    if f in MATMUL_PLAIN:
        return f"{c.name} = torch.{f}({x}, {y})"
    z = c.same_dtype()
    if f == "addmm_out":
        try:
            rsh = torch.addmm(t, g.T(y), g.T(z)).shape
        except Exception:
            rsh = t.shape
        o = c.out(t.shape, t.dtype, [x, y, z], rsh)
        return f"{c.name} = torch.addmm({x}, {y}, {z}, out={o})"
    if f == "addmm_":
        beta, alpha = r.choice(["1", "0", "0.5"]), r.choice(["1", "2"])
        return f"{c.name} = {x}.addmm_({y}, {z}, beta={beta}, alpha={alpha})"
    return f"{c.name} = {x}.{MATMUL_INPLACE[f]}({y}, {z})"


@builder("resize_")
def _resize(c: Context, f: str) -> str:
    sh = c.r.choice([(0,), (2,), (3, 3), (7,), (1, 2, 3), (20,), ()])
    return f"{c.name} = {c.x}.resize_({sh!r})"


@builder("resize_as_", "type_as")
def _like_other(c: Context, f: str) -> str:
    y = c.any_other()
    return f"{c.name} = {c.x}.{f}({y})"


@builder("set_")
def _set(c: Context, f: str) -> str:
    g, r, x, name = c.g, c.r, c.x, c.name
    y = c.any_other()
    off = r.randint(0, 2)
    line = r.choice(
        [
            f"{name} = {x}.set_({y})",
            f"{name} = {x}.set_({y}.untyped_storage(), {off}, (2,), (1,))",
            f"{name} = {x}.set_()",
        ]
    )
    if (
        "untyped_storage" in line
        and (off + 2) * c.t.element_size() > g.T(y).untyped_storage().nbytes()
    ):
        # set_ would grow the storage: the new bytes are uninitialized on CPU and CUDA (their
        # set_ does not fill them), and what a program computes from them is not reproducible
        line = f"{name} = {x}.set_({y})"
    return line


@builder("transpose_")
def _transpose(c: Context, f: str) -> str:
    return f"{c.name} = {c.x}.transpose_(0, {max(0, c.d - 1)})"


@builder("as_strided_")
def _as_strided(c: Context, f: str) -> str:
    return f"{c.name} = {c.x}.as_strided_((2,), (1,), {c.r.randint(0, 2)})"


@builder("equal", "allclose", "isclose")
def _compare(c: Context, f: str) -> str:
    y = c.any_other()
    nan = ", equal_nan=True" if f != "equal" and c.r.random() < 0.5 else ""
    return f"{c.name} = torch.{f}({c.x}, {y}{nan})"


@builder("fill_diagonal_")
def _fill_diagonal(c: Context, f: str) -> str:
    value = c.r.choice(["5", "-1.5"])
    return f"{c.name} = {c.x}.fill_diagonal_({value}, wrap={c.r.choice([True, False])})"


@builder("searchsorted")
def _searchsorted(c: Context, f: str) -> str:
    y = c.any_other()
    return f"{c.name} = torch.searchsorted({c.x}, {y}{c.r.choice(['', ', right=True'])})"


@builder("unique")
def _unique(c: Context, f: str) -> str:
    dim = c.r.choice(["", ", dim=0"])
    return f"{c.name} = torch.unique({c.x}, return_inverse=True, return_counts=True{dim})"


@builder("polar", "complex")
def _same_shape_pair(c: Context, f: str) -> str:
    y = c.any_other(lambda u: u.shape == c.t.shape)
    return f"{c.name} = torch.{f}({c.x}, {y})"


@builder("neg_view_add")
def _neg_view_add(c: Context, f: str) -> str:
    y = c.operand()
    return f"{c.name} = torch._neg_view({c.x}).add_({y})"


@builder("conj_add")
def _conj_add(c: Context, f: str) -> str:
    y = c.operand()
    return f"{c.name} = {c.x}.conj().{c.r.choice(['add_', 'mul_', 'copy_'])}({y})"


@builder("logical_xor_", "copysign_")
def _inplace_operand(c: Context, f: str) -> str:
    y = c.operand()
    return f"{c.name} = {c.x}.{f}({y})"


@builder("lerp_out")
def _lerp_out(c: Context, f: str) -> str:
    y = c.any_other(lambda u: bcastable(u.shape, c.t.shape))
    o = c.out(c.t.shape, c.t.dtype, [c.x, y])
    return f"{c.name} = torch.lerp({c.x}, {y}, 0.25, out={o})"


@builder("clamp_max_out")
def _clamp_max_out(c: Context, f: str) -> str:
    o = c.out(c.t.shape, c.t.dtype, [c.x])
    return f"{c.name} = torch.clamp_max({c.x}, 1, out={o})"


@builder("narrow_copy", "narrow_copy_out")
def _narrow_copy(c: Context, f: str) -> str | None:
    if c.d == 0:
        return None
    n = c.t.shape[0]
    s = c.r.randint(0, n)
    ln = c.r.randint(0, n - s)
    if f == "narrow_copy":
        return f"{c.name} = torch.narrow_copy({c.x}, 0, {s}, {ln})"
    o = c.out((ln,) + tuple(c.t.shape[1:]), c.t.dtype, [c.x])
    return f"{c.name} = torch.narrow_copy({c.x}, 0, {s}, {ln}, out={o})"


@builder("flatten_out")
def _flatten_out(c: Context, f: str) -> str:
    o = c.out((c.t.numel(),), c.t.dtype, [c.x])
    if c.r.random() < 0.5:
        return f"{c.name} = torch.reshape({c.x}, (-1,)).clone()"
    return f"{c.name} = torch.abs({c.x}.flatten(), out={o})"


@builder("any_out")
def _any_out(c: Context, f: str) -> str:
    o = c.out((), torch.bool, [c.x])
    return f"{c.name} = torch.any({c.x}, out={o})"


@builder("sum_to_size")
def _sum_to_size(c: Context, f: str) -> str:
    return f"{c.name} = {c.x}.sum_to_size({tuple(1 for _ in c.t.shape)!r})"


@builder("expand_copy")
def _expand_copy(c: Context, f: str) -> str:
    return f"{c.name} = torch.expand_copy({c.x}, {(2,) + tuple(c.t.shape)!r})"


# Creation ops writing out= a fresh tensor: the out= tensor is the only variable used.
CREATION_OUT = {
    "linspace_out": ((5,), torch.float32, "torch.linspace(0, 1, 5, out={o})"),
    "arange_out": ((4,), torch.int64, "torch.arange(4, out={o})"),
}


@builder(*CREATION_OUT)
def _creation_out(c: Context, f: str) -> str:
    shape, dtype, call = CREATION_OUT[f]
    o = c.g.out_for(shape, dtype, [])
    c.uses[:] = [o]
    return f"{c.name} = " + call.format(o=o)


@builder("full_like")
def _full_like(c: Context, f: str) -> str:
    fn = c.r.choice(["full_like", "zeros_like", "ones_like"])
    c.r.random()  # a draw that once decided the fill value: kept so that seeds keep their programs
    return f"{c.name} = torch.{fn}({c.x}{', 3' if fn == 'full_like' else ''})"


@builder("zeros_like_out")
def _zeros_out(c: Context, f: str) -> str:
    o = c.out(c.t.shape, c.t.dtype, [c.x])
    return f"{c.name} = torch.zeros({tuple(c.t.shape)!r}, out={o})"


@builder("index_select_self")
def _index_select_self(c: Context, f: str) -> str | None:
    if c.d == 0:
        return None
    i = c.g.index_tensor(c.t.shape[0], 2, allow_neg=False)
    c.uses.append(i)
    return f"{c.name} = torch.index_select({c.x}, 0, {i}, out={c.x})"


@builder("split_copy")
def _split_copy(c: Context, f: str) -> str:
    return f"{c.name} = torch.split_copy({c.x}, 1)" if c.d else f"{c.name} = {c.x}.clone()"


# The draw (see the module's docstring).
ORDER = [
    "cat", "cat_out", "stack", "stack_out", "copy_", "fill_", "zero_", "to", "contiguous",
    "clone_fmt", "flip", "roll", "tril_", "triu", "tril_out", "repeat", "diag", "cross", "mm",
    "mm_out", "addmm_", "addmm_out", "mv", "dot", "matmul", "outer", "bmm", "resize_",
    "resize_as_", "set_", "t_", "transpose_", "unsqueeze_", "squeeze_", "as_strided_", "item",
    "tolist", "equal", "allclose", "isclose", "bincount", "searchsorted", "histc",
    "fill_diagonal_", "cumsum_", "sort_stable", "unique", "polar", "complex", "view_as_real_add",
    "real_add", "neg_view_add", "conj_add", "type_as", "float", "clamp_min_", "exp_", "detach_",
    "requires_grad_", "renorm", "lerp_out", "baddbmm", "addmv_", "ger", "kron", "diff",
    "bitwise_not_", "logical_xor_", "clamp_max_out", "copy_bcast", "hstack", "hstack_out",
    "narrow_copy", "narrow_copy_out", "flatten_out", "addr_", "any_out", "sum_to_size",
    "expand_copy", "vdot", "linspace_out", "arange_out", "full_like", "zeros_like_out",
    "index_select_self", "copysign_", "cat_dim", "split_copy",
]  # fmt: skip


def build(c: Context, f: str) -> str | None:
    if f in TEMPLATES:
        return TEMPLATES[f].format(name=c.name, x=c.x)
    if f in CHOICES:
        template, picks = CHOICES[f]
        return template.format(name=c.name, x=c.x, pick=c.r.choice(picks))
    return BUILDERS[f](c, f)


def misc(g) -> None:
    x = g.pick()
    if x is None:
        return
    c = Context(g, x, g.fresh("r"), [x])
    f = g.r.choice(ORDER)
    line = build(c, f)
    if line is None:
        return
    g.try_emit(line, c.uses, f, c.name, allow_error=0.15)
