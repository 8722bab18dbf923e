// histc of integer tensors, as CUDA computes it (PyTorch's CPU histc takes
// floating types only, CUDA's every dtype; transformers' MoE experts count
// tokens per expert with histc on int32 ids on every device but cpu and mps).
// CUDA's integer semantics (checked against torch 2.11's CUDA kernel): the
// bounds are converted to int64 (truncated, and not narrowed to the input's
// dtype); min == max takes the tensor's own min and max, and
// equal bounds widen by one on each side; a value v in [min, max] falls in bin
// (v - min) * bins / (max - min), integer division in int64, the top edge in
// the last bin; values outside are ignored; the result has the input's dtype.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>

#include "aten/composite_backend.h"

namespace torch_fl {
namespace {

at::Tensor integer_histc(const at::Tensor& self, int64_t bins, const c10::Scalar& min,
                         const c10::Scalar& max) {
  TORCH_CHECK(bins > 0, "bins must be > 0");
  int64_t lo = min.to<int64_t>();
  int64_t hi = max.to<int64_t>();
  if (lo == hi && self.numel() > 0) {
    lo = self.min().item<int64_t>();
    hi = self.max().item<int64_t>();
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  TORCH_CHECK(lo < hi, "max must be larger than min");
  const at::Tensor x = self.reshape({-1}).to(at::kLong);
  const at::Tensor inside = at::logical_and(x >= lo, x <= hi);
  at::Tensor bin = at::div((x - lo) * bins, hi - lo, "trunc").clamp_max_(bins - 1);
  // Values outside the range land in an extra bin that is dropped.
  bin = at::where(inside, bin, at::scalar_tensor(bins, bin.options()));
  at::Tensor counts = at::zeros({bins + 1}, x.options());
  counts.index_add_(0, bin, at::ones_like(bin));
  return counts.narrow(0, 0, bins).to(self.scalar_type());
}

// histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0) -> Tensor
void histc_kernel(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, 4);
  at::Tensor out =
      integer_histc(args[0].toTensor(), args[1].toInt(), args[2].toScalar(), args[3].toScalar());
  torch::jit::drop(*stack, 4);
  torch::jit::push(*stack, std::move(out));
}

// histc.out(Tensor self, int bins=100, Scalar min=0, Scalar max=0, *, Tensor(a!) out)
void histc_out_kernel(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, 5);
  at::Tensor result =
      integer_histc(args[0].toTensor(), args[1].toInt(), args[2].toScalar(), args[3].toScalar());
  at::Tensor out = args[4].toTensor();
  TORCH_CHECK(out.device() == result.device(), "histc.out: expected out on ", result.device(),
              ", got ", out.device());
  // As CUDA's histc.out: resize_output warns when a non-empty out of another size is resized.
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
  torch::jit::drop(*stack, 5);
  torch::jit::push(*stack, std::move(out));
}

const std::vector<c10::ScalarType> kIntegral = {at::kByte, at::kChar, at::kShort, at::kInt,
                                                at::kLong};

struct Registrar {
  Registrar() {
    register_composite_kernel("aten::histc", kIntegral, &histc_kernel);
    register_composite_kernel("aten::histc.out", kIntegral, &histc_out_kernel);
  }
} registrar;

}  // namespace
}  // namespace torch_fl
