#include "router/unboxed_route.h"

#include "boxing/call_arguments.h"

namespace torch_fl::unboxed {

std::optional<at::Generator> bridge_generator(const std::optional<at::Generator>& gen,
                                              const Observer& obs,
                                              const c10::FunctionSchema& schema,
                                              c10::DeviceType type) {
  // Reuse the boxed bridge on a one-slot stack so both paths draw identically.
  torch::jit::Stack stack;
  stack.emplace_back(gen);
  if (type == c10::DeviceType::CPU) {
    boxing::bridge_generator_value(schema, stack.front(), obs.device, obs.numel);
  } else {
    boxing::mirror_generator_value(stack.front());
  }
  if (stack.front().isNone()) return std::nullopt;
  return stack.front().toGenerator();
}

c10::DeviceIndex call_device(const Observer& obs, const c10::OperatorHandle& op) {
  if (obs.other_device) boxing::throw_two_devices(op, *obs.device, *obs.other_device);
  if (!obs.device) return current_device();  // factories: already current
  if (obs.cpu_nonscalar) boxing::check_cpu_tensors_allowed(op, *obs.device, obs.cpu_nonscalar);
  return *obs.device;
}

}  // namespace torch_fl::unboxed
