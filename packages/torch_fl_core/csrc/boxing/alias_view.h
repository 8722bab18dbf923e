// Alias views: tensors typed as another device (CPU, or the device a delegate
// runtime mirrors) over the memory of a flagos tensor, without a copy. They
// are what a box:<key> kernel, a Python backend or a collective is handed.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/Storage.h>

#include <optional>

namespace torch_fl::boxing {

// The device an alias of flagos:<index> memory has when typed as `type`
// (CPU aliases carry no index).
c10::Device target_device(c10::DeviceType type, c10::DeviceIndex flagos_index);

// An alias of t's geometry and conj/neg bits over `dp` (t's memory typed as
// `device`), dispatching to `key`. Its storage grows from the flagos pool of
// t's device when a kernel resizes it (see take_grown).
at::Tensor build_alias(const at::Tensor& t, c10::DataPtr dp, c10::Device device,
                       c10::DispatchKey key);

// build_alias over t's memory that keeps t's storage alive: for views handed
// to code that may keep them (Python libraries, collectives).
at::Tensor make_alias(const at::Tensor& t, c10::Device device, c10::DispatchKey key);

// An alias of t's geometry over the storage of `sibling`, an alias of another
// tensor over the same flagos storage: arguments of one call that share
// flagos memory share one alias storage, as they share one storage natively.
at::Tensor alias_sharing_storage(const at::Tensor& sibling, const at::Tensor& t,
                                 c10::DispatchKey key);

// Points an alias made by build_alias at `data` (nbytes long, non-owning)
// with t's geometry and conj/neg bits, writing only what differs: re-used
// aliases mostly view that memory with that geometry already (a loop over the
// same tensors). Its data pointer never owns memory, except after a kernel
// grew it (the grow allocator's wrapper, whose block the flagos tensor has
// taken over, or which nobody took when the kernel failed): replacing it
// frees only what is ours. One out-of-line function per operand of a routed
// call: in a model's op mix each routed call fetches this code again.
void rebind_alias(const at::Tensor& alias, const at::Tensor& t, void* data, size_t nbytes,
                  c10::Device device);

// Whether a reused alias is free: nobody but its keeper holds it or its
// storage (a kernel may keep neither past the call it got them for; an alias
// sharing its storage within a call goes with the call).
inline bool alias_is_free(const at::Tensor& a) {
  return a.use_count() == 1 && a.storage().use_count() == 1 &&
         a.unsafeGetTensorImpl()->allow_tensor_metadata_change();
}

// The flagos memory a kernel grew an alias storage into (the grow allocator's
// block), taken out of it; nullopt when the storage was not grown that way.
std::optional<c10::DataPtr> take_grown(const c10::Storage& alias_storage);

}  // namespace torch_fl::boxing
