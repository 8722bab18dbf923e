// Unboxed route kernels generated at build time (tools/gen_unboxed_routes.py
// reads the installed torch's native_functions.yaml). Each generated file
// registers a factory per overload; the router uses it when the overload is
// routed, and the boxed RouteKernel otherwise.
#pragma once

#include <torch/library.h>

#include <string>

namespace torch_fl {

class RouteState;
using UnboxedFactory = torch::CppFunction (*)(RouteState* state);

void register_unboxed_factory(const char* op_full_name, UnboxedFactory factory);
UnboxedFactory find_unboxed_factory(const std::string& op_full_name);
size_t unboxed_factory_count();

}  // namespace torch_fl
