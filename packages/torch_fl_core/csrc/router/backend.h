// A backend is a named provider of kernels for exact ATen overloads
// (ARCHITECTURE.md section 3). The router calls a backend with the boxed
// dispatcher stack of a flagos call.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace torch_fl {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const std::string& name() const = 0;
  // True when this backend can serve `op` (checked when a route table loads,
  // so a route never points at an empty slot).
  virtual bool has_kernel(const c10::OperatorHandle& op) const = 0;
  virtual void call(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                    torch::jit::Stack* stack) = 0;
  // For box:<key> backends, the key and alias device type: generated unboxed
  // route kernels then redispatch there without boxing.
  virtual std::optional<std::pair<c10::DispatchKey, c10::DeviceType>> box_target() const {
    return std::nullopt;
  }
};

// Registry. Names are unique; "none" is an alias of "cpu".
void register_backend(std::shared_ptr<Backend> backend);
// nullptr when unknown.
std::shared_ptr<Backend> find_backend(const std::string& name);
std::vector<std::string> backend_names();
std::string canonical_backend_name(const std::string& name);

// Ops core serves with its own kernels (copies, factories, views, ...):
// routing them would replace core's kernel, so route tables may not name them.
const std::vector<std::string>& core_native_ops();

// Full operator name for messages and counters: "aten::add.Tensor", "aten::abs".
std::string full_name(const c10::OperatorName& name);
// Log spelling users know from the platform docs: "add.Tensor", "abs".
std::string short_name(const c10::OperatorName& name);

}  // namespace torch_fl
