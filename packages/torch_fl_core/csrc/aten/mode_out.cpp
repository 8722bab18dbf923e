// torch.mode(..., out=(values, indices)) on flagos. Its ATen kernel (mode.values,
// CompositeExplicitAutograd, so no route table sees it) refuses every device
// but CPU, CUDA and XPU before calling the device's DispatchStub. This is that
// kernel for flagos: the same argument checks, the functional mode (a routed
// operator: whichever backend serves it on this vendor), then the outputs
// resized and written as resize_output and copy_ leave them.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

namespace torch_fl {
namespace {

std::tuple<at::Tensor&, at::Tensor&> mode_out(const at::Tensor& self, int64_t dim, bool keepdim,
                                              at::Tensor& values, at::Tensor& indices) {
  TORCH_CHECK(self.layout() == c10::Layout::Strided,
              "mode only supports strided layout, got: ", self.layout());
  TORCH_CHECK(self.device() == values.device(), "expected device '", self.device(), "' but got '",
              values.device(), "' for values output");
  TORCH_CHECK(self.device() == indices.device(), "expected device '", self.device(), "' but got '",
              indices.device(), "' for indices output");
  TORCH_CHECK(self.scalar_type() == values.scalar_type(), "expected scalar type '",
              self.scalar_type(), "' but got '", values.scalar_type(), "' for values output");
  TORCH_CHECK(indices.scalar_type() == at::ScalarType::Long, "expected scalar type '",
              at::ScalarType::Long, "' but got '", indices.scalar_type(), "' for indices output");
  dim = at::maybe_wrap_dim(dim, self.dim());
  auto [v, i] = at::mode(self, dim, keepdim);
  if (self.dim() == 0) {
    // ATen's trivial path for a 0-dim input: a plain resize, no warning.
    values.resize_({});
    indices.resize_({});
  } else {
    // As ATen resizes reduction outputs: the reduced dimension put back first
    // (so a non-contiguous out keeps its strides and the resize warning names
    // the kept-dim shape), then resize_output, then squeezed again.
    auto kept = self.sizes().vec();
    kept[dim] = 1;
    for (at::Tensor* out : {&values, &indices}) {
      if (!keepdim && dim <= out->dim()) out->unsqueeze_(dim);
      at::native::resize_output(*out, kept);
      if (!keepdim) out->squeeze_(dim);
    }
  }
  values.copy_(v);
  indices.copy_(i);
  return {values, indices};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("mode.values", TORCH_FN(mode_out)); }

}  // namespace
}  // namespace torch_fl
