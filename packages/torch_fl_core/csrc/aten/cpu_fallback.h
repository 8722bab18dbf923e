// ATen's CPU fallback as flagos uses it: unrouted operators and the `cpu`
// (alias `none`) backend of route tables.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <string>

namespace torch_fl {

// count: record the call in fallback_counts() (unrouted ops); the router
// counts calls it routes to the cpu backend itself.
void run_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, bool count);
// FLAGOS_LOG=fallback: print "[flagos fallback] <op> -> cpu" for each call.
void set_fallback_log(bool on);
// What every path to the CPU checks first: its arguments' devices, as CUDA
// does, and that the thread is not capturing a device graph (`where` says
// which path, for that error). Returns where the arguments begin on the stack.
torch::jit::Stack::iterator check_fallback_call(const c10::OperatorHandle& op,
                                                torch::jit::Stack* stack, const char* where);
// Then: counts the call (when `count`) and, under FLAGOS_LOG=fallback, logs it
// with `note` (empty, or " (why)").
void note_fallback(const c10::FunctionSchema& schema, bool count, const char* note);
// The same for CPU work that is no operator (a DispatchStub's inner loop), under its `name`:
// counted, and logged under FLAGOS_LOG=fallback.
void note_fallback(const std::string& name, const char* note);

}  // namespace torch_fl
