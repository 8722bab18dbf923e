// empty.memory_format / empty_strided: every flagos tensor is born here, on
// the requested (or current) device, from the caching allocator.
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/TensorFactories.h>
#include <torch/library.h>

#include "aten/factories.h"
#include "glue/caching_allocator.h"
#include "glue/runtime_access.h"

namespace torch_fl {
namespace {

// An explicit index is checked; the current device is valid by construction.
c10::DeviceIndex target_device(std::optional<c10::Device> device) {
  if (device && device->has_index()) {
    check_device_index(device->index());
    return device->index();
  }
  return current_device();
}

void check_options(std::optional<c10::Layout> layout, std::optional<bool> pin_memory) {
  TORCH_CHECK(!layout || *layout == c10::Layout::Strided,
              "flagos: only strided tensors are supported, got layout ", *layout);
  TORCH_CHECK(!pin_memory.value_or(false), "Only dense CPU tensors can be pinned");
}

constexpr c10::DispatchKeySet kFlagosKeys{c10::DispatchKey::PrivateUse1};

at::Tensor filled_if_deterministic(at::Tensor t) {
  fill_if_deterministic([&] { at::native::fill_empty_deterministic_(t); });
  return t;
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  check_options(layout, pin_memory);
  CurrentDeviceScope scope(target_device(device));
  return filled_if_deterministic(at::detail::empty_generic(
      size, caching_allocator(), kFlagosKeys, c10::dtype_or_default(dtype), memory_format));
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  check_options(layout, pin_memory);
  CurrentDeviceScope scope(target_device(device));
  return filled_if_deterministic(at::detail::empty_strided_generic(
      size, stride, caching_allocator(), kFlagosKeys, c10::dtype_or_default(dtype)));
}

}  // namespace

at::Tensor empty_strided_on_current_device(c10::IntArrayRef size, c10::IntArrayRef stride,
                                           c10::ScalarType dtype) {
  return at::detail::empty_strided_generic(size, stride, caching_allocator(), kFlagosKeys, dtype);
}

namespace {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
}

}  // namespace
}  // namespace torch_fl
