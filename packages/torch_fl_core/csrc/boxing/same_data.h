// Whether two tensors are the same elements of one memory, read as the same
// values: dst.copy_(src) then copies nothing. CPU's and CUDA's copy_ return
// before any overlap check there (ATen hands other devices to _copy_from
// before that test), and an in-place list op over such pairs needs no check.
#pragma once

#include <ATen/core/Tensor.h>

namespace torch_fl::boxing {

inline bool same_data(const at::Tensor& dst, const at::Tensor& src) {
  return dst.is_alias_of(src) && dst.storage_offset() == src.storage_offset() &&
         dst.strides() == src.strides() && dst.sizes() == src.sizes() &&
         dst.scalar_type() == src.scalar_type() && dst.is_conj() == src.is_conj() &&
         dst.is_neg() == src.is_neg();
}

}  // namespace torch_fl::boxing
