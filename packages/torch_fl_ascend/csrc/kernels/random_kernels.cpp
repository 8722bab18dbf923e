// bernoulli_(p) on Ascend, from ACLNN's dropout mask ops: aclnnDropoutGenMaskV2 draws a bit mask
// (a bit is 0 with probability 1 - p) and aclnnDropoutDoMask expands it over a tensor of ones
// with no scaling, so every element is exactly 0 or 1. Inside a device-graph capture the mask
// comes from aclnnDropoutGenMaskV2Tensor, which reads the seed and offset from device words that
// the graph rewrites before each replay (torch_fl/philox.h): each replay draws anew and the
// generator advances as in eager. The schema is defined by the generator (tools/gen_kernels.py,
// HANDWRITTEN) only when libopapi.so has all three ops.
#include <aclnnop/aclnn_dropout_do_mask.h>
#include <aclnnop/aclnn_dropout_gen_mask_v2.h>
#include <aclnnop/aclnn_dropout_gen_mask_v2_tensor.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>
#include <torch_fl/philox.h>

#include "aclnn_common.h"

namespace tfl_ascend {
namespace {

const DtypeSet kMaskDtypes{at::kFloat, at::kHalf, at::kBFloat16};

void bernoulli_float(const c10::OperatorHandle& op, torch::jit::Stack* s) {
  Call c(op, s, Form::Inplace);
  at::Tensor self = c.tensor("self");
  const double p = c.double_("p");
  c.need(kMaskDtypes, self.scalar_type(), "aclnnDropoutGenMaskV2");
  if (!(p >= 0 && p <= 1)) c.decline("p outside [0, 1] (PyTorch's error to raise)");
  const c10::IValue& g = c.arg("generator");
  const std::optional<at::Generator> generator =
      g.isNone() ? std::nullopt : std::optional<at::Generator>(g.toGenerator());
  c10::DeviceGuard guard(c.device());
  at::Tensor r = c.output(self.sizes(), self.scalar_type(), true, {});
  const int64_t n = r.numel();
  if (n > 0) {
    const torch_fl::PhiloxInputs draw =
        torch_fl::philox_inputs(c.device(), static_cast<uint64_t>(n), generator, c.name(),
                                /*device_words=*/true);
    at::Tensor mask = at::empty({(n + 127) / 128 * 16}, r.options().dtype(at::kByte));
    const aclDataType dt = acl_dtype(r.scalar_type());
    const IntArray shape({n});
    if (draw.on_device()) {
      launch(c, &aclnnDropoutGenMaskV2TensorGetWorkspaceSize, &aclnnDropoutGenMaskV2Tensor,
             "aclnnDropoutGenMaskV2Tensor", shape, 1.0 - p, Tensor(draw.words.narrow(0, 0, 1)),
             Tensor(draw.words.narrow(0, 1, 1)), static_cast<int64_t>(draw.offset), dt,
             Tensor(mask));
    } else {
      launch(c, &aclnnDropoutGenMaskV2GetWorkspaceSize, &aclnnDropoutGenMaskV2,
             "aclnnDropoutGenMaskV2", shape, 1.0 - p, static_cast<int64_t>(draw.seed),
             static_cast<int64_t>(draw.offset), dt, Tensor(mask));
    }
    const at::Tensor ones = at::ones(r.sizes(), r.options());
    launch(c, &aclnnDropoutDoMaskGetWorkspaceSize, &aclnnDropoutDoMask, "aclnnDropoutDoMask",
           Tensor(ones), Tensor(mask), 0.0, Tensor(r));
  }
  c.finish(r);
}

}  // namespace
}  // namespace tfl_ascend

TORCH_LIBRARY_IMPL(torch_fl_ascend, PrivateUse1, m) {
  m.impl("bernoulli_.float",
         torch::CppFunction::makeFromBoxedFunction<&tfl_ascend::bernoulli_float>());
}
