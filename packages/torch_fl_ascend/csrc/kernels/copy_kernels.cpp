// The same-device copies core's byte moves cannot do (a cast, a strided layout), on ACLNN's
// aclnnInplaceCopy (which honours both tensors' strides and converts to selfRef's dtype) on the
// current stream, instead of core staging both spans through the host (a stream wait in eager
// mode, and a refusal inside a device-graph capture). Core calls it for exactly those copies
// (torch_fl_ascend::copy_, core's aten/vendor_copy.h): same NPU, same sizes, no conj/neg bits, no
// partial overlap. It is never a route: copy_ between devices and the host stays core's.
#include <aclnnop/aclnn_copy.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "aclnn_common.h"

namespace tfl_ascend {
namespace {

// The dtypes aclnnInplaceCopy moves and converts between.
const DtypeSet kCopyDtypes{at::kFloat, at::kHalf,  at::kBFloat16, at::kDouble, at::kLong,
                           at::kInt,   at::kShort, at::kChar,     at::kByte,   at::kBool};

void copy(const c10::OperatorHandle& op, torch::jit::Stack* s) {
  Call c(op, s, Form::Inplace);
  at::Tensor self = c.tensor("self");
  const at::Tensor src = c.tensor("src");
  TORCH_CHECK(src.device() == self.device() && src.sizes() == self.sizes(), c.name(),
              " (vendor ascend): the device copy takes two tensors of one NPU and one shape, got ",
              src.device(), " ", src.sizes(), " into ", self.device(), " ", self.sizes());
  c.need(kCopyDtypes, self.scalar_type(), "aclnnInplaceCopy");
  c.need(kCopyDtypes, src.scalar_type(), "aclnnInplaceCopy");
  c10::DeviceGuard guard(c.device());
  if (self.numel() > 0) {
    launch(c, &aclnnInplaceCopyGetWorkspaceSize, &aclnnInplaceCopy, "aclnnInplaceCopy",
           Tensor(self), Tensor(src));
  }
  c.finish(self);
}

}  // namespace
}  // namespace tfl_ascend

TORCH_LIBRARY_FRAGMENT(torch_fl_ascend, m) {
  m.def("copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)");
}

TORCH_LIBRARY_IMPL(torch_fl_ascend, PrivateUse1, m) {
  m.impl("copy_", torch::CppFunction::makeFromBoxedFunction<&tfl_ascend::copy>());
}
