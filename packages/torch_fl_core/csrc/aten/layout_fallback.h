// Operators on sparse and quantized flagos tensors that flagos has no kernel for
// (layout_fallback.cpp): the mirrored backend's sparse kernels on aliases, or CPU copies.
#pragma once

#include <string>

namespace torch_fl {

// The backend that serves sparse and quantized operators flagos has no kernel for, where that
// backend has one: "box:cuda" (the mirrored backend), "box:cpu" (flagos memory is host memory),
// else "cpu" (the CPU fallback on copies; also where the box backend has no kernel for the
// operator).
std::string layout_backend();

// Registers the quantized CPU fallback for every operator that has a QuantizedCPU kernel and no
// flagos one, from the dispatcher of the torch in use: for such an operator, a flagos quantized
// tensor would otherwise reach a composite kernel written for float tensors (comparisons,
// activations, pooling and upsampling fall to structured composites that allocate a quantized
// result without a quantizer). Called once, after every kernel of this library is registered.
void register_quantized_cpu_kernels();

}  // namespace torch_fl
