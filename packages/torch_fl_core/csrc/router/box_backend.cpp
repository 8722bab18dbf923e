#include "router/box_backend.h"

#include <ATen/ATen.h>

#include "boxing/alias_view.h"
#include "boxing/call_arguments.h"
#include "boxing/call_mapper.h"
#include "boxing/call_scope.h"
#include "boxing/deferred_host_call.h"
#include "glue/graph_capture.h"
#include "glue/runtime_access.h"

namespace torch_fl {
namespace {

using torch::jit::Stack;

// box:<key>: the in-process ATen kernel of another dispatch key on alias
// views of the same memory. This is the boxed entry (routes without a
// generated unboxed kernel, and calls that box anyway); the generated unboxed
// route kernels redispatch to the same key through the same mapper.
class BoxBackend final : public Backend {
 public:
  BoxBackend(c10::DispatchKey key, c10::DeviceType type)
      : key_(key), type_(type), name_("box:" + std::string(c10::DeviceTypeName(type, true))) {}

  std::optional<std::pair<c10::DispatchKey, c10::DeviceType>> box_target() const override {
    return std::make_pair(key_, type_);
  }

  const std::string& name() const override { return name_; }

  // Composite kernels that serve the key count: redispatching to it runs them
  // on the alias views (e.g. abs -> abs.out on CPU).
  bool has_kernel(const c10::OperatorHandle& op) const override {
    return op.hasComputedKernelForDispatchKey(key_);
  }

  void call(const c10::OperatorHandle& op, c10::DispatchKeySet, Stack* stack) override {
    const auto& schema = op.schema();
    const size_t num_args = schema.arguments().size();
    const auto args_begin = stack->end() - static_cast<std::ptrdiff_t>(num_args);
    boxing::check_same_device(op, args_begin, stack->end());
    if (C10_UNLIKELY(type_ == c10::DeviceType::CPU && records_host_work())) {
      boxing::defer_host_call(op, key_, stack);  // inside a graph capture: recorded
      return;
    }
    const std::optional<c10::DeviceIndex> found =
        boxing::first_flagos_device(args_begin, stack->end());
    const c10::DeviceIndex device = found ? *found : current_device();
    boxing::CallScope scope(device, found.has_value(), type_);
    if (boxing::has_generator_argument(schema)) {
      if (type_ == c10::DeviceType::CPU) {
        boxing::bridge_generators(schema, args_begin, stack->end());
      } else {
        boxing::mirror_generators(schema, args_begin, stack->end());
      }
    }
    boxing::CallMapper mapper(device, boxing::target_device(type_, device), key_,
                              boxing::CallMapper::Aliases::kPooled);
    boxing::MappedCall call(schema, stack, mapper);
    try {
      op.redispatchBoxed(c10::DispatchKeySet(key_), stack);
    } catch (...) {
      // A kernel that failed after resizing an out= alias leaves the caller's
      // tensor as it left the alias, as CPU and CUDA leave theirs.
      try {
        call.adopt_written();
      } catch (...) {
        // The kernel's own error is the one to report.
      }
      throw;
    }
    const size_t num_returns = schema.returns().size();
    TORCH_INTERNAL_ASSERT(stack->size() >= num_returns);
    call.adopt_written();
    const auto ret_begin = stack->end() - static_cast<std::ptrdiff_t>(num_returns);
    for (size_t i = 0; i < num_returns; ++i) {
      c10::IValue& ret = *(ret_begin + static_cast<std::ptrdiff_t>(i));
      ret = call.result(i, std::move(ret));
    }
  }

 private:
  c10::DispatchKey key_;
  c10::DeviceType type_;
  std::string name_;
};

}  // namespace

std::shared_ptr<Backend> make_box_backend(c10::DispatchKey target, c10::DeviceType type) {
  return std::make_shared<BoxBackend>(target, type);
}

}  // namespace torch_fl
