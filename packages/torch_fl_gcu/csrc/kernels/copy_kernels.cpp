// The same-device copies core's byte moves cannot do (a cast, a strided layout), on topsatenCopy,
// the one topsaten op that honours strides (docs/gcu.md), on the current stream, instead of core
// staging both spans through the host and waiting for the stream. Core calls it for exactly those
// copies (torch_fl_gcu::copy_, core's aten/vendor_copy.h): same card, same sizes, no conj/neg
// bits, no partial overlap. It is never a route. 64-bit dtypes, which topsaten does not move,
// are declined: core stages them as before.
#include <c10/core/DeviceGuard.h>
#include <torch_fl/kit/device_copy.h>

#include <vector>

#include "topsaten_common.h"

namespace tfl_gcu {
namespace {

// A descriptor with the tensor's own strides (rank 0 as {1}), which topsatenCopy reads.
struct Strided {
  explicit Strided(const at::Tensor& t)
      : dims(t.dim() == 0 ? std::vector<int64_t>{1} : t.sizes().vec()),
        strides(t.dim() == 0 ? std::vector<int64_t>{1} : t.strides().vec()),
        desc(topsaten::topsatenSize_t(dims.data(), static_cast<int64_t>(dims.size())),
             topsaten::topsatenSize_t(strides.data(), static_cast<int64_t>(strides.size())),
             tops_dtype(t.scalar_type()), t.data_ptr()) {}
  std::vector<int64_t> dims, strides;
  topsaten::topsatenTensor desc;
};

void copy(const c10::OperatorHandle& op, torch::jit::Stack* s) {
  Call c(op, s, Form::Inplace);
  const auto [self, src] = torch_fl::kit::device_copy_operands(c);
  for (const at::Tensor* t : {static_cast<const at::Tensor*>(&self), &src}) {
    if (!kStorage.has(t->scalar_type())) {
      c.decline(std::string("topsatenCopy does not move ") + c10::toString(t->scalar_type()));
    }
  }
  ensure_init();
  c10::DeviceGuard guard(c.device());
  if (self.numel() > 0) {
    Strided dst(self), from(src);
    check(topsaten::topsatenCopy(dst.desc, from.desc, /*non_blocking=*/false,
                                 current_stream(c.device())),
          "topsatenCopy", c);
  }
  c.finish(self);
}

}  // namespace
}  // namespace tfl_gcu

TFL_KIT_DEVICE_COPY(torch_fl_gcu, &tfl_gcu::copy)
