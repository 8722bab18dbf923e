// box:<key>: run another in-process ATen backend's kernel on alias views of
// the same memory (zero copies in), e.g. box:cpu on host-addressable sim
// devices, box:cuda on CUDA-ABI vendors.
#pragma once

#include <c10/core/DispatchKey.h>

#include <memory>

#include "router/backend.h"

namespace torch_fl {

// `target` names the dispatch key whose kernels run (CPU, CUDA) and
// `target_device_type` the device type of the alias views handed to them;
// a flagos device index maps to the same index on the target (CPU: none).
std::shared_ptr<Backend> make_box_backend(c10::DispatchKey target,
                                          c10::DeviceType target_device_type);

}  // namespace torch_fl
