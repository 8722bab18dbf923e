// torch.ops.torch_fl_gcu._current_tops_stream(device): the topsStream_t (as an
// integer) behind the flagos current stream of a device -- what a Triton
// launcher (FlagGems on the enflame backend) enqueues on, so every producer
// shares the flagos stream (docs/routing.md, "Producers on one stream").
#include <c10/core/Device.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cstdint>

#include "topsaten_common.h"

namespace {

int64_t current_tops_stream(int64_t device) {
  const c10::Device d(c10::kPrivateUse1, static_cast<c10::DeviceIndex>(device));
  c10::DeviceGuard guard(d);
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(tfl_gcu::current_stream(d)));
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(torch_fl_gcu, m) {
  m.def("_current_tops_stream(int device) -> int", &current_tops_stream);
}
