// A host kernel's call recorded into a device graph instead of run. While the
// calling thread captures through the runtime's graph seat, a box:cpu call
// cannot run now (the capturing stream's work has not run, and will run again
// at each replay): its results are made from the operator's Meta kernel
// (sizes, strides, which arguments they alias) in the capture's pool, and the
// call itself becomes host work on the capturing stream, running the CPU
// kernel on the same memory at every replay.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace torch_fl::boxing {

// Replaces the call's arguments on `stack` with its results, as a kernel
// does. `key`: the dispatch key whose kernel runs at replay (CPU). Throws,
// naming the operator, when the results cannot be known before the kernel
// runs (no Meta kernel, or sizes that depend on the data).
void defer_host_call(const c10::OperatorHandle& op, c10::DispatchKey key, torch::jit::Stack* stack);

// The same as a boxed kernel (for unboxed routes, which box such a call).
void deferred_host_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                          torch::jit::Stack* stack);

}  // namespace torch_fl::boxing
