// torch.ops.torch_fl_ascend._current_acl_stream(device): the aclrtStream (as an
// integer) behind the flagos current stream of a device -- what a Triton
// launcher (FlagGems on an Ascend backend) enqueues on, so every producer
// shares the flagos stream (docs/routing.md, "Producers on one stream").
#include <c10/core/Device.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cstdint>

#include "aclnn_common.h"

namespace {

int64_t current_acl_stream(int64_t device) {
  const c10::Device d(c10::kPrivateUse1, static_cast<c10::DeviceIndex>(device));
  c10::DeviceGuard guard(d);
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(tfl_ascend::current_stream(d)));
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(torch_fl_ascend, m) {
  m.def("_current_acl_stream(int device) -> int", &current_acl_stream);
}
