"""Known causes of conformance failures, by OpInfo entry (``name`` or ``name.variant``).

Written by whoever diagnosed the failure; the report prints them next to failing entries only, so
an entry that was fixed simply stops showing its diagnosis. The contract suite's ``xfail`` reasons
come from here too.
"""

from __future__ import annotations

__all__ = ["DIAGNOSES", "diagnosis"]

CONVOLUTION = (
    "no flagos convolution kernel: at::_convolution picks ConvBackend::Overrideable for any device "
    "that is not CPU/CUDA/MKLDNN and calls convolution_overrideable (backward: "
    "convolution_backward_overrideable), whose CompositeExplicitAutograd default raises "
    "NotImplementedError before the CPU fallback is reached. Needs flagos kernels for the "
    "*_overrideable pair that run aten::convolution / aten::convolution_backward"
)
BATCH_NORM = (
    "(CPU fallback only; a box:cpu route for native_batch_norm fixes it) "
    "running_mean/running_var are never updated on flagos: native_batch_norm mutates them but its "
    "schema declares them as plain `Tensor?` (not `Tensor(a!)?`), so the CPU fallback does not "
    "copy the CPU-side updates back (nn.BatchNorm*'s running stats stay at their initial values). "
    "Needs a flagos kernel or an explicit write-back for native_batch_norm"
)
LAYER_NORM = (
    "(without a route for native_layer_norm) native_layer_norm has a CompositeExplicitAutograd kernel (math_native_layer_norm: "
    "native_batch_norm + addcmul) that flagos gets instead of the CPU fallback's fused kernel; "
    "for a 1-element normalized_shape its x - mean is -4.5e-8 instead of 0 and rstd = "
    "1/sqrt(eps) amplifies it to a 1.2e-4 abs error. Route native_layer_norm (and its backward) "
    "to the CPU kernel"
)
ITEM = (
    "_local_scalar_dense (csrc/aten/copy.cpp) copies the 1-element tensor into a 0-dim host "
    "tensor without reshaping it, so .item() of a flagos tensor of shape [1] (or [1, 1], ...) "
    'raises "output with shape [] doesn\'t match the broadcast shape [1]"'
)


LINEAR_CROSS_ENTROPY = (
    "(bfloat16/float16 only) not a torch-fl bug: PyTorch picks the chunked path's accumulation "
    "dtype and chunking per device type (LinearCrossEntropyOptions._adjust, _AUTO_DEFAULTS keyed "
    "by (device.type, dtype)); an unknown device type gets the fallback policy, CPU its own, so "
    "low-precision results differ by rounding"
)

DIAGNOSES: dict[str, str] = {
    "item": ITEM,
    "native_batch_norm": BATCH_NORM,
    "nn.functional.batch_norm": BATCH_NORM,
    "nn.functional.instance_norm": BATCH_NORM
    + " (instance_norm runs batch_norm on reshaped running stats, then averages them back)",
    "nn.functional.layer_norm": LAYER_NORM,
    "nn.functional.conv1d": CONVOLUTION,
    "nn.functional.conv2d": CONVOLUTION,
    "nn.functional.conv3d": CONVOLUTION,
    "nn.functional.conv_transpose1d": CONVOLUTION,
    "nn.functional.conv_transpose2d": CONVOLUTION,
    "nn.functional.conv_transpose3d": CONVOLUTION,
    "nn.functional.linear_cross_entropy.chunked": LINEAR_CROSS_ENTROPY,
    "nn.functional.linear_cross_entropy.chunked_none": LINEAR_CROSS_ENTROPY,
}


def diagnosis(full_name: str) -> str:
    """The known cause of ``full_name``'s failure, or ``""``."""
    return DIAGNOSES.get(full_name, "")
