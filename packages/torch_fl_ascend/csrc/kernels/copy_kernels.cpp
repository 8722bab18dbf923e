// The same-device copies core's byte moves cannot do (a cast, a strided layout), on ACLNN's
// aclnnInplaceCopy (which honours both tensors' strides and converts to selfRef's dtype) on the
// current stream, instead of core staging both spans through the host (a stream wait in eager
// mode, and a refusal inside a device-graph capture). Core calls it for exactly those copies
// (torch_fl_ascend::copy_, core's aten/vendor_copy.h): same NPU, same sizes, no conj/neg bits, no
// partial overlap. It is never a route: copy_ between devices and the host stays core's.
#include <aclnnop/aclnn_copy.h>
#include <c10/core/DeviceGuard.h>
#include <torch_fl/kit/device_copy.h>

#include "aclnn_common.h"

namespace tfl_ascend {
namespace {

// The dtypes aclnnInplaceCopy moves and converts between.
const DtypeSet kCopyDtypes{at::kFloat, at::kHalf,  at::kBFloat16, at::kDouble, at::kLong,
                           at::kInt,   at::kShort, at::kChar,     at::kByte,   at::kBool};

void copy(const c10::OperatorHandle& op, torch::jit::Stack* s) {
  Call c(op, s, Form::Inplace);
  const auto [self, src] = torch_fl::kit::device_copy_operands(c);
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

TFL_KIT_DEVICE_COPY(torch_fl_ascend, &tfl_ascend::copy)
