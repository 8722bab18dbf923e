"""The ops table of the muDNN kernel generator (tools/gen_kernels.py), by category.

muDNN is an object API: one class per operator family, configured by setters and run with
``Run(handle, outputs..., inputs...)``. An entry's ``fn`` names what it runs:

- ``"Class::MODE"`` -- the class with ``SetMode(Class::Mode::MODE)`` (``Binary::ADD``);
- ``"Class::Method"`` -- a run method other than ``Run`` (``MatMul::RunWithBiasAdd``);
- ``"Class"`` -- the class's ``Run``.

The generator checks the methods each needs against what ``libmudnn.so`` exports, and hands the
category routine (csrc/kernels/mudnn_categories.h) the mode and the name. ``dtypes`` are the
compute dtypes muDNN's kernel serves for that mode (others are declined and served by core's
counted CPU fallback). Adding an op is one line here, if its category exists. The format is
core's (``torch_fl.kit.kernel_ops``).
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

FLOATS = ("float32", "float16", "bfloat16")
NUMBERS = FLOATS + ("int32", "int64")
ANY = NUMBERS + ("int16", "int8", "uint8", "bool")


def _u(name: str, mode: str, kind: str, dtypes=FLOATS, forms=("", "out", "_:")) -> Op:
    return Op(
        name,
        "unary",
        forms,
        fn=f"Unary::{mode}",
        dtypes=dtypes,
        args=f"tfl_musa::UnaryKind::{kind}",
    )


def _b(name: str, mode: str, kind: str, forms, dtypes=NUMBERS) -> Op:
    return Op(
        name,
        "binary",
        forms,
        fn=f"Binary::{mode}",
        dtypes=dtypes,
        args=f"tfl_musa::BinaryKind::{kind}",
    )


_TENSOR = ("Tensor", "out", "_:Tensor")
_SCALAR = ("Scalar", "_:Scalar")
_COMPARE = ("Tensor", "Scalar", "Tensor_out", "Scalar_out", "_:Tensor", "_:Scalar")

# An overload spelled "_:X" is the in-place operator name_ with overload X ("_:" alone: no overload).
OPS: list[Op] = [
    # ---- unary ----
    _u("abs", "ABS", "KeepsDtype", NUMBERS),
    _u("neg", "NEG", "KeepsDtype", NUMBERS),
    _u("relu", "RELU", "KeepsDtype", NUMBERS, forms=("", "_:")),
    _u("floor", "FLOOR", "KeepsDtype"),
    _u("ceil", "CEIL", "KeepsDtype"),
    _u("sqrt", "SQRT", "ToFloat"),
    _u("rsqrt", "RSQRT", "ToFloat"),
    _u("exp", "EXP", "ToFloat"),
    _u("log", "LOG", "ToFloat"),
    _u("sin", "SIN", "ToFloat"),
    _u("cos", "COS", "ToFloat"),
    _u("tanh", "TANH", "ToFloat"),
    _u("sigmoid", "SIGMOID", "ToFloat"),
    _u("reciprocal", "RECIPROCAL", "ToFloat"),
    _u("erf", "ERF", "ToFloat"),
    _u("silu", "SILU", "FloatOnly"),
    _u("logical_not", "LOGICAL_NOT", "Logical", ANY),
    Op("gelu", "gelu", ("", "out", "_:"), fn="Unary::GELU", dtypes=FLOATS),
    # ---- binary ----
    _b("mul", "MUL", "Arith", _TENSOR + _SCALAR),
    _b("div", "TRUEDIV", "TrueDiv", _TENSOR + _SCALAR, FLOATS),
    _b("maximum", "MAXIMUM", "Arith", ("", "out")),
    _b("minimum", "MINIMUM", "Arith", ("", "out")),
    _b("pow", "POW", "Pow", ("Tensor_Tensor", "Tensor_Tensor_out", "_:Tensor"), FLOATS),
    Op(
        "pow",
        "pow_scalar",
        ("Tensor_Scalar", "Tensor_Scalar_out", "_:Scalar"),
        fn="Unary::POW",
        dtypes=FLOATS,
    ),
    _b("eq", "EQ", "Compare", _COMPARE),
    _b("ne", "NE", "Compare", _COMPARE),
    _b("lt", "LT", "Compare", _COMPARE),
    _b("le", "LE", "Compare", _COMPARE),
    _b("gt", "GT", "Compare", _COMPARE),
    _b("ge", "GE", "Compare", _COMPARE),
    # ---- binary with alpha (a + alpha * b) ----
    Op("add", "binary_alpha", _TENSOR + _SCALAR, fn="Binary::ADD", dtypes=NUMBERS),
    Op("sub", "binary_alpha", _TENSOR + _SCALAR, fn="Binary::SUB", dtypes=NUMBERS),
    # ---- three operands (the optimizers' per-parameter updates, where) ----
    Op("addcmul", "ternary_value", ("", "out", "_:"), fn="Ternary::ADDCMUL", dtypes=FLOATS),
    Op("addcdiv", "ternary_value", ("", "out", "_:"), fn="Ternary::ADDCDIV", dtypes=FLOATS),
    Op(
        "lerp",
        "lerp",
        ("Scalar", "Scalar_out", "_:Scalar", "Tensor", "Tensor_out", "_:Tensor"),
        fn="Ternary::LERP",
        dtypes=FLOATS,
    ),
    Op(
        "threshold_backward",
        "threshold_backward",
        ("", "grad_input"),
        fn="Ternary::SELECT",
        dtypes=FLOATS,
    ),
    Op("where", "where", ("self", "self_out"), fn="Ternary::SELECT", dtypes=NUMBERS + ("bool",)),
    # ---- reductions ----
    # sum casts its input to the result's dtype (integers and bool to int64) before reducing.
    Op("sum", "reduce", ("", "dim_IntList", "IntList_out"), fn="Reduce::ADD", dtypes=ANY),
    Op("mean", "reduce", ("", "dim", "out"), fn="Reduce::MEAN", dtypes=FLOATS),
    Op("amax", "reduce", ("", "out"), fn="Reduce::MAX", dtypes=NUMBERS),
    Op("amin", "reduce", ("", "out"), fn="Reduce::MIN", dtypes=NUMBERS),
    Op(
        "all",
        "reduce",
        ("", "dim", "dims", "all_out", "out", "dims_out"),
        fn="Reduce::AND",
        dtypes=ANY,
    ),
    Op(
        "any",
        "reduce",
        ("", "dim", "dims", "all_out", "out", "dims_out"),
        fn="Reduce::OR",
        dtypes=ANY,
    ),
    # max along one dim: the values and their int64 indices (RunWithIndices with mode MAX).
    Op(
        "max",
        "reduce_with_indices",
        ("dim", "dim_max"),
        fn="Reduce::RunWithIndices",
        dtypes=NUMBERS,
        args="musa::dnn::Reduce::Mode::MAX",
    ),
    # ---- scans ----
    # cumsum casts its input to the result's dtype (integers and bool to int64 unless dtype= says)
    # and scans in it; `dtypes` are the INPUT dtypes routed here, the routine declines a result
    # dtype Cum lacks (int8 with dtype=int8, ...).
    Op("cumsum", "cumsum", ("", "out", "_:"), fn="Cum::ADD", dtypes=ANY),
    # ---- matmul family ----
    Op("mm", "mm", ("", "out"), fn="MatMul", dtypes=FLOATS),
    Op("bmm", "bmm", ("", "out"), fn="BatchMatMul", dtypes=FLOATS),
    Op("addmm", "addmm", ("", "out", "_:"), fn="MatMul::RunWithBiasAdd", dtypes=FLOATS),
    # ---- softmax forward / backward ----
    Op("_softmax", "softmax", ("", "out"), fn="Softmax::SOFTMAX", dtypes=FLOATS),
    Op("_log_softmax", "softmax", ("", "out"), fn="Softmax::LOGSOFTMAX", dtypes=FLOATS),
    Op(
        "_softmax_backward_data",
        "softmax_backward",
        ("", "out"),
        fn="Softmax::RunBwd",
        dtypes=FLOATS,
        args="musa::dnn::Softmax::Mode::SOFTMAX",
    ),
    Op(
        "_log_softmax_backward_data",
        "softmax_backward",
        ("", "out"),
        fn="Softmax::RunBwd",
        dtypes=FLOATS,
        args="musa::dnn::Softmax::Mode::LOGSOFTMAX",
    ),
    # ---- shape ----
    Op("cat", "cat", ("", "out"), fn="Concat", dtypes=ANY),
    # stack: a Concat of the inputs unsqueezed at `dim` (views), as torch_musa composes it.
    Op("stack", "stack", ("", "out"), fn="Concat", dtypes=ANY),
    # ---- fills ----
    Op("fill", "fill", ("_:Scalar",), fn="Fill", dtypes=ANY),
    Op("zero", "zero", ("_:",), fn="Fill", dtypes=ANY),
]

#: Kernels written by hand (csrc/kernels/*.cpp) from muDNN-backed operators: aten overload ->
#: (the muDNN operators they need, None). Their schema is defined only when all exist.
HANDWRITTEN: dict[str, tuple[tuple[str, ...], None]] = {
    "_amp_foreach_non_finite_check_and_unscale_": (
        (
            "Binary::SUB",
            "Binary::EQ",
            "Reduce::AND",
            "Unary::LOGICAL_NOT",
            "Binary::MAXIMUM",
            "Binary::MUL",
        ),
        None,
    ),
    "mse_loss": (("Binary::SUB", "Binary::MUL", "Reduce::MEAN", "Reduce::ADD"), None),
    "mse_loss_backward": (("Binary::SUB", "Binary::MUL"), None),
    "_amp_update_scale_": (
        (
            "Binary::NE",
            "Binary::ADD",
            "Binary::EQ",
            "Binary::MUL",
            "Binary::SUB",
            "Ternary::SELECT",
        ),
        None,
    ),
}
