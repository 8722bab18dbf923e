"""The ops table of the topsaten kernel generator (tools/gen_kernels.py), by category.

Each entry names an aten operator, the category routine that serves it
(csrc/kernels/topsaten_categories.h) and the aten overloads it serves: the functional, ``out=``
and in-place spellings where torch has them (``add.Tensor``, ``add.out``, ``add_.Tensor``), so the
in-place forms an optimizer uses reach the kernel too. The topsaten function is derived as
``topsaten<PascalName>`` from the aten name (``index_select`` -> ``topsatenIndexSelect``) unless the
entry overrides it. Adding an op is one line here, if its category exists.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Op:
    #: aten base name, e.g. "add"
    name: str
    #: category routine in topsaten_categories.h
    category: str
    #: the aten overloads served ("" = the default overload)
    overloads: tuple[str, ...]
    #: topsaten function, when not topsaten<PascalName>
    tops: str | None = None
    #: extra C++ arguments for the category routine (after c, fn, name)
    args: str = ""
    #: a measured defect of the SDK function: the op is skipped even when the symbol exists
    broken: str | None = None


def _u(name: str, kind: str, *, inplace: bool = True) -> Op:
    forms = ("", "out") + (("_:",) if inplace else ())
    return Op(name, "unary", forms, args=f"tfl_gcu::UnaryKind::{kind}")


def _b(name: str, kind: str, overloads: tuple[str, ...], a: str = "self", b: str = "other") -> Op:
    return Op(name, "binary", overloads, args=f'tfl_gcu::BinaryKind::{kind}, "{a}", "{b}"')


_TENSOR_FORMS = ("Tensor", "out", "_:Tensor")
_COMPARE_FORMS = ("Tensor", "Scalar", "Tensor_out", "Scalar_out", "_:Tensor", "_:Scalar")

# An overload spelled "_:X" is the in-place operator name_ with overload X ("_:" alone: no overload).
OPS: list[Op] = [
    # ---- unary ----
    _u("abs", "KeepsDtype"),
    _u("neg", "KeepsDtype"),
    _u("relu", "KeepsDtype", inplace=True),
    _u("floor", "KeepsDtype"),
    _u("ceil", "KeepsDtype"),
    _u("sqrt", "ToFloat"),
    _u("rsqrt", "ToFloat"),
    _u("exp", "ToFloat"),
    _u("log", "ToFloat"),
    _u("sin", "ToFloat"),
    _u("cos", "ToFloat"),
    _u("tanh", "ToFloat"),
    _u("sigmoid", "ToFloat"),
    _u("reciprocal", "ToFloat"),
    _u("erf", "ToFloat"),
    _u("silu", "ToFloat"),
    _u("logical_not", "Logical"),
    # ---- binary ----
    _b("mul", "Arith", _TENSOR_FORMS + ("Scalar", "_:Scalar")),
    _b("div", "TrueDiv", _TENSOR_FORMS + ("Scalar", "_:Scalar")),
    _b("maximum", "Arith", ("", "out")),
    _b("minimum", "Arith", ("", "out")),
    _b("pow", "Pow", ("Tensor_Tensor", "Tensor_Tensor_out", "_:Tensor"), b="exponent"),
    # ---- activation backward ----
    _b("tanh_backward", "Arith", ("", "grad_input"), a="grad_output", b="output"),
    _b("sigmoid_backward", "Arith", ("", "grad_input"), a="grad_output", b="output"),
    Op(
        "threshold_backward",
        "binary_scalar",
        ("", "grad_input"),
        args='"grad_output", "self", "threshold"',
    ),
    # ---- binary with alpha ----
    Op("add", "binary_alpha", _TENSOR_FORMS + ("Scalar", "_:Scalar")),
    Op("sub", "binary_alpha", _TENSOR_FORMS + ("Scalar", "_:Scalar")),
    # ---- three operands (the optimizers' per-parameter updates) ----
    Op("addcmul", "pointwise3", ("", "out", "_:")),
    Op("addcdiv", "pointwise3", ("", "out", "_:")),
    Op("lerp", "lerp", ("Scalar", "Scalar_out", "_:Scalar")),
    # ---- compare ----
    _b("eq", "Compare", _COMPARE_FORMS),
    _b("ne", "Compare", _COMPARE_FORMS),
    _b("lt", "Compare", _COMPARE_FORMS),
    _b("le", "Compare", _COMPARE_FORMS),
    _b("gt", "Compare", _COMPARE_FORMS),
    _b("ge", "Compare", _COMPARE_FORMS),
    # ---- reductions with dims / dtype ----
    Op("sum", "reduce_sum", ("", "dim_IntList", "IntList_out"), args="false"),
    Op("mean", "reduce_sum", ("", "dim", "out"), args="true"),
    Op("amax", "reduce_extremum", ("", "out")),
    Op("amin", "reduce_extremum", ("", "out")),
    Op("all", "reduce_all", ("", "all_out")),
    Op("linalg_vector_norm", "vector_norm", ("", "out")),
    # ---- matmul family ----
    Op("mm", "mm", ("", "out"), args="2"),
    Op("bmm", "mm", ("", "out"), args="3"),
    Op("addmm", "addmm", ("", "out", "_:")),
    # ---- softmax forward / backward ----
    Op("_softmax", "softmax", ("", "out"), tops="topsatenSoftmaxForward"),
    Op("_log_softmax", "softmax", ("", "out"), tops="topsatenLogSoftmaxForward"),
    Op("_softmax_backward_data", "softmax_backward", ("", "out"), tops="topsatenSoftmaxBackward"),
    Op(
        "_log_softmax_backward_data",
        "softmax_backward",
        ("", "out"),
        tops="topsatenLogSoftmaxBackward",
    ),
    # ---- norms ----
    Op("native_layer_norm", "layer_norm", ("",)),
    Op(
        "native_layer_norm_backward",
        "layer_norm",
        ("",),
        broken="returns TOPSATEN_STATUS_SUCCESS and writes nothing (measured on the S60)",
    ),
    # ---- factories, fills, selection ----
    Op("arange", "arange", ("start_out",)),
    Op("fill", "fill", ("_:Scalar",), tops="topsatenFill_"),
    Op("zero", "zero", ("_:",), tops="topsatenZero"),
    Op("masked_fill", "masked_fill", ("Scalar", "_:Scalar"), tops="topsatenMasked_fill"),
    Op("where", "where", ("self", "self_out")),
    # ---- indexing (int32 indices) ----
    Op("index_select", "index_select", ("", "out")),
    Op("index_fill", "index_fill", ("int_Scalar", "_:int_Scalar")),
    Op("embedding_dense_backward", "embedding_backward", ("", "out")),
    Op("index", "index_tensor", ("Tensor", "Tensor_out")),
    Op("nonzero", "nonzero", ("", "out")),
    Op("nonzero_static", "nonzero", ("", "out"), tops="topsatenNonzero"),
    # ---- shape ----
    Op("cat", "cat", ("", "out")),
    Op(
        "_upsample_nearest_exact2d",
        "upsample_nearest_exact2d",
        ("", "out"),
        tops="topsatenUpsampleNearestExact2d",
    ),
]


def pascal(name: str) -> str:
    """``index_select`` -> ``IndexSelect``, ``_softmax`` -> ``Softmax``."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part)


def tops_name(op: Op) -> str:
    return op.tops or f"topsaten{pascal(op.name)}"


def aten_overloads(op: Op) -> list[tuple[str, str]]:
    """(operator name, overload name) pairs, e.g. ("add_", "Tensor")."""
    out = []
    for spelled in op.overloads:
        if spelled.startswith("_:"):
            out.append((f"{op.name}_", spelled[2:]))
        else:
            out.append((op.name, spelled))
    return out
