// Device-graph capture on the calling thread. While a thread captures
// (torch.flagos.graph), work that needs the host in the middle of the stream
// (the CPU fallback, host-written results, a copy to the host) cannot be
// recorded: it would synchronize a capturing stream, which invalidates the
// capture with an error naming neither the operator nor the way out. Those
// paths ask here first. Host kernels that can wait (a box:cpu kernel on
// host-addressable memory) are recorded instead, as host work the capturing
// stream runs at every replay (record_host_work).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace torch_fl {

// The flagos device the calling thread captures on, or -1: a capture it began
// (set_capturing_device), or a seat capture of its current stream.
c10::DeviceIndex capturing_device();
void set_capturing_device(c10::DeviceIndex device);

// Throws, naming `what`, the device and the vendor's runtime, when the calling
// thread is capturing. A view: host-result allocations ask on every routed
// call, and must not build a string to do it.
void check_not_capturing(std::string_view what);

// What a capture through the runtime's graph seat records host work into: its
// stream, and where the work's owner (the graph) keeps it.
class CaptureSink {
 public:
  virtual ~CaptureSink() = default;
  virtual c10::Stream stream() const = 0;
  // Runs `work` (on the stream's worker, in stream order) at every replay;
  // `before_launch` (may be empty) runs on the replaying thread before each
  // launch is queued, in capture order (draws from generators, as CUDA graphs
  // advance their offsets at replay).
  virtual void record(std::function<void()> work, std::function<void()> before_launch) = 0;
  // Runs `fn` on the replaying thread before each launch, after what earlier
  // calls gave (a generator refreshing the device words its captured kernels
  // read their seed and offset from: glue/graph_rng.h).
  virtual void before_each_launch(std::function<void()> fn) = 0;
  // What glue/graph_rng.cpp keeps for this capture; dropped with the graph.
  virtual std::shared_ptr<void>& rng_draws() = 0;
};

// The seat capture the calling thread's work goes to: the one whose stream is
// the thread's current stream on its device, whichever thread began it (as on
// CUDA, autograd's device thread records backward into the capture of the
// stream the forward ran on). nullptr when none (or a mirrored backend's).
CaptureSink* capture_sink();
// A seat capture starts / stops taking work.
void add_capture_sink(CaptureSink* sink);
void remove_capture_sink(CaptureSink* sink);

// Whether a host kernel on the calling thread must be recorded rather than
// run.
inline bool records_host_work() { return capture_sink() != nullptr; }

}  // namespace torch_fl
