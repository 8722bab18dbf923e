#include "boxing/result_adoption.h"

#include <ATen/ATen.h>
#include <c10/core/TensorImpl.h>

#include <cstring>

#include "boxing/alias_view.h"
#include "boxing/host_results.h"
#include "boxing/quantized_tensors.h"
#include "glue/caching_allocator.h"
#include "glue/mirror/mirror_allocator.h"
#include "glue/runtime_access.h"
#include "glue/stream_pool.h"

namespace torch_fl::boxing {
namespace {

// The flagos memory of a storage a kernel grew or allocated as a host result.
std::optional<c10::DataPtr> take_flagos_memory(const c10::Storage& s, c10::DeviceIndex device) {
  if (auto grown = take_grown(s)) return grown;
  return take_host_result(s, device);
}

// A TensorImpl's device and dispatch keys, which a fresh result retyped in
// place changes. (TensorImpl's own setters copy the storage to refresh the
// device, and change the keys in an out-of-line libc10 call: code a routed
// call would fetch once more per result.)
struct RetypedImpl : c10::TensorImpl {
  static constexpr std::optional<c10::Device> c10::TensorImpl::* kDevice =
      &RetypedImpl::device_opt_;
  static constexpr c10::DispatchKeySet c10::TensorImpl::* kKeys = &RetypedImpl::key_set_;
};

// A fresh kernel result nobody else can see (the router holds its only
// reference, so no Python object or other tensor does) whose storage has just
// become flagos storage: its TensorImpl becomes the flagos tensor itself, dispatch
// keys and device, instead of a second TensorImpl being built over the
// storage. The keys are those a new PrivateUse1 TensorImpl gets: the backend
// bit, and the autocast keys that go with a backend (autograd keys are
// per-backend functionality keys, which the backend bit selects).
bool retype_tensor_in_place(const at::Tensor& t) {
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (t.use_count() != 1 || !impl->allow_tensor_metadata_change()) return false;
  constexpr auto kFlagos = c10::BackendComponent::PrivateUse1Bit;
  const c10::DispatchKeySet keys = impl->key_set();
  const c10::BackendComponent old = keys.highestBackendKey();
  impl->*RetypedImpl::kKeys = ((keys - c10::getAutocastRelatedKeySetFromBackend(old)) |
                               c10::getAutocastRelatedKeySetFromBackend(kFlagos))
                                  .remove_backend(old) |
                              c10::DispatchKeySet(kFlagos);
  impl->*RetypedImpl::kDevice =
      impl->unsafe_storage().device();  // the device follows the storage's
  return true;
}

// Mirror mode: the result came from the pool flagos allocates from, so it
// joins flagos as it is (zero-copy): a fresh result is retyped in place,
// anything shared is wrapped, keeping its storage alive. A storage a kernel
// grew (the grow allocator's block) is flagos memory already.
at::Tensor mirrored_to_flagos(const at::Tensor& t, c10::DeviceIndex device) {
  const c10::Storage& src = t.storage();
  if (t.use_count() == 1 && src.use_count() == 1 && retype_mirror_storage(src, device)) {
    if (retype_tensor_in_place(t)) return t;
    return flagos_over(src, t);
  }
  if (auto grown = take_grown(src)) {
    c10::Storage s(c10::Storage::use_byte_size_t(), src.nbytes(), std::move(*grown),
                   caching_allocator(), true);
    return flagos_over(std::move(s), t);
  }
  c10::Storage s(c10::Storage::use_byte_size_t(), src.nbytes(), adopt_mirror_storage(src, device),
                 caching_allocator(), src.resizable());
  return flagos_over(std::move(s), t);
}

}  // namespace

at::Tensor flagos_over(c10::Storage storage, const at::Tensor& like) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), like.dtype());
  impl->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  if (like.is_conj()) impl->_set_conj(true);
  if (like.is_neg()) impl->_set_neg(true);
  return at::Tensor(std::move(impl));
}

void adopt_written(const at::Tensor& base, const at::Tensor& alias) {
  c10::TensorImpl* impl = base.unsafeGetTensorImpl();
  const c10::Storage& astorage = alias.storage();
  if (astorage.data() != base.storage().data()) {
    // The kernel gave the alias other storage (grew it).
    auto grown = take_flagos_memory(astorage, base.device().index());
    TORCH_CHECK(grown.has_value(),
                "flagos box: a kernel replaced the storage of an output with "
                "memory that is not flagos memory");
    c10::Storage s = base.storage();
    s.set_data_ptr_noswap(std::move(*grown));
    s.set_nbytes(astorage.nbytes());
  }
  if (base.sizes() != alias.sizes() || base.strides() != alias.strides() ||
      base.storage_offset() != alias.storage_offset()) {
    impl->set_sizes_and_strides(alias.sizes(), alias.strides(), alias.storage_offset());
  }
  // A kernel may leave its output with a math bit set (CPU's and CUDA's complex right-hand
  // linalg.solve write the conjugate and set the conj bit): the bytes mean that only with it.
  if (base.is_conj() != alias.is_conj()) impl->_set_conj(alias.is_conj());
  if (base.is_neg() != alias.is_neg()) impl->_set_neg(alias.is_neg());
}

at::Tensor to_flagos(const at::Tensor& t, c10::DeviceIndex device, c10::DeviceType type) {
  if (!t.defined() || t.device().is_privateuseone()) return t;
  if (C10_UNLIKELY(t.is_quantized())) return quantized_to_flagos(t, device, type);
  // Host results are CPU tensors; a mirrored kernel's are the mirrored
  // device's (checked first: the hot path of a delegate runtime).
  const bool host = t.device().is_cpu();
  if (host && relabel_host_result(t, device)) {
    if (retype_tensor_in_place(t)) return t;
    return flagos_over(t.storage(), t);
  }
  if (!host && mirror_device_type() == t.device().type() && t.device().index() == device) {
    return mirrored_to_flagos(t, device);
  }
  if (auto taken = take_flagos_memory(t.storage(), device)) {
    const size_t nbytes = t.storage().nbytes();
    c10::Storage s(c10::Storage::use_byte_size_t(), nbytes, std::move(*taken), caching_allocator(),
                   true);
    return flagos_over(std::move(s), t);
  }
  at::Tensor src = t.is_non_overlapping_and_dense() ? t : t.contiguous();
  at::Tensor out = at::empty_strided(src.sizes(), src.strides(),
                                     src.options().device(c10::Device(c10::kPrivateUse1, device)));
  if (type == c10::DeviceType::CPU && has_capability(TFL_CAP_HOST_ADDRESSABLE_MEMORY)) {
    // A host write into a block taken in stream order: work another thread
    // queued on the stream before the block was freed may still read it.
    if (src.numel() > 0) {
      CurrentDeviceScope scope(device);
      TFL_CALL(device, stream_synchronize, native_stream(current_stream(device)));
      std::memcpy(out.data_ptr(), src.data_ptr(), src.numel() * src.element_size());
    }
  } else {
    out.copy_(src);
  }
  if (t.is_conj()) out._set_conj(true);
  if (t.is_neg()) out._set_neg(true);
  return out;
}

}  // namespace torch_fl::boxing
