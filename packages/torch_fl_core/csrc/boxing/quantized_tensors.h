// Quantized tensors over flagos memory: a quantized tensor is its integer
// representation (qint8 is int8 bytes, quint8 uint8, qint32 int32) plus a
// quantizer, so moving, viewing and adopting one is done on that integer
// tensor with flagos's dense machinery, and only the quantizer is carried.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/quantized/Quantizer.h>
#include <c10/core/Device.h>

#include <vector>

namespace torch_fl::boxing {

class CallMapper;

// A dense tensor of q's integer type over q's storage and geometry, on q's
// device: writes through it are writes to q.
at::Tensor integer_view(const at::Tensor& q);

// A quantized tensor over `ints`'s storage and geometry (the inverse of
// integer_view), on its device.
at::Tensor quantized_over(const at::Tensor& ints, at::QuantizerPtr quantizer);

// `quantizer` with its per-channel scales and zero points on `device` (a
// quantized tensor's quantizer lives where the tensor does, as it does on
// CUDA: a CPU kernel must never read flagos memory from it); a per-tensor
// quantizer as it is.
at::QuantizerPtr quantizer_on(const at::QuantizerPtr& quantizer, c10::Device device);

// A quantized result of a `type` kernel (a quantize operator routed to a
// mirrored backend or the CPU) as a flagos tensor on flagos:<device>: its
// integer representation adopted as any result is (without a copy where its
// memory is flagos memory), its quantizer moved to flagos.
at::Tensor quantized_to_flagos(const at::Tensor& q, c10::DeviceIndex device, c10::DeviceType type);

// A flagos quantized tensor as `mapper`'s target sees it: a quantized tensor of the target device
// over the alias of its integer representation, with a per-channel quantizer's scales and zero
// points aliased too (no copy). The mapper knows its arguments by their TensorImpl: the integer
// view it was handed is appended to `kept`, which must outlive the mapper.
at::Tensor quantized_arg(CallMapper& mapper, const at::Tensor& q, std::vector<at::Tensor>& kept);

// A quantized result of the target's kernel as a flagos tensor: its integer representation
// through mapper.result (over the caller's memory where it aliases an argument: a view stays a
// view), its quantizer moved to flagos as quantized_to_flagos moves it.
at::Tensor quantized_result(const CallMapper& mapper, const at::Tensor& q);

}  // namespace torch_fl::boxing
