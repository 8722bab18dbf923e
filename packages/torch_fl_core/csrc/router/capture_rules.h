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
// Both are refused by name at the call instead of replaying a wrong answer,
// unless the route's preference list names a backend after it, which the
// capture then uses.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceType.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "glue/graph_capture.h"
#include "router/backend.h"

namespace torch_fl {

// Why `op` cannot be served inside a capture by a backend whose kernels see
// the operands as `views` (nullopt: flagos tensors), or nullptr when it can.
const char* uncapturable_reason(const c10::OperatorHandle& op,
                                std::optional<c10::DeviceType> views);

// Throws, naming the operator, the backend, the device and the runtime, with
// `why` (from uncapturable_reason) for the capture on `device`.
[[noreturn]] void refuse_uncapturable(const c10::OperatorHandle& op, const std::string& backend,
                                      c10::DeviceIndex device, const char* why);

// The backend a capture runs `op` on instead of a Python backend that cannot
// be captured for it: the next choice of the op's preference list
// ("flaggems, ascend, cpu" captures on ascend); nullptr when the list has none.
std::shared_ptr<Backend> capture_alternate(const c10::OperatorHandle& op);
// Replaces the alternates (op full name -> backend name), with the routes.
void set_capture_alternates(std::map<std::string, std::string> alternates);

}  // namespace torch_fl
