// MSE loss and its backward composed from routed operators, for a vendor whose kernel library has
// no loss op: every at:: call routes to the vendor's kernels like any other call, so the loss of a
// training step stays on the device (and inside a device-graph capture). Semantics are ATen's
// (aten/src/ATen/native/Loss.cpp): the mean over every element, or the sum, or no reduction; the
// backward's factor is 2 (over the input's numel for the mean). A vendor registers both with
// TFL_KIT_COMPOSED_MSE_LOSS(torch_fl_<v>); its generator defines their schemas only where the ops
// they use have kernels. Calls PyTorch raises on (operands of two dtypes, integers) are declined:
// core's CPU fallback raises PyTorch's own error.
#ifndef TORCH_FL_KIT_LOSS_COMPOSED_H_
#define TORCH_FL_KIT_LOSS_COMPOSED_H_

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/core/Reduction.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

namespace torch_fl::kit {

inline void check_loss_operands(const char* op, const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      a.scalar_type() == b.scalar_type() && at::isFloatingType(a.scalar_type()), op,
      ": the composed kernel takes one floating dtype (", a.scalar_type(), ", ", b.scalar_type(),
      "): PyTorch's CPU kernel decides");
}

inline at::Tensor composed_mse_loss(const at::Tensor& self, const at::Tensor& target,
                                    int64_t reduction) {
  check_loss_operands("mse_loss", self, target);
  c10::DeviceGuard guard(self.device());
  const at::Tensor d = at::sub(self, target);
  const at::Tensor sq = at::mul(d, d);
  if (reduction == at::Reduction::Mean) return at::mean(sq);
  if (reduction == at::Reduction::Sum) return at::sum(sq);
  return sq;
}

inline at::Tensor composed_mse_loss_backward(const at::Tensor& grad, const at::Tensor& self,
                                             const at::Tensor& target, int64_t reduction) {
  check_loss_operands("mse_loss_backward", self, target);
  check_loss_operands("mse_loss_backward", self, grad);
  TORCH_CHECK_NOT_IMPLEMENTED(
      at::infer_size(at::infer_size(self.sizes(), target.sizes()), grad.sizes()) == self.sizes(),
      "mse_loss_backward: operands that broadcast beyond the input: PyTorch's CPU kernel decides");
  c10::DeviceGuard guard(self.device());
  const double norm =
      reduction == at::Reduction::Mean ? 2.0 / static_cast<double>(self.numel()) : 2.0;
  return at::mul(at::mul(at::sub(self, target), grad), norm);
}

}  // namespace torch_fl::kit

#define TFL_KIT_COMPOSED_MSE_LOSS(ns)                                                 \
  TORCH_LIBRARY_IMPL(ns, PrivateUse1, m) {                                            \
    m.impl("mse_loss", TORCH_FN(torch_fl::kit::composed_mse_loss));                   \
    m.impl("mse_loss_backward", TORCH_FN(torch_fl::kit::composed_mse_loss_backward)); \
  }

#endif  // TORCH_FL_KIT_LOSS_COMPOSED_H_
