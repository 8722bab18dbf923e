// What a kernel of another device type needs around a call on flagos memory,
// boxed or unboxed: the call's flagos device current (runtime calls and the
// mirrored backend's current device follow it), and for a host kernel (a CPU
// target) the stream's earlier work done first, since it cannot enqueue
// behind it (docs/device.md, Memory), with its fresh results allocated in
// flagos memory (HostResultScope).
#pragma once

#include <c10/core/Device.h>

#include <optional>

#include "boxing/host_results.h"
#include "glue/runtime_access.h"

namespace torch_fl::boxing {

class CallScope {
 public:
  // make_current: false when `device` is already current (a factory call names
  // no flagos tensor, and takes the current device). host_results: whether a
  // host kernel's allocations come from the flagos pool.
  CallScope(c10::DeviceIndex device, bool make_current, c10::DeviceType target,
            bool host_results = true);
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  std::optional<CurrentDeviceScope> current_;
  std::optional<HostResultScope> results_;
};

}  // namespace torch_fl::boxing
