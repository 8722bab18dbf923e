// The memory format of a flagos convolution's output and input/weight
// gradients, shared by the eager kernels (convolution.cpp) and the fake
// kernels' prediction (torch_fl.compile.conv_layout, through torch_fl._C).
#pragma once

#include <ATen/core/Tensor.h>

namespace torch_fl {

// What native CUDA (cuDNN) and CPU (mkldnn) answer: channels_last (3d for
// 5-d weights) when the input or the weight is, except for float64;
// contiguous otherwise. A backend that computes in another format is
// restrided to this one.
at::MemoryFormat conv_memory_format(const at::Tensor& input, const at::Tensor& weight);

}  // namespace torch_fl
