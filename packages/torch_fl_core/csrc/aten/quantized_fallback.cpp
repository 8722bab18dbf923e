// Quantized tensors (QuantizedPrivateUse1) have no kernels on flagos: every operator on one, and
// every kernel result that would become one (a quantize op routed to a mirrored backend or the
// CPU), is refused with one clear error naming the operator or result, the device and the
// runtime, instead of the dispatcher's "Could not run ... 'Quantizedflagos' backend" or a
// quantized tensor no operator can use. PyTorch deprecates these tensor
// types (torch.quantize_per_tensor and friends warn that they will be removed), so quantizing
// stays on the CPU.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <string>

#include "boxing/quantized_refusal.h"

namespace torch_fl {

namespace {

void refuse_quantized_call(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const auto begin = stack->end() - static_cast<std::ptrdiff_t>(schema.arguments().size());
  std::string device = "flagos";
  for (auto it = begin; it != stack->end(); ++it) {
    if (it->isTensor() && it->toTensor().defined() && it->toTensor().device().is_privateuseone()) {
      device = it->toTensor().device().str();
      break;
    }
  }
  refuse_quantized(c10::toString(schema.operator_name()) + " on a quantized tensor", device);
}

}  // namespace

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuse_quantized_call>());
}

}  // namespace torch_fl
