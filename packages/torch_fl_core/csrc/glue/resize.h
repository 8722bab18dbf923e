// Storage growth for flagos tensors (resize_, set_, UntypedStorage.resize_).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/StorageImpl.h>

namespace torch_fl {

// Reallocates `storage` to `nbytes` from its allocator and copies the old
// contents (up to the smaller size) with a device copy on the current stream.
void resize_storage_bytes(c10::StorageImpl* storage, size_t nbytes);

// resize_ semantics of ATen's CPU resize_impl, with device storage growth.
void resize_tensor_impl(c10::TensorImpl* self, c10::IntArrayRef size,
                        at::OptionalIntArrayRef stride);

}  // namespace torch_fl
