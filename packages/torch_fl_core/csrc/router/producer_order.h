// Ordering between producers on one stream.
//
// Every producer enqueues on the flagos current stream, so stream order is
// the ordering -- except on a runtime declaring TFL_CAP_UNORDERED_PRODUCERS,
// whose hardware does not order a native producer (SDK kernels, the runtime's
// copies) behind work an unordered producer (a Python/Triton kernel) queued
// on the same stream. There core inserts the barrier at that boundary only:
// a Python backend call marks the current streams of its devices, and the
// next native producer on a marked stream drains it first (then unmarks it).
// A native producer followed by a Triton kernel needs nothing.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <vector>

namespace torch_fl {

// After unordered-producer work was enqueued on `device`'s current stream.
void note_unordered_producer(c10::DeviceIndex device);
// Before a native producer uses `device`'s current stream.
void order_native_producer(c10::DeviceIndex device);
// The flagos devices among the schema arguments on the stack (collect them
// before a Python kernel consumes its arguments, note them after it ran).
std::vector<c10::DeviceIndex> stack_flagos_devices(const c10::OperatorHandle& op,
                                                   const torch::jit::Stack& stack);
// order_native_producer for every flagos device among the arguments.
void order_native_producer_for_stack(const c10::OperatorHandle& op, const torch::jit::Stack& stack);

// Tests: turn the barrier off to show the hazard; count barriers inserted.
void set_producer_barrier(bool on);
bool producer_barrier_enabled();
uint64_t producer_barrier_count();

}  // namespace torch_fl
