// The `composite` backend of route tables: kernels core writes with ATen
// operators on the flagos tensors themselves (each of those calls is routed
// again), for the dtypes where every kernel a table could name on the CPU
// side lacks one that CUDA's kernels take. Tables name it per dtype
// (`histc[int32, ...] = composite`), so other dtypes never reach it; a call
// that does (a forced FLAGOS_OP_<op>=composite) is declined to the CPU
// fallback like a library kernel's decline.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/ScalarType.h>

#include <string>
#include <vector>

namespace torch_fl {

using CompositeKernel = void (*)(const c10::OperatorHandle&, torch::jit::Stack*);

// Adds `kernel` for overload `op` ("aten::histc.out") and the dtypes of its
// first tensor argument it serves; from static initialisers, before the
// first route table loads.
void register_composite_kernel(const std::string& op, std::vector<c10::ScalarType> dtypes,
                               CompositeKernel kernel);

// (overload, dtype names) of every registered kernel, for the route-table
// generators (torch_fl._C.composite_kernels()).
std::vector<std::pair<std::string, std::vector<std::string>>> composite_kernels();

}  // namespace torch_fl
