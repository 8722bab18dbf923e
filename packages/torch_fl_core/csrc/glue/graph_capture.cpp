#include "glue/graph_capture.h"

#include <c10/util/Exception.h>

#include "glue/runtime_access.h"

namespace torch_fl {
namespace {
thread_local c10::DeviceIndex t_capturing = -1;
}  // namespace

c10::DeviceIndex capturing_device() { return t_capturing; }

void set_capturing_device(c10::DeviceIndex device) { t_capturing = device; }

void check_not_capturing(const std::string& what) {
  if (C10_LIKELY(t_capturing < 0)) return;
  TORCH_CHECK(false, "flagos: ", what,
              " cannot run while a device graph is being captured on flagos:",
              static_cast<int>(t_capturing), " (runtime ", runtime_name(),
              "): it needs the host in the middle of the stream. Route the operator to a device "
              "kernel (docs/routing.md) or move it out of the captured region.");
}

}  // namespace torch_fl
