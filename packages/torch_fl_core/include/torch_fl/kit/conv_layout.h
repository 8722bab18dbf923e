// The memory format of a flagos convolution's output and input/weight
// gradients, whichever kernel computes them: core's convolution path, a
// vendor's own convolution kernel, and the fake kernels' prediction
// (torch_fl.compile.conv_layout, through torch_fl._C) all use this rule, since
// compiled graphs assert the predicted strides.
#ifndef TORCH_FL_KIT_CONV_LAYOUT_H_
#define TORCH_FL_KIT_CONV_LAYOUT_H_

#include <ATen/core/Tensor.h>

namespace torch_fl::kit {

// What native CUDA (cuDNN) and CPU (mkldnn) answer: channels_last (3d for
// 5-d weights) when the input or the weight is, except for float64;
// contiguous otherwise.
inline at::MemoryFormat conv_memory_format(const at::Tensor& input, const at::Tensor& weight) {
  if (input.scalar_type() == at::kDouble || weight.scalar_type() == at::kDouble) {
    return at::MemoryFormat::Contiguous;
  }
  const auto input_format = input.suggest_memory_format();
  const auto weight_format = weight.suggest_memory_format();
  const auto either = [&](at::MemoryFormat f) { return input_format == f || weight_format == f; };
  if (weight.dim() == 4 && either(at::MemoryFormat::ChannelsLast)) {
    return at::MemoryFormat::ChannelsLast;
  }
  if (weight.dim() == 5 && either(at::MemoryFormat::ChannelsLast3d)) {
    return at::MemoryFormat::ChannelsLast3d;
  }
  return at::MemoryFormat::Contiguous;
}

}  // namespace torch_fl::kit

#endif  // TORCH_FL_KIT_CONV_LAYOUT_H_
