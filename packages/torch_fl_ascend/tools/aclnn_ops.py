"""The ops table of the ACLNN kernel generator (tools/gen_kernels.py), by category.

Each entry names an aten operator, the category routine that serves it
(csrc/kernels/aclnn_categories.h), the aten overloads it serves (functional, ``out=`` and in-place
spellings where torch has them, so the in-place forms an optimizer uses reach the kernel too), the
ACLNN function (``aclnn<Fn>``: the pair ``aclnn<Fn>GetWorkspaceSize`` + ``aclnn<Fn>``), the
``aclnnop/`` header declaring it and the dtypes ACLNN computes it in. A call whose compute dtype is
not listed is declined by the kernel (core serves it with its counted CPU fallback) and the route
table sends that first-tensor dtype to ``cpu`` up front (``op[float64, ...] = cpu``).

An overload spelled ``"_:X"`` is the in-place operator ``name_`` with overload ``X`` (``"_:"``
alone: no overload). Adding an op is one line here, if its category exists.
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
# ALL_DTYPES: every dtype a route rule can name. ACLNN computes none of them in complex dtypes
# here, so those go to the CPU up front too.
from kernel_ops import ALL_DTYPES, Op  # noqa: E402

FLOATS = ("float32", "float16", "bfloat16")
#: Arithmetic: the floating types and the integer types ACLNN computes in (no int16, no float64).
ARITH = FLOATS + ("int64", "int32", "int8", "uint8")
SIGNED = FLOATS + ("int64", "int32", "int8")
#: Selection, indexing, comparison and lists: arithmetic dtypes and bool.
WITH_BOOL = ARITH + ("bool",)
#: Fills: every real dtype (ACLNN's only float64 and int16 kernels are cast/copy/fill).
REAL = tuple(d for d in ALL_DTYPES if not d.startswith("complex"))


def _u(name: str, fn: str, header: str, kind: str, dtypes: tuple[str, ...]) -> Op:
    return Op(
        name, "unary", ("", "out", "_:"), fn, header, dtypes, f"tfl_ascend::UnaryKind::{kind}"
    )


def _cmp(name: str, pascal: str) -> list[Op]:
    snake = name
    return [
        Op(
            name,
            "compare",
            ("Tensor", "Tensor_out", "_:Tensor"),
            f"{pascal}Tensor",
            f"aclnn_{snake}_tensor.h",
            WITH_BOOL,
        ),
        Op(
            name,
            "compare_scalar",
            ("Scalar", "Scalar_out", "_:Scalar"),
            f"{pascal}Scalar",
            f"aclnn_{snake}_scalar.h",
            WITH_BOOL,
        ),
    ]


_TENSOR = ("Tensor", "out", "_:Tensor")
_SCALAR = ("Scalar", "_:Scalar")

OPS: list[Op] = [
    # ---- unary ----
    _u("abs", "Abs", "aclnn_abs.h", "KeepsDtype", SIGNED),
    _u("neg", "Neg", "aclnn_neg.h", "KeepsDtype", SIGNED),
    _u("relu", "Relu", "aclnn_relu.h", "KeepsDtype", ARITH),
    _u("floor", "Floor", "aclnn_floor.h", "KeepsDtype", FLOATS),
    _u("ceil", "Ceil", "aclnn_ceil.h", "KeepsDtype", FLOATS),
    _u("exp", "Exp", "aclnn_exp.h", "ToFloat", FLOATS),
    _u("log", "Log", "aclnn_log.h", "ToFloat", FLOATS),
    _u("sqrt", "Sqrt", "aclnn_sqrt.h", "ToFloat", FLOATS),
    _u("rsqrt", "Rsqrt", "aclnn_rsqrt.h", "ToFloat", FLOATS),
    _u("sin", "Sin", "aclnn_sin.h", "ToFloat", FLOATS),
    _u("cos", "Cos", "aclnn_cos.h", "ToFloat", FLOATS),
    _u("tanh", "Tanh", "aclnn_tanh.h", "ToFloat", FLOATS),
    _u("sigmoid", "Sigmoid", "aclnn_sigmoid.h", "ToFloat", FLOATS),
    _u("reciprocal", "Reciprocal", "aclnn_reciprocal.h", "ToFloat", FLOATS),
    _u("erf", "Erf", "aclnn_erf.h", "ToFloat", FLOATS),
    _u("silu", "Silu", "aclnn_silu.h", "FloatOnly", FLOATS),
    _u("logical_not", "LogicalNot", "aclnn_logical_not.h", "Logical", WITH_BOOL),
    Op("gelu", "gelu", ("", "out", "_:"), "GeluV2", "aclnn_gelu_v2.h", FLOATS),
    # ---- binary: tensor and scalar forms (the scalar forms take an aclScalar) ----
    Op("add", "binary_alpha", _TENSOR, "Add", "aclnn_add.h", ARITH),
    Op("add", "binary_alpha_scalar", _SCALAR, "Adds", "aclnn_add.h", ARITH),
    Op("sub", "binary_alpha", _TENSOR, "Sub", "aclnn_sub.h", ARITH),
    Op("sub", "binary_alpha_scalar", _SCALAR, "Subs", "aclnn_sub.h", ARITH),
    Op("mul", "binary", _TENSOR, "Mul", "aclnn_mul.h", ARITH, "tfl_ascend::BinaryKind::Arith"),
    Op(
        "mul",
        "binary_scalar",
        _SCALAR,
        "Muls",
        "aclnn_mul.h",
        ARITH,
        "tfl_ascend::BinaryKind::Arith",
    ),
    Op("div", "binary", _TENSOR, "Div", "aclnn_div.h", FLOATS, "tfl_ascend::BinaryKind::TrueDiv"),
    Op(
        "div",
        "binary_scalar",
        _SCALAR,
        "Divs",
        "aclnn_div.h",
        FLOATS,
        "tfl_ascend::BinaryKind::TrueDiv",
    ),
    Op(
        "maximum",
        "binary",
        ("", "out"),
        "Maximum",
        "aclnn_maximum.h",
        ARITH,
        "tfl_ascend::BinaryKind::Arith",
    ),
    Op(
        "minimum",
        "binary",
        ("", "out"),
        "Minimum",
        "aclnn_minimum.h",
        ARITH,
        "tfl_ascend::BinaryKind::Arith",
    ),
    Op(
        "pow",
        "pow_tensor",
        ("Tensor_Tensor", "Tensor_Tensor_out", "_:Tensor"),
        "PowTensorTensor",
        "aclnn_pow_tensor_tensor.h",
        FLOATS,
    ),
    Op(
        "pow",
        "pow_scalar",
        ("Tensor_Scalar", "Tensor_Scalar_out", "_:Scalar"),
        "PowTensorScalar",
        "aclnn_pow.h",
        FLOATS,
    ),
    # ---- compare (bool results) ----
    *_cmp("eq", "Eq"),
    *_cmp("ne", "Ne"),
    *_cmp("lt", "Lt"),
    *_cmp("le", "Le"),
    *_cmp("gt", "Gt"),
    *_cmp("ge", "Ge"),
    # ---- activation backward ----
    Op(
        "tanh_backward",
        "backward2",
        ("", "grad_input"),
        "TanhBackward",
        "aclnn_tanh_backward.h",
        FLOATS,
        '"grad_output", "output"',
    ),
    Op(
        "sigmoid_backward",
        "backward2",
        ("", "grad_input"),
        "SigmoidBackward",
        "aclnn_sigmoid_backward.h",
        FLOATS,
        '"grad_output", "output"',
    ),
    Op(
        "silu_backward",
        "backward2",
        ("", "grad_input"),
        "SiluBackward",
        "aclnn_silu_backward.h",
        FLOATS,
        '"grad_output", "self"',
    ),
    Op(
        "threshold_backward",
        "threshold_backward",
        ("", "grad_input"),
        "ThresholdBackward",
        "aclnn_threshold_backward.h",
        FLOATS,
    ),
    Op(
        "gelu_backward",
        "gelu_backward",
        ("", "grad_input"),
        "GeluBackwardV2",
        "aclnn_gelu_backward_v2.h",
        FLOATS,
    ),
    # ---- reductions ----
    Op(
        "sum",
        "reduce_sum",
        ("", "dim_IntList", "IntList_out"),
        "ReduceSum",
        "aclnn_reduce_sum.h",
        WITH_BOOL,
    ),
    Op("mean", "reduce_mean", ("", "dim", "out"), "Mean", "aclnn_mean.h", FLOATS),
    Op("amax", "reduce_extremum", ("", "out"), "Amax", "aclnn_amax.h", ARITH),
    Op("amin", "reduce_extremum", ("", "out"), "Amin", "aclnn_amin.h", ARITH),
    Op("max", "reduce_dim_index", ("dim", "dim_max"), "MaxDim", "aclnn_max_dim.h", ARITH),
    Op("min", "reduce_dim_index", ("dim", "dim_min"), "MinDim", "aclnn_min_dim.h", ARITH),
    Op("argmax", "reduce_arg", ("", "out"), "ArgMax", "aclnn_argmax.h", ARITH),
    Op("argmin", "reduce_arg", ("", "out"), "ArgMin", "aclnn_argmin.h", ARITH),
    Op("all", "reduce_bool", ("", "all_out", "dim", "dims"), "All", "aclnn_all.h", WITH_BOOL),
    Op("any", "reduce_bool", ("", "all_out", "dim", "dims"), "Any", "aclnn_any.h", WITH_BOOL),
    # ---- scans ----
    Op("cumsum", "cumsum", ("", "out"), "Cumsum", "aclnn_cumsum.h", ARITH),
    # ---- matmul family (cube unit: float32/16, bfloat16 only) ----
    Op("mm", "mm", ("", "out"), "Mm", "aclnn_mm.h", FLOATS, "2"),
    Op("bmm", "mm", ("", "out"), "BatchMatMul", "aclnn_batch_matmul.h", FLOATS, "3"),
    Op("addmm", "addmm", ("", "out", "_:"), "Addmm", "aclnn_addmm.h", FLOATS),
    # ---- softmax forward / backward ----
    Op("_softmax", "softmax", ("", "out"), "Softmax", "aclnn_softmax.h", FLOATS),
    Op("_log_softmax", "softmax", ("", "out"), "LogSoftmax", "aclnn_log_softmax.h", FLOATS),
    Op(
        "_softmax_backward_data",
        "softmax_backward",
        ("", "out"),
        "SoftmaxBackward",
        "aclnn_softmax_backward.h",
        FLOATS,
    ),
    Op(
        "_log_softmax_backward_data",
        "softmax_backward",
        ("", "out"),
        "LogSoftmaxBackward",
        "aclnn_log_softmax_backward.h",
        FLOATS,
    ),
    # ---- losses ----
    Op("mse_loss", "mse_loss", ("", "out"), "MseLoss", "aclnn_mse_loss.h", FLOATS),
    Op(
        "mse_loss_backward",
        "mse_loss_backward",
        ("", "grad_input"),
        "MseLossBackward",
        "aclnn_mse_loss_backward.h",
        FLOATS,
    ),
    # ---- norms ----
    Op("native_layer_norm", "layer_norm", ("",), "LayerNorm", "aclnn_layer_norm.h", FLOATS),
    Op(
        "native_layer_norm_backward",
        "layer_norm_backward",
        ("",),
        "LayerNormBackward",
        "aclnn_layer_norm_backward.h",
        FLOATS,
    ),
    Op("_fused_rms_norm", "rms_norm", ("",), "RmsNorm", "aclnn_rms_norm.h", FLOATS),
    # ---- indexing ----
    Op("embedding", "embedding", ("",), "Embedding", "aclnn_embedding.h", ARITH),
    Op(
        "embedding_dense_backward",
        "embedding_backward",
        ("", "out"),
        "EmbeddingDenseBackward",
        "aclnn_embedding_dense_backward.h",
        FLOATS,
    ),
    Op(
        "index_select",
        "index_select",
        ("", "out"),
        "IndexSelect",
        "aclnn_index_select.h",
        WITH_BOOL,
    ),
    Op("gather", "gather", ("", "out"), "Gather", "aclnn_gather.h", WITH_BOOL),
    Op(
        "scatter",
        "scatter",
        ("src", "src_out", "_:src", "reduce", "reduce_out", "_:reduce"),
        "Scatter",
        "aclnn_scatter.h",
        WITH_BOOL,
    ),
    Op("scatter_add", "scatter_add", ("", "out", "_:"), "ScatterAdd", "aclnn_scatter_add.h", ARITH),
    # ---- lists (more than 50 tensors are split: ACLNN lists take at most 50) ----
    Op("cat", "cat", ("", "out"), "Cat", "aclnn_cat.h", WITH_BOOL),
    Op("stack", "stack", ("", "out"), "Stack", "aclnn_stack.h", WITH_BOOL),
    # ---- selection, fills, factories ----
    Op("where", "where", ("self", "self_out"), "SWhere", "aclnn_s_where.h", WITH_BOOL),
    Op(
        "masked_fill",
        "masked_fill",
        ("Scalar", "_:Scalar"),
        "InplaceMaskedFillScalar",
        "aclnn_masked_fill_scalar.h",
        WITH_BOOL,
    ),
    Op("fill", "fill", ("_:Scalar",), "InplaceFillScalar", "aclnn_fill_scalar.h", REAL),
    Op("zero", "zero", ("_:",), "InplaceZero", "aclnn_zero.h", REAL),
    Op("arange", "arange", ("start_out",), "Arange", "aclnn_arange.h", ARITH),
    # ---- convolution ----
    Op("convolution", "convolution", ("",), "Convolution", "aclnn_convolution.h", FLOATS),
    Op(
        "convolution_backward",
        "convolution_backward",
        ("",),
        "ConvolutionBackward",
        "aclnn_convolution_backward.h",
        FLOATS,
    ),
]

#: Kernels written by hand (csrc/kernels/amp_kernels.cpp): aten overload -> (the ACLNN functions
#: they call, their headers, the dtypes served). Their schema is defined only when all exist.
HANDWRITTEN: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "_amp_foreach_non_finite_check_and_unscale_": (
        ("aclnnForeachNonFiniteCheckAndUnscale",),
        FLOATS,
    ),
    "_amp_update_scale_": (("aclnnAmpUpdateScale",), ("float32",)),
    # csrc/kernels/random_kernels.cpp: the mask ops, the device-words form for graph captures.
    "bernoulli_.float": (
        ("aclnnDropoutGenMaskV2", "aclnnDropoutGenMaskV2Tensor", "aclnnDropoutDoMask"),
        FLOATS,
    ),
}


def declined_dtypes(dtypes: tuple[str, ...]) -> tuple[str, ...]:
    """The dtypes of ALL_DTYPES an op does not serve, in ALL_DTYPES order."""
    return tuple(d for d in ALL_DTYPES if d not in dtypes)
