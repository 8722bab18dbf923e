// Sparse tensors over flagos memory: a sparse tensor (COO, or a compressed layout) is its dense
// parts (indices and values; compressed indices, plain indices and values) plus sizes and flags,
// so handing one to another backend's kernel and taking back what the kernel made are done on
// the parts with the call's CallMapper (zero-copy aliases, results joining flagos), and only the
// sizes and flags are carried over.
#pragma once

#include <ATen/core/Tensor.h>

namespace torch_fl::boxing {

class CallMapper;

// Whether t has a sparse layout (COO, CSR, CSC, BSR, BSC).
bool is_sparse_layout(const at::Tensor& t);

// A flagos sparse tensor as `mapper`'s target sees it: a sparse tensor of the target device over
// aliases of t's parts, with t's sizes and coalesced flag; a tensor of another device as it is.
at::Tensor sparse_arg(CallMapper& mapper, const at::Tensor& t);

// A sparse result of the target's kernel as a flagos sparse tensor: its parts through
// mapper.result (over the caller's memory where they alias it, else adopted without a copy where
// the memory is flagos memory).
at::Tensor sparse_result(const CallMapper& mapper, const at::Tensor& r);

// A written (out=, in-place) sparse argument after the kernel ran on its alias: `original` takes
// the sizes, dimensions, parts and coalesced flag the kernel left on `alias`, as the native tensor
// would have them. Parts the kernel wrote in place stay the caller's own tensors.
void sparse_written(const CallMapper& mapper, const at::Tensor& original, const at::Tensor& alias);

}  // namespace torch_fl::boxing
