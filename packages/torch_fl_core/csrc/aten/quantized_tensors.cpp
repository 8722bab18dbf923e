// Quantized tensors on flagos (QuantizedPrivateUse1): what is the same on every device is
// registered here with ATen's device-independent kernels or on the tensor's integer
// representation (boxing/quantized_tensors.h): making one (the empty factories allocate from the
// flagos pool), views and metadata (no copy; writes through a view reach the base), int_repr,
// clone, copy_ between devices and resize_. Quantized arithmetic runs on CPU copies
// (layout_fallback.cpp), as CPU's kernels define it: PyTorch writes most quantized operators
// for the CPU only, and a copy to the CPU keeps their answers exactly.
#include <ATen/ATen.h>
#include <ATen/native/TensorShape.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/empty_quantized_native.h>
#include <ATen/ops/empty_strided_native.h>
#include <ATen/ops/_empty_affine_quantized_native.h>
#include <ATen/ops/_empty_per_channel_affine_quantized_native.h>
#include <ATen/ops/q_per_channel_axis_native.h>
#include <ATen/ops/q_per_channel_scales_native.h>
#include <ATen/ops/q_per_channel_zero_points_native.h>
#include <ATen/ops/q_scale_native.h>
#include <ATen/ops/q_zero_point_native.h>
#include <ATen/ops/qscheme_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/squeeze_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/unsqueeze_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/quantized/Quantizer.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "boxing/quantized_tensors.h"

namespace torch_fl {
namespace {

using boxing::integer_view;
using boxing::quantizer_on;

// ---- making one: ATen's own factories, on the device the options name ----

at::Tensor empty_unknown(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout, std::optional<at::Device> device,
                         std::optional<bool> pin, std::optional<at::MemoryFormat> format) {
  c10::OptionalDeviceGuard guard(device);
  return at::native::empty_unknown_quantized(size, dtype, layout, device, pin, format);
}

at::Tensor empty_strided_unknown(at::IntArrayRef size, at::IntArrayRef stride,
                                 std::optional<at::ScalarType> dtype,
                                 std::optional<at::Layout> layout, std::optional<at::Device> device,
                                 std::optional<bool> pin) {
  c10::OptionalDeviceGuard guard(device);
  return at::native::empty_strided_unknown_quantized(size, stride, dtype, layout, device, pin);
}

at::Tensor empty_affine(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                        std::optional<at::Layout> layout, std::optional<at::Device> device,
                        std::optional<bool> pin, double scale, int64_t zero_point,
                        std::optional<at::MemoryFormat> format) {
  c10::OptionalDeviceGuard guard(device);
  return at::native::empty_affine_quantized(size, dtype, layout, device, pin, scale, zero_point,
                                            format);
}

// Also reached for a CPU result whose scales are flagos tensors (empty_quantized of a flagos
// per-channel tensor for the CPU): the scales go where the tensor goes.
at::Tensor empty_per_channel(at::IntArrayRef size, const at::Tensor& scales,
                             const at::Tensor& zero_points, int64_t axis,
                             std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                             std::optional<at::Device> device, std::optional<bool> pin,
                             std::optional<at::MemoryFormat> format) {
  const at::Device target = device.value_or(scales.device());
  c10::OptionalDeviceGuard guard(target.is_privateuseone() ? std::optional(target) : std::nullopt);
  return at::native::empty_per_channel_affine_quantized(
      size, scales.to(target), zero_points.to(target), axis, dtype, layout, target, pin, format);
}

// ---- integer representation, copies and size ----

at::Tensor int_repr(const at::Tensor& self) {
  at::Tensor ints = integer_view(self);
  at::Tensor out = at::empty(self.sizes(), ints.options(), self.suggest_memory_format());
  out.copy_(ints);
  return out;
}

// CPU's copy_ of quantized tensors, between any two devices: a quantized source gives its
// integers and its quantizer; a float one is quantized with the target's quantizer by CPU's
// kernel (its checks and wording), and the integers copied in.
at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  if (self.is_same(src)) return self;
  TORCH_CHECK(self.is_quantized(),
              "Copying from quantized Tensor to non-quantized Tensor is not allowed, please use "
              "dequantize to get a float Tensor from a quantized Tensor");
  if (src.is_quantized()) {
    TORCH_CHECK(self.qscheme() == src.qscheme(), "Quantized Copy only works with same qscheme");
    TORCH_CHECK(self.scalar_type() == src.scalar_type(),
                "Quantized Copy only works with the same "
                "dtype: copy_ of ",
                src.scalar_type(), " into ", self.scalar_type());
    integer_view(self).copy_(integer_view(src), non_blocking);
    at::set_quantizer_(self, quantizer_on(src.quantizer(), self.device()));
    return self;
  }
  at::MemoryFormat format = at::MemoryFormat::Contiguous;
  if (!self.is_contiguous()) {
    TORCH_CHECK(self.is_contiguous(at::MemoryFormat::ChannelsLast),
                "Quantized copy only works with contiguous and NHWC Tensors");
    format = at::MemoryFormat::ChannelsLast;
  }
  const at::Device cpu(at::kCPU);
  at::Tensor host = at::new_qtensor(
      self.sizes(), at::TensorOptions(cpu).dtype(self.scalar_type()).memory_format(format),
      quantizer_on(self.quantizer(), cpu));
  host.copy_(src.to(cpu));
  integer_view(self).copy_(integer_view(host), non_blocking);
  return self;
}

at::Tensor clone(const at::Tensor& self, std::optional<at::MemoryFormat> memory_format) {
  // new_qtensor allocates on the current device.
  c10::DeviceGuard guard(self.device());
  auto format = memory_format.value_or(at::MemoryFormat::Contiguous);
  if (format == at::MemoryFormat::Preserve) format = self.suggest_memory_format();
  at::Tensor out =
      at::new_qtensor(self.sizes(), self.options().memory_format(format), self.quantizer());
  out.copy_(self);
  return out;
}

// CPU's rules (per-tensor schemes only, no memory format); the storage grows through its integer
// view, which flagos's allocator serves on every vendor.
const at::Tensor& resize_(const at::Tensor& self, at::IntArrayRef size,
                          std::optional<at::MemoryFormat> memory_format) {
  TORCH_CHECK(!memory_format.has_value(), "Unsupported memory format for quantized tensor resize ",
              memory_format.value());
  TORCH_CHECK(self.qscheme() == at::kPerTensorAffine,
              "Can only resize quantized tensors with per-tensor schemes!");
  c10::DeviceGuard guard(self.device());
  at::Tensor ints = integer_view(self);
  ints.resize_(size);
  self.unsafeGetTensorImpl()->set_sizes_and_strides(ints.sizes(), ints.strides(),
                                                    ints.storage_offset());
  return self;
}

TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_unknown));
  m.impl("empty_strided", TORCH_FN(empty_strided_unknown));
  m.impl("_empty_affine_quantized", TORCH_FN(empty_affine));
  m.impl("_empty_per_channel_affine_quantized", TORCH_FN(empty_per_channel));
  m.impl("empty_like", TORCH_FN(at::native::empty_like_quantized));
  m.impl("empty_quantized", TORCH_FN(at::native::empty_quantized));

  m.impl("as_strided", TORCH_FN(at::native::as_strided_qtensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("squeeze",
         TORCH_FN(static_cast<at::Tensor (*)(const at::Tensor&)>(at::native::squeeze_quantized)));
  m.impl("squeeze.dim", TORCH_FN(static_cast<at::Tensor (*)(const at::Tensor&, int64_t)>(
                            at::native::squeeze_quantized)));
  m.impl("squeeze.dims", TORCH_FN(static_cast<at::Tensor (*)(const at::Tensor&, at::IntArrayRef)>(
                             at::native::squeeze_quantized)));
  m.impl("unsqueeze", TORCH_FN(at::native::unsqueeze_quantized));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(at::native::set_storage_quantized_));

  m.impl("q_scale", TORCH_FN(at::native::q_scale_quant));
  m.impl("q_zero_point", TORCH_FN(at::native::q_zero_point_quant));
  m.impl("q_per_channel_scales", TORCH_FN(at::native::q_per_channel_scales));
  m.impl("q_per_channel_zero_points", TORCH_FN(at::native::q_per_channel_zero_points));
  m.impl("q_per_channel_axis", TORCH_FN(at::native::q_per_channel_axis));
  m.impl("qscheme", TORCH_FN(at::native::qscheme_quant));

  m.impl("int_repr", TORCH_FN(int_repr));
  m.impl("copy_", TORCH_FN(copy_));
  m.impl("clone", TORCH_FN(clone));
  m.impl("resize_", TORCH_FN(resize_));
}

}  // namespace
}  // namespace torch_fl
