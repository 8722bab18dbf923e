// Operators on sparse and quantized flagos tensors that run on CPU copies (layout_fallback.cpp).
#pragma once

namespace torch_fl {

// Registers the quantized CPU fallback for every operator that has a QuantizedCPU kernel and no
// flagos one, from the dispatcher of the torch in use: for such an operator, a flagos quantized
// tensor would otherwise reach a composite kernel written for float tensors (comparisons,
// activations, pooling and upsampling fall to structured composites that allocate a quantized
// result without a quantizer). Called once, after every kernel of this library is registered.
void register_quantized_cpu_kernels();

}  // namespace torch_fl
