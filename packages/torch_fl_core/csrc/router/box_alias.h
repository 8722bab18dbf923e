// The pieces of boxing shared by the boxed backend and the generated unboxed
// route kernels: alias views of flagos memory typed as another device, and the
// way results come back as flagos tensors.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DispatchKey.h>

#include <optional>

namespace torch_fl::box {

c10::Device target_device(c10::DeviceType type, c10::DeviceIndex flagos_index);

// A view of `t`'s memory typed as `device` with dispatch key `key` (no copy;
// keeps t's storage alive). If a kernel grows the view's storage, the new
// memory comes from the flagos pool of t's device (see take_grown).
at::Tensor make_alias(const at::Tensor& t, c10::Device device, c10::DispatchKey key);

// The same for the duration of one boxed call: non-owning (the caller holds
// t), and taken from a per-thread pool of aliases nobody else holds, re-pointed
// at t. Kernels must not keep it past the call.
at::Tensor call_alias(const at::Tensor& t, c10::Device device, c10::DispatchKey key);

// What call_alias did on the calling thread since it started: a pooled alias
// that already viewed the operand's memory, a pooled alias re-pointed at it, or
// a new alias (diagnostics for benchmarks and tests).
struct AliasCacheStats {
  uint64_t hits = 0;
  uint64_t rebinds = 0;
  uint64_t builds = 0;
};
AliasCacheStats alias_cache_stats();

// A flagos tensor over `storage` with `like`'s geometry and bits.
at::Tensor flagos_over(c10::Storage storage, const at::Tensor& like);

// The caller's flagos tensor takes the geometry (and grown memory) the kernel
// gave its out=/in-place alias.
void adopt_geometry(const at::Tensor& base, const at::Tensor& alias);

// A result tensor of a boxed kernel as a flagos tensor on `device`: a view of
// one of `bases` (the caller's flagos inputs) when it aliases its memory,
// grown flagos memory taken over, else a copy into a flagos allocation.
// view_of_input_or_fresh leaves a box:<mirror> result that is on another
// device (a CPU tensor a CUDA kernel returns) where the kernel put it.
at::Tensor to_flagos(const at::Tensor& result, c10::DeviceIndex device, c10::DeviceType type);
at::Tensor view_of_input_or_fresh(const at::Tensor& result, const at::Tensor* const* bases,
                                  size_t n, c10::DeviceIndex device, c10::DeviceType type);

// box:cpu results without a copy: while a host kernel runs for a box:cpu call
// on `device` (this scope, on the calling thread), CPU allocations come from
// the flagos pool of that device, so a fresh result is already flagos memory
// and to_flagos adopts it. Installed with install_host_result_allocator() as
// the CPU allocator; everything outside such a scope goes to the default one.
// `device` must be current on the thread for the whole scope (the box:cpu
// paths open it inside their device scope): allocations do not query it.
// Likewise `stream_id` is the id of the device's current stream, which the
// caller has just looked up (to synchronize it) and which a host kernel does
// not change: allocations take it from here instead of looking it up again.
class HostResultScope {
 public:
  HostResultScope(c10::DeviceIndex device, c10::StreamId stream_id);
  ~HostResultScope();
  HostResultScope(const HostResultScope&) = delete;
  HostResultScope& operator=(const HostResultScope&) = delete;

 private:
  int prev_;
  c10::StreamId prev_stream_;
};
void install_host_result_allocator();

}  // namespace torch_fl::box
