// A backend is a named provider of kernels for exact ATen overloads
// (docs/routing.md, Backends). The router calls a backend with the boxed
// dispatcher stack of a flagos call.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "glue/op_names.h"

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

// ATen's CPU fallback as core runs it (aten/cpu_fallback.cpp registers it; the
// router and backends reach it through here, so routing does not depend on
// the ATen layer above it). `counted`: record the call in fallback_counts()
// (calls the router did not count as routed to the cpu backend).
using CpuFallbackFn = void (*)(const c10::OperatorHandle&, torch::jit::Stack*, bool counted);
void set_cpu_fallback(CpuFallbackFn fn);
void call_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, bool counted);

}  // namespace torch_fl
