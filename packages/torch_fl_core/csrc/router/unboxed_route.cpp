#include "router/unboxed_route.h"

#include <ATen/CPUGeneratorImpl.h>

#include "aten/stack_args.h"
#include "glue/runtime_access.h"
#include "glue/stream_pool.h"

namespace torch_fl::unboxed {

std::optional<at::Generator> bridge_generator(const std::optional<at::Generator>& gen,
                                              const Observer& obs,
                                              const c10::FunctionSchema& schema,
                                              c10::DeviceType type) {
  // Reuse the boxed bridge on a one-slot stack so both paths draw identically.
  torch::jit::Stack stack;
  stack.emplace_back(gen);
  if (type == c10::DeviceType::CPU) {
    bridge_generator_value(schema, stack.front(), obs.device, obs.numel);
  } else {
    mirror_generator_value(stack.front());
  }
  if (stack.front().isNone()) return std::nullopt;
  return stack.front().toGenerator();
}

BoxScope::BoxScope(const Observer& obs, const c10::OperatorHandle& op, c10::DeviceType type) {
  if (obs.other_device) {
    TORCH_CHECK(false,
                "Expected all tensors to be on the same device, but found at least two "
                "devices, flagos:",
                static_cast<int>(*obs.device), " and flagos:", static_cast<int>(*obs.other_device),
                "! (when checking arguments for ", op.schema().operator_name(), ")");
  }
  if (obs.device && obs.cpu_nonscalar) check_cpu_tensors_allowed(op, *obs.device);
  if (obs.device) {
    device_ = *obs.device;
    current_.emplace(device_);
  } else {
    device_ = current_device();  // factories: already current
  }
  if (type == c10::DeviceType::CPU) {
    // A host kernel cannot enqueue on the flagos stream: wait for the
    // stream's earlier work first (ARCHITECTURE.md section 4).
    const c10::Stream stream = current_stream(device_);
    TFL_CALL(device_, stream_synchronize, native_stream(stream));
    // Fresh results of the host kernel in flagos memory, on this stream
    // (passed on so the allocation does not look it up a second time).
    results_.emplace(device_, stream.id());
  }
  // The route as a profiler row (box:<key> backends take this unboxed path).
  static const std::string kCpu = "box:cpu";
  static const std::string kMirror =
      mirror_device_type() ? "box:" + c10::DeviceTypeName(*mirror_device_type(), true) : "box:?";
  route_.emplace(type == c10::DeviceType::CPU ? kCpu : kMirror, op, device_);
}

}  // namespace torch_fl::unboxed
