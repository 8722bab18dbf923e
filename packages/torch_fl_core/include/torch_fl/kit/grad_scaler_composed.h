// GradScaler's two kernels composed from routed operators, for a vendor whose kernel library has
// no fused non-finite-check/unscale or scale-update op: every at:: call below routes to the
// vendor's kernels like any other call. Semantics are CUDA's (aten/src/ATen/native/cuda/
// AmpKernels.cu). A vendor registers both under its namespace with
// TFL_KIT_COMPOSED_GRAD_SCALER(torch_fl_gcu), and its generator defines their schemas only where
// the ops they use have kernels.
#ifndef TORCH_FL_KIT_GRAD_SCALER_COMPOSED_H_
#define TORCH_FL_KIT_GRAD_SCALER_COMPOSED_H_

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>
#include <torch_fl/kit/grad_scaler.h>

namespace torch_fl::kit {

inline void check_same_device(const char* op, const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.device() == b.device(), op,
              ": Expected all tensors to be on the same device, but found at least two devices, ",
              a.device(), " and ", b.device(), "!");
}

// found_inf = 1 if any element of any tensor is inf/NaN; every tensor *= inv_scale.
inline void composed_non_finite_check_and_unscale(at::TensorList self, at::Tensor& found_inf,
                                                  const at::Tensor& inv_scale) {
  constexpr const char* kOp = "_amp_foreach_non_finite_check_and_unscale_";
  check_unscale_arguments(found_inf, inv_scale);
  for (const at::Tensor& g : self) {
    check_same_device(kOp, g, found_inf);
    check_same_device(kOp, g, inv_scale);
    if (g.numel() == 0) continue;
    c10::DeviceGuard guard(g.device());
    // g - g is 0 exactly where g is finite (inf - inf and NaN - x are NaN).
    const at::Tensor finite = at::eq(at::sub(g, g), 0).all();
    const at::Tensor bad = at::logical_not(finite).to(at::kFloat).reshape(found_inf.sizes());
    found_inf.copy_(at::maximum(found_inf, bad));
    at::Tensor gv = g;
    gv.mul_(inv_scale.reshape({}));
  }
}

inline at::Tensor& composed_update_scale(at::Tensor& scale, at::Tensor& tracker,
                                         const at::Tensor& found_inf, double growth, double backoff,
                                         int64_t interval) {
  constexpr const char* kOp = "_amp_update_scale_";
  check_update_scale_arguments(scale, tracker, found_inf);
  check_same_device(kOp, scale, tracker);
  check_same_device(kOp, scale, found_inf);
  c10::DeviceGuard guard(scale.device());
  const at::Tensor inf = at::ne(found_inf, 0);
  const at::Tensor succ = at::add(tracker, 1);
  const at::Tensor reach = at::eq(succ, interval);
  const at::Tensor grown = at::mul(scale, growth);
  const at::Tensor grown_ok = at::eq(at::sub(grown, grown), 0);
  const at::Tensor zero = at::zeros_like(tracker);
  const at::Tensor kept = at::where(reach, at::where(grown_ok, grown, scale), scale);
  const at::Tensor new_scale = at::where(inf, at::mul(scale, backoff), kept);
  const at::Tensor new_tracker = at::where(inf, zero, at::where(reach, zero, succ));
  scale.copy_(new_scale);
  tracker.copy_(new_tracker);
  return scale;
}

}  // namespace torch_fl::kit

#define TFL_KIT_COMPOSED_GRAD_SCALER(ns)                                          \
  TORCH_LIBRARY_IMPL(ns, PrivateUse1, m) {                                        \
    m.impl("_amp_foreach_non_finite_check_and_unscale_",                          \
           TORCH_FN(torch_fl::kit::composed_non_finite_check_and_unscale));       \
    m.impl("_amp_update_scale_", TORCH_FN(torch_fl::kit::composed_update_scale)); \
  }

#endif  // TORCH_FL_KIT_GRAD_SCALER_COMPOSED_H_
