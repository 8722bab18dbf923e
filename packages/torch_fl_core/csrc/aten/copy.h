#pragma once

#include <ATen/core/Tensor.h>

namespace torch_fl {

// aten::_copy_from for flagos: H2D, D2H, D2D and peer, with casts,
// broadcasting, strides and conj/neg bits. Returns dst.
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking);

// Whether dst.copy_(src) copies nothing: the same elements of one memory, read
// as the same values. CPU's and CUDA's copy_ return before any overlap check
// there (ATen hands other devices to _copy_from before that test).
bool same_data(const at::Tensor& dst, const at::Tensor& src);

}  // namespace torch_fl
