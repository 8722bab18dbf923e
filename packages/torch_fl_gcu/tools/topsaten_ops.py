"""The ops table of the topsaten kernel generator (tools/gen_kernels.py), by category.

Each entry names an aten operator, the category routine that serves it
(csrc/kernels/topsaten_categories.h) and the aten overloads it serves: the functional, ``out=``
and in-place spellings where torch has them (``add.Tensor``, ``add.out``, ``add_.Tensor``), so the
in-place forms an optimizer uses reach the kernel too. The topsaten function is derived as
``topsaten<PascalName>`` from the aten name (``index_select`` -> ``topsatenIndexSelect``) unless the
entry overrides it (``fn``, without the prefix). Adding an op is one line here, if its category
exists. The format is core's (``torch_fl.kit.kernel_ops``).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def _kit_dir() -> Path:
    """Core's ``torch_fl/kit``: the source tree's beside this package, else the installed core's
    (found without importing ``torch_fl``, which would start the device runtime)."""
    tree = Path(__file__).resolve().parents[2] / "torch_fl_core" / "src" / "torch_fl" / "kit"
    if tree.is_dir():
        return tree
    spec = importlib.util.find_spec("torch_fl")
    for root in (spec.submodule_search_locations or []) if spec else []:
        if (Path(root) / "kit" / "kernel_ops.py").is_file():
            return Path(root) / "kit"
    raise SystemExit("gen_kernels: torch_fl/kit not found: install torch-fl-core first")


if str(_kit_dir()) not in sys.path:
    sys.path.insert(0, str(_kit_dir()))
from kernel_ops import Op  # noqa: E402


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
    _u("silu", "FloatOnly"),
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
    Op("_softmax", "softmax", ("", "out"), fn="SoftmaxForward"),
    Op("_log_softmax", "softmax", ("", "out"), fn="LogSoftmaxForward"),
    Op("_softmax_backward_data", "softmax_backward", ("", "out"), fn="SoftmaxBackward"),
    Op(
        "_log_softmax_backward_data",
        "softmax_backward",
        ("", "out"),
        fn="LogSoftmaxBackward",
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
    Op("fill", "fill", ("_:Scalar",), fn="Fill_"),
    Op("zero", "zero", ("_:",), fn="Zero"),
    Op("masked_fill", "masked_fill", ("Scalar", "_:Scalar"), fn="Masked_fill"),
    Op("where", "where", ("self", "self_out")),
    # ---- indexing (int32 indices) ----
    Op("index_select", "index_select", ("", "out")),
    Op("index_fill", "index_fill", ("int_Scalar", "_:int_Scalar")),
    Op("embedding_dense_backward", "embedding_backward", ("", "out")),
    Op("index", "index_tensor", ("Tensor", "Tensor_out")),
    Op("nonzero", "nonzero", ("", "out")),
    Op("nonzero_static", "nonzero", ("", "out"), fn="Nonzero"),
    # ---- shape ----
    Op("cat", "cat", ("", "out")),
    Op(
        "_upsample_nearest_exact2d",
        "upsample_nearest_exact2d",
        ("", "out"),
        fn="UpsampleNearestExact2d",
    ),
]

#: Kernels written by hand (csrc/kernels/*.cpp) from topsaten-backed operators: aten overload ->
#: (the topsaten functions they need, None). Their schema is defined only when all exist.
HANDWRITTEN: dict[str, tuple[tuple[str, ...], None]] = {
    "_amp_foreach_non_finite_check_and_unscale_": (
        (
            "topsatenSub",
            "topsatenEq",
            "topsatenAll",
            "topsatenLogicalNot",
            "topsatenMaximum",
            "topsatenMul",
        ),
        None,
    ),
    "_amp_update_scale_": (
        (
            "topsatenNe",
            "topsatenAdd",
            "topsatenEq",
            "topsatenMul",
            "topsatenSub",
            "topsatenWhere",
            "topsatenZero",
        ),
        None,
    ),
}
