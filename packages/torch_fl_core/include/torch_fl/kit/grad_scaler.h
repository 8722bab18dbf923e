// The argument checks of GradScaler's two kernels (_amp_foreach_non_finite_check_and_unscale_,
// _amp_update_scale_), with CUDA's messages (aten/src/ATen/native/cuda/AmpKernels.cu): every
// vendor's versions check the same before touching anything.
#ifndef TORCH_FL_KIT_GRAD_SCALER_H_
#define TORCH_FL_KIT_GRAD_SCALER_H_

#include <ATen/core/Tensor.h>

namespace torch_fl::kit {

inline void check_unscale_arguments(const at::Tensor& found_inf, const at::Tensor& inv_scale) {
  TORCH_CHECK(inv_scale.numel() == 1, "inv_scale must be a 1-element tensor.");
  TORCH_CHECK(found_inf.numel() == 1, "found_inf must be a 1-element tensor.");
  TORCH_CHECK(inv_scale.scalar_type() == at::kFloat, "inv_scale must be a float tensor.");
  TORCH_CHECK(found_inf.scalar_type() == at::kFloat, "found_inf must be a float tensor.");
}

inline void check_update_scale_arguments(const at::Tensor& scale, const at::Tensor& tracker,
                                         const at::Tensor& found_inf) {
  TORCH_CHECK(tracker.numel() == 1 && scale.numel() == 1 && found_inf.numel() == 1,
              "_amp_update_scale_: scale, growth_tracker and found_inf must be 1-element tensors");
  TORCH_CHECK(scale.scalar_type() == at::kFloat && found_inf.scalar_type() == at::kFloat &&
                  tracker.scalar_type() == at::kInt,
              "_amp_update_scale_: scale and found_inf must be float, growth_tracker int32");
}

}  // namespace torch_fl::kit

#endif  // TORCH_FL_KIT_GRAD_SCALER_H_
