#include "boxing/quantized_tensors.h"

#include <ATen/ATen.h>
#include <ATen/quantized/QTensorImpl.h>
#include <c10/core/ScalarType.h>

#include "boxing/call_mapper.h"
#include "boxing/result_adoption.h"

namespace torch_fl::boxing {

at::Tensor integer_view(const at::Tensor& q) {
  const auto type = c10::toUnderlying(q.scalar_type());
  const auto key = c10::computeDispatchKey(type, c10::kStrided, q.device());
  auto impl = c10::make_intrusive<c10::TensorImpl>(
      c10::Storage(q.storage()), c10::DispatchKeySet(key), c10::scalarTypeToTypeMeta(type));
  impl->set_sizes_and_strides(q.sizes(), q.strides(), q.storage_offset());
  return at::Tensor(std::move(impl));
}

at::Tensor quantized_over(const at::Tensor& ints, at::QuantizerPtr quantizer) {
  const auto qtype = quantizer->scalar_type();
  TORCH_INTERNAL_ASSERT(c10::toUnderlying(qtype) == ints.scalar_type());
  const auto key = c10::computeDispatchKey(qtype, c10::kStrided, ints.device());
  auto impl =
      c10::make_intrusive<at::QTensorImpl>(c10::Storage(ints.storage()), c10::DispatchKeySet(key),
                                           c10::scalarTypeToTypeMeta(qtype), std::move(quantizer));
  impl->set_sizes_and_strides(ints.sizes(), ints.strides(), ints.storage_offset());
  return at::Tensor(std::move(impl));
}

at::QuantizerPtr quantizer_on(const at::QuantizerPtr& quantizer, c10::Device device) {
  const auto scheme = quantizer->qscheme();
  if (scheme != c10::kPerChannelAffine && scheme != c10::kPerChannelAffineFloatQParams) {
    return quantizer;
  }
  auto* per_channel = static_cast<at::PerChannelAffineQuantizer*>(quantizer.get());
  if (per_channel->scales().device() == device && per_channel->zero_points().device() == device) {
    return quantizer;
  }
  return at::make_per_channel_affine_quantizer(per_channel->scales().to(device),
                                               per_channel->zero_points().to(device),
                                               per_channel->axis(), quantizer->scalar_type());
}

namespace {

// The quantizer of a kernel's result on flagos. The kernel's quantizer may hold the scales and
// zero points it was handed: alias views of the caller's flagos memory, which the caller may free.
// The result gets copies of its own.
at::QuantizerPtr flagos_quantizer(const at::QuantizerPtr& quantizer, c10::DeviceIndex device,
                                  c10::DeviceType type) {
  const auto scheme = quantizer->qscheme();
  if (scheme != c10::kPerChannelAffine && scheme != c10::kPerChannelAffineFloatQParams) {
    return quantizer;
  }
  auto* per_channel = static_cast<at::PerChannelAffineQuantizer*>(quantizer.get());
  return at::make_per_channel_affine_quantizer(
      to_flagos(per_channel->scales().clone(), device, type),
      to_flagos(per_channel->zero_points().clone(), device, type), per_channel->axis(),
      quantizer->scalar_type());
}

}  // namespace

at::Tensor quantized_to_flagos(const at::Tensor& q, c10::DeviceIndex device, c10::DeviceType type) {
  return quantized_over(to_flagos(integer_view(q), device, type),
                        flagos_quantizer(q.quantizer(), device, type));
}

at::Tensor quantized_arg(CallMapper& mapper, const at::Tensor& q, std::vector<at::Tensor>& kept) {
  at::QuantizerPtr quantizer = q.quantizer();
  const auto scheme = quantizer->qscheme();
  if (scheme == c10::kPerChannelAffine || scheme == c10::kPerChannelAffineFloatQParams) {
    auto* per_channel = static_cast<at::PerChannelAffineQuantizer*>(quantizer.get());
    quantizer = at::make_per_channel_affine_quantizer(
        mapper.arg(per_channel->scales()), mapper.arg(per_channel->zero_points()),
        per_channel->axis(), quantizer->scalar_type());
  }
  kept.push_back(integer_view(q));
  return quantized_over(mapper.arg(kept.back()), std::move(quantizer));
}

at::Tensor quantized_result(const CallMapper& mapper, const at::Tensor& q) {
  return quantized_over(mapper.result(integer_view(q)),
                        flagos_quantizer(q.quantizer(), mapper.device(), mapper.target().type()));
}

}  // namespace torch_fl::boxing
