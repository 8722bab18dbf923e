#include "boxing/alias_view.h"

#include <c10/core/TensorImpl.h>

#include <array>
#include <atomic>
#include <cstring>

#include "glue/caching_allocator.h"
#include "glue/runtime_access.h"
#include "glue/stream_pool.h"

namespace torch_fl::boxing {
namespace {

// IntArrayRef's operator== calls memcmp; a routed call's operands have a few
// dimensions, compared here inline.
bool same_dims(c10::IntArrayRef a, c10::IntArrayRef b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

void release_storage_ref(void* ctx) { delete static_cast<c10::Storage*>(ctx); }
void release_grown(void* ctx) { delete static_cast<c10::DataPtr*>(ctx); }

// The allocator of alias storages. When a kernel grows an out= alias (resize_
// of a result), the new memory comes from the flagos pool of the owning device,
// so the router hands it back to the flagos tensor without a copy. A host
// kernel (CPU target) writes it at once, outside stream order, so it takes the
// block as a host writer (allocate_for_host_writer).
class GrowAllocator final : public c10::Allocator {
 public:
  GrowAllocator(c10::DeviceIndex flagos_device, c10::Device target)
      : flagos_device_(flagos_device), target_(target) {}

  c10::DataPtr allocate(size_t n) override {
    CurrentDeviceScope scope(flagos_device_);
    c10::DataPtr block =
        target_.is_cpu()
            ? allocate_for_host_writer(flagos_device_, current_stream(flagos_device_).id(), n)
            : caching_allocator()->allocate(n);
    auto* inner = new c10::DataPtr(std::move(block));
    return {inner->get(), inner, &release_grown, target_};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

 private:
  c10::DeviceIndex flagos_device_;
  c10::Device target_;
};

constexpr size_t kMaxDevices = 64;

// One GrowAllocator per (flagos device, target kind), created on first
// use and kept for the process. Lock-free lookup: this runs for every alias.
c10::Allocator* grow_allocator(c10::DeviceIndex flagos_device, c10::Device target) {
  static std::array<std::atomic<GrowAllocator*>, kMaxDevices * 2> table{};
  TORCH_CHECK(flagos_device >= 0 && static_cast<size_t>(flagos_device) < kMaxDevices,
              "flagos box: device index ", static_cast<int>(flagos_device), " out of range");
  const size_t slot = static_cast<size_t>(flagos_device) * 2 + (target.is_cpu() ? 0 : 1);
  GrowAllocator* a = table[slot].load(std::memory_order_acquire);
  if (a) return a;
  auto* fresh = new GrowAllocator(flagos_device, target);
  if (table[slot].compare_exchange_strong(a, fresh)) return fresh;
  delete fresh;  // another thread won
  return a;
}

// The TensorImpl of an alias: a plain TensorImpl that can take another
// tensor's geometry together with the contiguity flags that tensor already
// computed. TensorImpl::set_sizes_and_strides recomputes them (contiguity,
// channels-last, non-overlapping-and-dense), which was most of re-pointing a
// pooled alias at a new operand (callgrind, sim decode loop).
class AliasImpl final : public c10::TensorImpl {
 public:
  AliasImpl(c10::Storage&& storage, c10::DispatchKeySet keys, caffe2::TypeMeta dtype)
      : c10::TensorImpl(std::move(storage), keys, dtype) {}

  // Flagos tensors are never symbolic; the public accessors below also
  // answer for a custom sizes/strides policy.
  void copy_geometry(const c10::TensorImpl& src) {
    sizes_and_strides_.set_sizes(src.sizes());
    sizes_and_strides_.set_strides(src.strides());
    storage_offset_ = src.storage_offset();
    numel_ = src.numel();
    is_contiguous_ = src.is_contiguous(c10::MemoryFormat::Contiguous);
    is_channels_last_contiguous_ = src.is_contiguous(c10::MemoryFormat::ChannelsLast);
    is_channels_last_3d_contiguous_ = src.is_contiguous(c10::MemoryFormat::ChannelsLast3d);
    is_channels_last_ = src.is_strides_like(c10::MemoryFormat::ChannelsLast);
    is_channels_last_3d_ = src.is_strides_like(c10::MemoryFormat::ChannelsLast3d);
    is_non_overlapping_and_dense_ = src.is_non_overlapping_and_dense();
  }
};

at::Tensor alias_over(c10::Storage&& storage, const at::Tensor& t, c10::DispatchKey key) {
  auto impl =
      c10::make_intrusive<AliasImpl>(std::move(storage), c10::DispatchKeySet(key), t.dtype());
  impl->copy_geometry(*t.unsafeGetTensorImpl());
  if (t.is_conj()) impl->_set_conj(true);
  if (t.is_neg()) impl->_set_neg(true);
  return at::Tensor(std::move(impl));
}

}  // namespace

c10::Device target_device(c10::DeviceType type, c10::DeviceIndex flagos_index) {
  return type == c10::DeviceType::CPU ? c10::Device(c10::DeviceType::CPU)
                                      : c10::Device(type, flagos_index);
}

at::Tensor build_alias(const at::Tensor& t, c10::DataPtr dp, c10::Device device,
                       c10::DispatchKey key) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), t.storage().nbytes(), std::move(dp),
                       grow_allocator(t.device().index(), device), /*resizable=*/true);
  return alias_over(std::move(storage), t, key);
}

at::Tensor make_alias(const at::Tensor& t, c10::Device device, c10::DispatchKey key) {
  const c10::Storage& base = t.storage();
  return build_alias(
      t, c10::DataPtr(base.mutable_data(), new c10::Storage(base), &release_storage_ref, device),
      device, key);
}

at::Tensor alias_sharing_storage(const at::Tensor& sibling, const at::Tensor& t,
                                 c10::DispatchKey key) {
  return alias_over(c10::Storage(sibling.storage()), t, key);
}

void rebind_alias(const at::Tensor& alias, const at::Tensor& t, void* data, size_t nbytes,
                  c10::Device device) {
  // Every alias is an AliasImpl (alias_over builds them all).
  auto* impl = static_cast<AliasImpl*>(alias.unsafeGetTensorImpl());
  c10::StorageImpl* storage = impl->unsafe_storage().unsafeGetStorageImpl();
  if (storage->data() != data || storage->nbytes() != nbytes ||
      storage->data_ptr().get_context() != nullptr) {
    storage->set_data_ptr_noswap(c10::DataPtr(data, device));
    storage->set_nbytes(nbytes);
  }
  const c10::TensorImpl* src = t.unsafeGetTensorImpl();
  if (impl->storage_offset() != src->storage_offset() || !same_dims(impl->sizes(), src->sizes()) ||
      !same_dims(impl->strides(), src->strides())) {
    impl->copy_geometry(*src);
  }
  if (C10_UNLIKELY(impl->is_conj() != src->is_conj())) impl->_set_conj(src->is_conj());
  if (C10_UNLIKELY(impl->is_neg() != src->is_neg())) impl->_set_neg(src->is_neg());
}

std::optional<c10::DataPtr> take_grown(const c10::Storage& alias_storage) {
  auto* inner = alias_storage.data_ptr().cast_context<c10::DataPtr>(&release_grown);
  if (!inner) return std::nullopt;
  return std::move(*inner);
}

}  // namespace torch_fl::boxing
