// What a Python backend's kernel (FlagGems) may do inside a device-graph
// capture. A capture records stream work and replays it; what such a kernel
// decides on the host at the call is decided once, at capture. Two things it
// cannot get right:
//  - a draw from a generator: the kernel takes the seed and offset as host
//    values, so every replay would repeat the capture's random numbers (CUDA
//    graphs avoid this only for kernels that read them from device memory;
//    a vendor's library kernel does, through torch_fl/philox.h);
//  - work on host views of the operands (a Python backend with CPU views):
//    it runs now, not at each replay.
// Both are refused by name at the call instead of replaying a wrong answer.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceType.h>

#include <optional>
#include <string>

#include "glue/graph_capture.h"

namespace torch_fl {

// Throws, naming the operator, the backend, the device and the runtime, when
// `op` cannot be served by `backend` inside the calling thread's capture
// (`device`, from capturing_device()). `views`: the device type the backend's
// kernels see the operands as (nullopt: flagos tensors).
void refuse_uncapturable(const c10::OperatorHandle& op, const std::string& backend,
                         c10::DeviceIndex device, std::optional<c10::DeviceType> views);

// The check a backend makes first: one thread-local read and one relaxed load
// when nothing captures.
inline void check_capturable(const c10::OperatorHandle& op, const std::string& backend,
                             std::optional<c10::DeviceType> views) {
  const c10::DeviceIndex device = capturing_device();
  if (C10_UNLIKELY(device >= 0)) refuse_uncapturable(op, backend, device, views);
}

}  // namespace torch_fl
