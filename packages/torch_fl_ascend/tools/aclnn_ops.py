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
import re
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


def _op(
    name: str,
    category: str,
    overloads: tuple[str, ...],
    fn: str,
    dtypes: tuple[str, ...],
    args: str = "",
    header: str | None = None,
) -> Op:
    """An op served by ``aclnn<fn>``, declared in CANN's ``aclnn_<fn in snake case>.h`` (an
    ``Inplace`` form in its out-of-place function's header) unless ``header`` names another."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", fn)
    return Op(
        name,
        category,
        overloads,
        fn,
        header or f"aclnn_{snake.removeprefix('Inplace_').lower()}.h",
        dtypes,
        args,
    )


def _u(name: str, fn: str, kind: str, dtypes: tuple[str, ...]) -> Op:
    return _op(name, "unary", ("", "out", "_:"), fn, dtypes, f"tfl_ascend::UnaryKind::{kind}")


def _cmp(name: str, pascal: str) -> list[Op]:
    return [
        _op(name, "compare", ("Tensor", "Tensor_out", "_:Tensor"), f"{pascal}Tensor", WITH_BOOL),
        _op(
            name,
            "compare_scalar",
            ("Scalar", "Scalar_out", "_:Scalar"),
            f"{pascal}Scalar",
            WITH_BOOL,
        ),
    ]


_TENSOR = ("Tensor", "out", "_:Tensor")
_SCALAR = ("Scalar", "_:Scalar")
_OUT = ("", "out")
_GRAD = ("", "grad_input")
#: The binary routines' result dtype rules.
_ARITH, _TRUE_DIV = "tfl_ascend::BinaryKind::Arith", "tfl_ascend::BinaryKind::TrueDiv"

OPS: list[Op] = [
    # ---- unary ----
    _u("abs", "Abs", "KeepsDtype", SIGNED),
    _u("neg", "Neg", "KeepsDtype", SIGNED),
    _u("relu", "Relu", "KeepsDtype", ARITH),
    _u("floor", "Floor", "KeepsDtype", FLOATS),
    _u("ceil", "Ceil", "KeepsDtype", FLOATS),
    _u("exp", "Exp", "ToFloat", FLOATS),
    _u("log", "Log", "ToFloat", FLOATS),
    _u("sqrt", "Sqrt", "ToFloat", FLOATS),
    _u("rsqrt", "Rsqrt", "ToFloat", FLOATS),
    _u("sin", "Sin", "ToFloat", FLOATS),
    _u("cos", "Cos", "ToFloat", FLOATS),
    _u("tanh", "Tanh", "ToFloat", FLOATS),
    _u("sigmoid", "Sigmoid", "ToFloat", FLOATS),
    _u("reciprocal", "Reciprocal", "ToFloat", FLOATS),
    _u("erf", "Erf", "ToFloat", FLOATS),
    _u("silu", "Silu", "FloatOnly", FLOATS),
    _u("logical_not", "LogicalNot", "Logical", WITH_BOOL),
    _op("gelu", "gelu", ("", "out", "_:"), "GeluV2", FLOATS),
    # ---- binary: tensor and scalar forms (the scalar forms take an aclScalar) ----
    _op("add", "binary_alpha", _TENSOR, "Add", ARITH),
    _op("add", "binary_alpha_scalar", _SCALAR, "Adds", ARITH, header="aclnn_add.h"),
    _op("sub", "binary_alpha", _TENSOR, "Sub", ARITH),
    _op("sub", "binary_alpha_scalar", _SCALAR, "Subs", ARITH, header="aclnn_sub.h"),
    _op("mul", "binary", _TENSOR, "Mul", ARITH, _ARITH),
    _op("mul", "binary_scalar", _SCALAR, "Muls", ARITH, _ARITH, header="aclnn_mul.h"),
    _op("div", "binary", _TENSOR, "Div", FLOATS, _TRUE_DIV),
    _op("div", "binary_scalar", _SCALAR, "Divs", FLOATS, _TRUE_DIV, header="aclnn_div.h"),
    _op("maximum", "binary", _OUT, "Maximum", ARITH, _ARITH),
    _op("minimum", "binary", _OUT, "Minimum", ARITH, _ARITH),
    _op(
        "pow",
        "pow_tensor",
        ("Tensor_Tensor", "Tensor_Tensor_out", "_:Tensor"),
        "PowTensorTensor",
        FLOATS,
    ),
    _op(
        "pow",
        "pow_scalar",
        ("Tensor_Scalar", "Tensor_Scalar_out", "_:Scalar"),
        "PowTensorScalar",
        FLOATS,
        header="aclnn_pow.h",
    ),
    # ---- compare (bool results) ----
    *_cmp("eq", "Eq"),
    *_cmp("ne", "Ne"),
    *_cmp("lt", "Lt"),
    *_cmp("le", "Le"),
    *_cmp("gt", "Gt"),
    *_cmp("ge", "Ge"),
    # ---- activation backward ----
    _op("tanh_backward", "backward2", _GRAD, "TanhBackward", FLOATS, '"grad_output", "output"'),
    _op(
        "sigmoid_backward", "backward2", _GRAD, "SigmoidBackward", FLOATS, '"grad_output", "output"'
    ),
    _op("silu_backward", "backward2", _GRAD, "SiluBackward", FLOATS, '"grad_output", "self"'),
    _op("threshold_backward", "threshold_backward", _GRAD, "ThresholdBackward", FLOATS),
    _op("gelu_backward", "gelu_backward", _GRAD, "GeluBackwardV2", FLOATS),
    # ---- reductions ----
    _op("sum", "reduce_sum", ("", "dim_IntList", "IntList_out"), "ReduceSum", WITH_BOOL),
    _op("mean", "reduce_mean", ("", "dim", "out"), "Mean", FLOATS),
    _op("amax", "reduce_extremum", _OUT, "Amax", ARITH),
    _op("amin", "reduce_extremum", _OUT, "Amin", ARITH),
    _op("max", "reduce_dim_index", ("dim", "dim_max"), "MaxDim", ARITH),
    _op("min", "reduce_dim_index", ("dim", "dim_min"), "MinDim", ARITH),
    _op("argmax", "reduce_arg", _OUT, "ArgMax", ARITH, header="aclnn_argmax.h"),
    _op("argmin", "reduce_arg", _OUT, "ArgMin", ARITH, header="aclnn_argmin.h"),
    _op("all", "reduce_bool", ("", "all_out", "dim", "dims"), "All", WITH_BOOL),
    _op("any", "reduce_bool", ("", "all_out", "dim", "dims"), "Any", WITH_BOOL),
    # ---- scans ----
    _op("cumsum", "cumsum", _OUT, "Cumsum", ARITH),
    # ---- matmul family (cube unit: float32/16, bfloat16 only) ----
    _op("mm", "mm", _OUT, "Mm", FLOATS, "2"),
    _op("bmm", "mm", _OUT, "BatchMatMul", FLOATS, "3", header="aclnn_batch_matmul.h"),
    _op("addmm", "addmm", ("", "out", "_:"), "Addmm", FLOATS),
    # ---- softmax forward / backward ----
    _op("_softmax", "softmax", _OUT, "Softmax", FLOATS),
    _op("_log_softmax", "softmax", _OUT, "LogSoftmax", FLOATS),
    _op("_softmax_backward_data", "softmax_backward", _OUT, "SoftmaxBackward", FLOATS),
    _op("_log_softmax_backward_data", "softmax_backward", _OUT, "LogSoftmaxBackward", FLOATS),
    # ---- losses ----
    _op("mse_loss", "mse_loss", _OUT, "MseLoss", FLOATS),
    _op("mse_loss_backward", "mse_loss_backward", _GRAD, "MseLossBackward", FLOATS),
    # ---- norms ----
    _op("native_layer_norm", "layer_norm", ("",), "LayerNorm", FLOATS),
    _op("native_layer_norm_backward", "layer_norm_backward", ("",), "LayerNormBackward", FLOATS),
    _op("_fused_rms_norm", "rms_norm", ("",), "RmsNorm", FLOATS),
    # ---- indexing ----
    _op("embedding", "embedding", ("",), "Embedding", ARITH),
    _op("embedding_dense_backward", "embedding_backward", _OUT, "EmbeddingDenseBackward", FLOATS),
    _op("index_select", "index_select", _OUT, "IndexSelect", WITH_BOOL),
    _op("gather", "gather", _OUT, "Gather", WITH_BOOL),
    _op(
        "scatter",
        "scatter",
        ("src", "src_out", "_:src", "reduce", "reduce_out", "_:reduce"),
        "Scatter",
        WITH_BOOL,
    ),
    _op("scatter_add", "scatter_add", ("", "out", "_:"), "ScatterAdd", ARITH),
    # ---- lists (more than 50 tensors are split: ACLNN lists take at most 50) ----
    _op("cat", "cat", _OUT, "Cat", WITH_BOOL),
    _op("stack", "stack", _OUT, "Stack", WITH_BOOL),
    # ---- selection, fills, factories ----
    _op("where", "where", ("self", "self_out"), "SWhere", WITH_BOOL),
    _op("masked_fill", "masked_fill", _SCALAR, "InplaceMaskedFillScalar", WITH_BOOL),
    _op("fill", "fill", ("_:Scalar",), "InplaceFillScalar", REAL),
    _op("zero", "zero", ("_:",), "InplaceZero", REAL),
    _op("arange", "arange", ("start_out",), "Arange", ARITH),
    # ---- convolution ----
    _op("convolution", "convolution", ("",), "Convolution", FLOATS),
    _op("convolution_backward", "convolution_backward", ("",), "ConvolutionBackward", FLOATS),
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
