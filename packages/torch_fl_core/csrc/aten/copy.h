#pragma once

#include <ATen/core/Tensor.h>

namespace torch_fl {

// aten::_copy_from for flagos: H2D, D2H, D2D and peer, with casts,
// broadcasting, strides and conj/neg bits. Returns dst.
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking);

}  // namespace torch_fl
