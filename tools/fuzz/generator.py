"""The generator: a program grows one statement at a time, each executed on CPU first, so that
most programs are valid and a few end in an error on purpose. Statement kinds live in
``statements``; this class holds the program's variables and what every kind needs (picking
operands, out= tensors, index tensors)."""

from __future__ import annotations

import os
import random
import re
import sys
import warnings

import torch

from .state import contains_tensor
from .statements import KINDS
from .values import MAIN_DTYPES, PROGRAM_GLOBALS, SHAPES


class Gen:
    """One program being generated from one seed (the same seed gives the same program)."""

    def __init__(self, seed):
        self.seed = seed
        self.r = random.Random(seed)
        self.lines: list[str] = []
        self.meta: list[dict] = []  # per line: {"uses": [...], "op": name}
        self.ns = dict(PROGRAM_GLOBALS)
        self.ns["dev"] = "cpu"
        self.ns["dev1"] = "cpu"
        self.tags: dict[str, str] = {}  # var -> D0 / D1 / C0 (cpu 0-dim) / CN (cpu non-0-dim)
        self.counter = 0
        self.ended = False

    # -- variables ----------------------------------------------------------------------
    def fresh(self, prefix):
        self.counter += 1
        return f"{prefix}{self.counter}"

    def tensors(self, pred=None, tags=("D0", "D1")):
        out = []
        for n, tag in self.tags.items():
            t = self.ns.get(n)
            if isinstance(t, torch.Tensor) and tag in tags and (pred is None or pred(t)):
                out.append(n)
        return out

    def pick(self, pred=None, tags=("D0", "D1")):
        c = self.tensors(pred, tags)
        return self.r.choice(c) if c else None

    def same_storage(self, name, pred=None):
        t = self.ns[name]
        if not isinstance(t, torch.Tensor):
            return []
        k = t.untyped_storage()._cdata
        return [
            n for n in self.tensors(pred) if n != name and self.ns[n].untyped_storage()._cdata == k
        ]

    def T(self, n):
        return self.ns[n]

    def tag_of(self, uses):
        tags = {self.tags.get(u) for u in uses if u in self.tags}
        if "D1" in tags and "D0" not in tags:
            return "D1"
        if "D0" in tags or "D1" in tags:
            return "D0"
        if "CN" in tags:
            return "CN"
        return "C0"

    # -- emitting -------------------------------------------------------------------------
    def try_emit(self, line, uses, op, target=None, allow_error=0.0):
        """Executes `line` on CPU; keeps it if it works (or, with prob allow_error, fails)."""
        if os.environ.get("FUZZ_TRACE_GEN"):
            print("gen:", line, file=sys.stderr, flush=True)
        uses = [u for u in dict.fromkeys(uses) if re.search(rf"\b{u}\b", line)]
        snapshot_ns = dict(self.ns)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                exec(compile(line, "<gen>", "exec"), self.ns)
                ok = True
            except Exception:
                ok = False
        if not ok:
            if self.r.random() < allow_error:
                self.lines.append(line)
                self.meta.append({"uses": uses, "op": op, "cpu_error": True})
                self.ended = True
                return True
            self.ns.clear()
            self.ns.update(snapshot_ns)
            return False
        self.lines.append(line)
        self.meta.append({"uses": uses, "op": op})
        if target is not None:
            # A result holding tensors (a tuple of them too) becomes a variable
            v = self.ns.get(target)
            if contains_tensor(v):
                self.tags[target] = self.tag_of(uses)
            else:
                self.ns.pop(target, None)
        return True

    # -- bases ---------------------------------------------------------------------------
    def base(self, on_dev1=False):
        shape = self.r.choice(SHAPES)
        dtype = self.r.choice(MAIN_DTYPES + ["float32", "float32", "int64"])
        special = self.r.random() < 0.3
        name = self.fresh("b")
        d = "dev1" if on_dev1 else "dev"
        line = f"{name} = mk({shape!r}, {dtype!r}, {self.r.randrange(1000)}, {d}{', special=True' if special else ''})"
        self.try_emit(line, [], "base", name)
        self.tags[name] = "D1" if on_dev1 else "D0"

    def cpu_const(self, zero_dim=True):
        name = self.fresh("c" if zero_dim else "C")
        dtype = self.r.choice(["float32", "int64", "float64", "bool", "complex64"])
        shape = () if zero_dim else self.r.choice([(3,), (1,), (3, 4), (4,)])
        line = f"{name} = mk({shape!r}, {dtype!r}, {self.r.randrange(1000)}, 'cpu')"
        self.try_emit(line, [], "cpuconst", name)
        self.tags[name] = "C0" if zero_dim else "CN"

    # -- views ---------------------------------------------------------------------------

    def out_for(self, shape, dtype, inputs, exact_if_shared=None):
        """An out= tensor: an input, a view sharing an input's storage, fresh (right/wrong
        shape or dtype, non-contiguous), or another variable. Emits its creation if fresh.

        exact_if_shared: the result's shape, for ops whose out= must not be resized while it
        shares memory with an input (the matmul family, kthvalue): CPU reads the resized
        input, and its own result then changes from run to run. A candidate that shares an
        input's storage is taken only when it has this shape."""
        r = self.r
        x = r.random()

        def usable(c):
            if exact_if_shared is None or tuple(self.T(c).shape) == tuple(exact_if_shared):
                return True
            k = self.T(c).untyped_storage()._cdata
            return all(
                not isinstance(self.ns.get(u), torch.Tensor)
                or self.ns[u].untyped_storage()._cdata != k
                for u in inputs
            )

        if x < 0.2 and inputs:
            c = r.choice(inputs)
            if usable(c):
                return c
        if x < 0.4 and inputs:
            sib = self.same_storage(r.choice(inputs))
            if sib:
                c = r.choice(sib)
                if usable(c):
                    return c
        if x < 0.5:
            other = self.pick()
            if other and usable(other):
                return other
        name = self.fresh("o")
        y = r.random()
        sh = tuple(shape)
        dt = dtype
        if y < 0.15:
            sh = r.choice([(0,), (1,), (7,), (2, 2)])
        elif y < 0.25:
            dt = r.choice([torch.float32, torch.int64, torch.float64, torch.bool, torch.complex64])
        dts = str(dt).replace("torch.", "")
        d = "dev"
        if r.random() < 0.04:
            d = "'cpu'"  # out= on the CPU, flagos inputs
            if r.random() < 0.7:
                sh = ()
        if r.random() < 0.2 and len(sh) >= 2:
            rev = tuple(reversed(sh))
            line = (
                f"{name} = torch.zeros({rev!r}, dtype=torch.{dts}, device={d}).t()"
                if len(sh) == 2
                else f"{name} = torch.zeros({rev!r}, dtype=torch.{dts}, device={d}).permute({tuple(reversed(range(len(sh))))!r})"
            )
        elif r.random() < 0.15 and len(sh) >= 1:
            big = (sh[0] * 2,) + sh[1:]
            line = f"{name} = torch.zeros({big!r}, dtype=torch.{dts}, device={d})[::2]"
        else:
            line = f"{name} = torch.full({sh!r}, 7, dtype=torch.{dts}, device={d})"
        self.try_emit(line, [], "outalloc", name)
        self.tags[name] = "D0" if d == "dev" else ("C0" if sh == () else "CN")
        return name

    def operand(self, like, allow_scalar=True):
        """A second operand broadcastable with `like`: a tensor var, a python scalar, a CPU
        0-dim tensor, or (rarely) a non-0-dim CPU tensor."""
        r = self.r
        t = self.T(like)
        x = r.random()
        if allow_scalar and x < 0.15:
            return r.choice(["2", "0.5", "-1", "True", "3j", "float('nan')", "0"]), []
        if x < 0.22:
            cs = self.tensors(tags=("C0",))
            if not cs or r.random() < 0.3:
                self.cpu_const(True)
                cs = self.tensors(tags=("C0",))
            c = r.choice(cs)
            return c, [c]
        if x < 0.25:
            self.cpu_const(False)
            c = self.tensors(tags=("CN",))[-1]
            return c, [c]

        def bc(u):
            try:
                torch.broadcast_shapes(u.shape, t.shape)
                return True
            except RuntimeError:
                return False

        if x < 0.45:
            sib = self.same_storage(like, bc)
            if sib:
                s = r.choice(sib)
                return s, [s]
        if x < 0.5:
            return like, [like]
        o = self.pick(bc, tags=("D0", "D1") if r.random() < 0.1 else ("D0",))
        if o is None:
            o = like
        return o, [o]

    def index_tensor(self, n, k, allow_neg=True, bad=False):
        """An int64 index tensor of k values in [-n, n) on dev (or CPU)."""
        r = self.r
        lo = -n if allow_neg else 0
        vals = [r.randint(lo, n - 1) if n else 0 for _ in range(k)]
        if bad and vals:
            vals[r.randrange(len(vals))] = n + r.randint(0, 3)
        name = self.fresh("i")
        where = "dev" if r.random() < 0.9 else "'cpu'"
        dt = "torch.int64" if r.random() < 0.9 else "torch.int32"
        self.try_emit(
            f"{name} = torch.tensor({vals!r}, dtype={dt}, device={where})", [], "idx", name
        )
        self.tags[name] = "D0" if where == "dev" else "CN"
        return name

    def program(self, max_ops=None):
        r = self.r
        nb = r.randint(1, 3)
        for i in range(nb):
            self.base(on_dev1=(i > 0 and r.random() < 0.15))
        n = max_ops or r.randint(1, 6)
        kinds = KINDS
        for _ in range(n):
            for _try in range(30):
                before = len(self.lines)
                r.choice(kinds)(self)
                if len(self.lines) > before and self.meta[-1]["op"] not in (
                    "idx",
                    "mask",
                    "outalloc",
                    "cpuconst",
                    "base",
                ):
                    break
                if self.ended:
                    break
            if self.ended:
                break
        return self.lines, self.meta


def gen_program(
    seed: int, max_ops: int | None = None
) -> tuple[list[str], list[dict], dict[str, str]]:
    """The program of a seed: its statements, per statement what it uses and its op, and the
    device tag of every variable."""
    g = Gen(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # generation runs everything on CPU: nothing to compare
        lines, meta = g.program(max_ops)
    return lines, meta, dict(g.tags)
