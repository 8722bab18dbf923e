// Tensor descriptors: type, address, dims and strides (in elements).
#include "mudnn_op.h"

namespace musa {
namespace dnn {

Tensor::Tensor() = default;

Status Tensor::SetType(Type type) {
  if (!emu::valid_type(type)) return Status::INVALID_PARAMETER;
  type_ = type;
  return Status::SUCCESS;
}

Status Tensor::SetFormat(Format format) {
  int v = static_cast<int>(format);
  if (v < static_cast<int>(Format::UNKNOWN) || v > static_cast<int>(Format::NDHWC))
    return Status::INVALID_PARAMETER;
  format_ = format;
  return Status::SUCCESS;
}

Status Tensor::SetAddr(const void* addr) {
  addr_ = const_cast<void*>(addr);
  return Status::SUCCESS;
}

Status Tensor::SetNdInfo(int ndims, const int64_t* dims) {
  if (ndims < 0 || ndims > kMaxDims || (ndims > 0 && dims == nullptr))
    return Status::INVALID_PARAMETER;
  int64_t strides[kMaxDims];
  int64_t s = 1;
  for (int d = ndims - 1; d >= 0; --d) {
    strides[d] = s;
    if (dims[d] > 0 && __builtin_mul_overflow(s, dims[d], &s)) return Status::INVALID_PARAMETER;
  }
  return SetNdInfo(ndims, dims, strides);
}

Status Tensor::SetNdInfo(int ndims, const int64_t* dims, const int64_t* strides) {
  if (ndims < 0 || ndims > kMaxDims || (ndims > 0 && (dims == nullptr || strides == nullptr)))
    return Status::INVALID_PARAMETER;
  int64_t n = 1;
  for (int d = 0; d < ndims; ++d)
    if (dims[d] < 0 || __builtin_mul_overflow(n, dims[d], &n)) return Status::INVALID_PARAMETER;
  ndims_ = ndims;
  for (int d = 0; d < kMaxDims; ++d) {
    dims_[d] = d < ndims ? dims[d] : 0;
    strides_[d] = d < ndims ? strides[d] : 0;
  }
  return Status::SUCCESS;
}

int64_t Tensor::GetElementCount() const {
  int64_t n = 1;
  for (int d = 0; d < ndims_; ++d) n *= dims_[d];
  return n;
}

}  // namespace dnn
}  // namespace musa
