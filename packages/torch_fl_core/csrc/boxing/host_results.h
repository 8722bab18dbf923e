// Results of host kernels in flagos memory. While a host kernel runs for a
// box:cpu call (a HostResultScope on the calling thread), CPU allocations come
// from the flagos pool of the call's device, so a fresh result already is
// flagos memory and result adoption takes it over without a copy.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <optional>

namespace torch_fl::boxing {

// `device` must be current on the thread for the whole scope (the call scope
// makes it so): allocations do not query it. `stream_id` is the id of the
// device's current stream, which the caller has just looked up and which a
// host kernel does not change. Allocations are host-writer allocations
// (allocate_for_host_writer): a kernel writes them at once, so they never
// reuse a block that work queued on the stream still reads.
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

// Installs the CPU allocator that serves HostResultScope (once; everything
// outside such a scope goes to the default CPU allocator).
void install_host_result_allocator();

// A fresh host result nobody else holds has its storage turned into flagos
// storage of `device` as it is; false when `t` is not such a result.
bool relabel_host_result(const at::Tensor& t, c10::DeviceIndex device);

// The flagos block of a host-result storage, taken out of it (the storage
// keeps a non-owning pointer); nullopt when the storage is not one.
std::optional<c10::DataPtr> take_host_result(const c10::Storage& s, c10::DeviceIndex device);

}  // namespace torch_fl::boxing
