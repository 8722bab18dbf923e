// GradScaler's two kernels on Ascend, on ACLNN's fused AMP ops:
// aclnnForeachNonFiniteCheckAndUnscale (found_inf = 1 where any element is
// inf/NaN, every grad *= inv_scale; a list of more than 50 grads goes in
// chunks: each chunk only ever sets found_inf) and aclnnAmpUpdateScale.
// Semantics are CUDA's (aten/src/ATen/native/cuda/AmpKernels.cu). Their
// schemas are defined by the generator (tools/gen_kernels.py, HANDWRITTEN)
// only when libopapi.so has both ops.
#include <aclnnop/aclnn_amp_update_scale.h>
#include <aclnnop/aclnn_foreach_non_finite_check_and_unscale.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>
#include <torch_fl/kit/grad_scaler.h>

#include "aclnn_common.h"

namespace tfl_ascend {
namespace {

const DtypeSet kGradDtypes{at::kFloat, at::kHalf, at::kBFloat16};

void same_device(const Call& c, const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.device() == b.device(), c.name(),
              ": Expected all tensors to be on the same device, but found at least two devices, ",
              a.device(), " and ", b.device(), "! (vendor ascend)");
}

void non_finite_check_and_unscale(const c10::OperatorHandle& op, torch::jit::Stack* s) {
  Call c(op, s, Form::Functional);
  const std::vector<at::Tensor> grads = c.tensors("self");
  const at::Tensor found_inf = c.tensor("found_inf"), inv_scale = c.tensor("inv_scale");
  torch_fl::kit::check_unscale_arguments(found_inf, inv_scale);
  std::vector<at::Tensor> work;
  for (const at::Tensor& g : grads) {
    same_device(c, g, found_inf);
    same_device(c, g, inv_scale);
    // Every grad is checked before any is touched: a decline must have no effect.
    c.need(kGradDtypes, g.scalar_type(), "aclnnForeachNonFiniteCheckAndUnscale");
    if (g.numel() > 0) work.push_back(g);
  }
  c10::DeviceGuard guard(c.device());
  for (size_t i = 0; i < work.size(); i += kMaxTensorList) {
    const std::vector<at::Tensor> chunk(work.begin() + i,
                                        work.begin() + std::min(work.size(), i + kMaxTensorList));
    launch(c, &aclnnForeachNonFiniteCheckAndUnscaleGetWorkspaceSize,
           &aclnnForeachNonFiniteCheckAndUnscale, "aclnnForeachNonFiniteCheckAndUnscale",
           TensorList(chunk), Tensor(found_inf), Tensor(inv_scale));
  }
  c.finish(std::vector<at::Tensor>{});
}

void update_scale(const c10::OperatorHandle& op, torch::jit::Stack* s) {
  Call c(op, s, Form::Functional);
  at::Tensor scale = c.tensor("self"), tracker = c.tensor("growth_tracker");
  const at::Tensor found_inf = c.tensor("found_inf");
  torch_fl::kit::check_update_scale_arguments(scale, tracker, found_inf);
  same_device(c, scale, tracker);
  same_device(c, scale, found_inf);
  c10::DeviceGuard guard(c.device());
  // Results into fresh tensors, then back: the outputs are separate arguments of the op.
  at::Tensor new_scale = at::empty_like(scale), new_tracker = at::empty_like(tracker);
  launch(c, &aclnnAmpUpdateScaleGetWorkspaceSize, &aclnnAmpUpdateScale, "aclnnAmpUpdateScale",
         Tensor(scale), Tensor(tracker), Tensor(found_inf), c.double_("scale_growth_factor"),
         c.double_("scale_backoff_factor"), c.int_("growth_interval"), Tensor(new_scale),
         Tensor(new_tracker));
  scale.copy_(new_scale);
  tracker.copy_(new_tracker);
  c.finish(scale);
}

}  // namespace
}  // namespace tfl_ascend

TORCH_LIBRARY_IMPL(torch_fl_ascend, PrivateUse1, m) {
  m.impl("_amp_foreach_non_finite_check_and_unscale_",
         torch::CppFunction::makeFromBoxedFunction<&tfl_ascend::non_finite_check_and_unscale>());
  m.impl("_amp_update_scale_",
         torch::CppFunction::makeFromBoxedFunction<&tfl_ascend::update_scale>());
}
