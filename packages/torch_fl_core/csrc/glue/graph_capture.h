// Device-graph capture on the calling thread. While a thread captures
// (torch.flagos.graph), work that needs the host in the middle of the stream
// (the CPU fallback, host-written results) cannot be recorded: it would
// synchronize a capturing stream, which invalidates the capture with an error
// naming neither the operator nor the way out. Those paths ask here first.
#pragma once

#include <c10/core/Device.h>

#include <string>

namespace torch_fl {

// The flagos device the calling thread captures on, or -1.
c10::DeviceIndex capturing_device();
void set_capturing_device(c10::DeviceIndex device);

// Throws, naming `what`, the device and the vendor's runtime, when the calling
// thread is capturing.
void check_not_capturing(const std::string& what);

}  // namespace torch_fl
