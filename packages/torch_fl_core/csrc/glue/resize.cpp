// resize_ and set_ for flagos: ATen's CPU versions grow storage with a host
// memcpy, which is wrong for device memory; these grow it with a device copy.
#include "glue/resize.h"

#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ResizeCommon.h>
#include <torch/library.h>

#include "glue/deterministic_fill.h"
#include "glue/caching_allocator.h"
#include "glue/runtime_access.h"
#include "glue/stream_pool.h"

namespace torch_fl {

void resize_storage_bytes(c10::StorageImpl* storage, size_t nbytes) {
  TORCH_CHECK(storage->resizable(), "Trying to resize storage that is not resizable");
  const c10::DeviceIndex device = storage->device().index();
  CurrentDeviceScope scope(device);
  at::Allocator* allocator = storage->allocator() ? storage->allocator() : caching_allocator();
  c10::DataPtr fresh = allocator->allocate(nbytes);
  const size_t old_nbytes = storage->nbytes();
  c10::DataPtr old = storage->set_data_ptr(std::move(fresh));
  storage->set_nbytes(nbytes);
  const size_t keep = std::min(nbytes, old_nbytes);
  if (old.get() != nullptr && keep > 0) {
    // Ordered on the current stream; the old block is freed after this call,
    // and the caching allocator reuses it only in that stream's order.
    TFL_CALL(device, memcpy_async, storage->mutable_data(), old.get(), keep,
             TFL_MEMCPY_DEVICE_TO_DEVICE, native_stream(current_stream(device)));
  }
}

void resize_tensor_impl(c10::TensorImpl* self, c10::IntArrayRef size,
                        at::OptionalIntArrayRef stride) {
  if (self->sizes() == size && (!stride || self->strides() == stride.value())) return;
  const auto itemsize = self->dtype().itemsize();
  const auto offset = self->storage_offset();
  size_t needed = 0;
  if (stride) {
    self->set_sizes_and_strides(size, *stride);
    needed = at::detail::computeStorageNbytes(size, *stride, itemsize, offset);
  } else {
    self->set_sizes_contiguous(size);
    needed = at::detail::computeStorageNbytesContiguous(size, itemsize, offset);
  }
  const c10::Storage& storage = self->unsafe_storage();
  if (!storage) return;
  if (needed > storage.nbytes()) resize_storage_bytes(storage.unsafeGetStorageImpl(), needed);
}

namespace {

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  for (const auto s : size) {
    TORCH_CHECK(s >= 0, "Trying to create tensor with negative dimension ", s, ": ", size);
  }
  auto* impl = self.unsafeGetTensorImpl();
  const int64_t old_nbytes = impl->unsafe_storage() ? impl->unsafe_storage().nbytes() : 0;
  resize_tensor_impl(impl, size, std::nullopt);
  // As CPU's and CUDA's resize_: grown memory is filled when deterministic
  // algorithms ask for it.
  fill_if_deterministic([&] { at::native::fill_resize_deterministic_(self, old_nbytes); });
  if (memory_format) {
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve, "Unsupported memory format ",
                *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t storage_offset,
                        c10::IntArrayRef size, c10::IntArrayRef stride) {
  at::native::checkSetStorage(self, std::move(source), storage_offset, size, stride);
  self.unsafeGetTensorImpl()->set_storage_offset(storage_offset);
  at::OptionalIntArrayRef stride_opt =
      stride.data() != nullptr ? at::OptionalIntArrayRef(stride) : std::nullopt;
  resize_tensor_impl(self.unsafeGetTensorImpl(), size, stride_opt);
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  const auto itemsize = self.dtype().itemsize();
  const int64_t numel = static_cast<int64_t>(source.nbytes() / itemsize);
  return set_storage(self, std::move(source), 0, {numel}, {});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.is_same(source)) return self;
  return set_storage(self, source.storage(), source.storage_offset(), source.sizes(),
                     source.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  CurrentDeviceScope scope(self.device().index());
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, caching_allocator(), true);
  return set_storage(self, std::move(storage), 0, {0}, {});
}

// Storage identity and geometry, as ATen's CPU kernel compares them; it must
// run here: a boxed kernel would see alias views with storages of their own.
bool is_set_to(const at::Tensor& self, const at::Tensor& other) {
  return self.storage().unsafeGetStorageImpl() == other.storage().unsafeGetStorageImpl() &&
         self.storage_offset() == other.storage_offset() && self.sizes() == other.sizes() &&
         self.strides() == other.strides();
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("is_set_to", TORCH_FN(is_set_to));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage));
  m.impl("set_.source_Storage", TORCH_FN(set_source_storage));
  m.impl("set_.source_Tensor", TORCH_FN(set_source_tensor));
  m.impl("set_", TORCH_FN(set_empty));
}

}  // namespace
}  // namespace torch_fl
