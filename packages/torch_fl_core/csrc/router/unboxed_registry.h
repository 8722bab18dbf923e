// Unboxed route kernels generated at build time (tools/gen_unboxed_routes.py
// reads the installed torch's native_functions.yaml). Each generated file
// registers a factory per overload; the router uses it when the overload is
// routed, and the boxed RouteKernel otherwise.
#pragma once

#include <ATen/core/boxing/KernelFunction.h>
#include <ATen/core/dispatch/CppSignature.h>
#include <ATen/core/stack.h>

#include <string>

namespace torch_fl {

class RouteState;

// A generated kernel and its C++ signature, registered with the dispatcher
// directly (torch::CppFunction would infer a schema and build a boxed wrapper
// per overload, which routes do not need).
struct UnboxedKernel {
  c10::KernelFunction kernel;
  c10::impl::CppSignature signature;
};
using UnboxedFactory = UnboxedKernel (*)(RouteState* state);

// The router's boxed path for one routed overload (what the boxed kernel of
// overloads without a generated one runs).
void route_boxed(RouteState& state, const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                 torch::jit::Stack* stack);

void register_unboxed_factory(const char* op_full_name, UnboxedFactory factory);
UnboxedFactory find_unboxed_factory(const std::string& op_full_name);
size_t unboxed_factory_count();

}  // namespace torch_fl
