// pow of complex32 (ComplexHalf) tensors, which CUDA's kernels take and CPU's
// lack ("pow" not implemented for 'ComplexHalf'): computed as CUDA's kernel
// does, in complex<float>, and rounded to the result type PyTorch promotes to.
// Every overload of pow that takes a tensor (functional, out=, in-place) is
// served by the `composite` backend for complex32 only.
#include <ATen/ATen.h>
#include <torch_fl/kit/write_back.h>

#include "aten/composite_backend.h"

namespace torch_fl {
namespace {

at::Tensor widened(const at::Tensor& t) {
  return t.scalar_type() == at::kComplexHalf ? t.to(at::kComplexFloat) : t;
}

// The answer of pow for the call's (self, exponent) arguments, in the promoted dtype.
at::Tensor compute(const c10::IValue& self, const c10::IValue& exponent) {
  if (self.isTensor() && exponent.isTensor()) {
    const at::Tensor& a = self.toTensor();
    const at::Tensor& b = exponent.toTensor();
    return at::pow(widened(a), widened(b)).to(at::result_type(a, b));
  }
  if (self.isTensor()) {
    const at::Tensor& a = self.toTensor();
    const c10::Scalar b = exponent.toScalar();
    return at::pow(widened(a), b).to(at::result_type(a, b));
  }
  const c10::Scalar a = self.toScalar();
  const at::Tensor& b = exponent.toTensor();
  return at::pow(a, widened(b)).to(at::result_type(b, a));
}

// pow.Tensor_Tensor, pow.Tensor_Scalar, pow.Scalar
void functional(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, 2);
  at::Tensor result = compute(args[0], args[1]);
  torch::jit::drop(*stack, 2);
  torch::jit::push(*stack, std::move(result));
}

// pow.*_out(self, exponent, *, Tensor(a!) out)
void out(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, 3);
  at::Tensor dst = args[2].toTensor();
  kit::write_back(dst, compute(args[0], args[1]), /*out=*/true, op.schema().name());
  torch::jit::drop(*stack, 3);
  torch::jit::push(*stack, std::move(dst));
}

// pow_.Scalar, pow_.Tensor
void in_place(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, 2);
  at::Tensor self = args[0].toTensor();
  kit::write_back(self, compute(args[0], args[1]), /*out=*/false, op.schema().name());
  torch::jit::drop(*stack, 2);
  torch::jit::push(*stack, std::move(self));
}

struct Registrar {
  Registrar() {
    const std::vector<c10::ScalarType> half = {at::kComplexHalf};
    for (const char* op :
         {"aten::pow.Tensor_Tensor", "aten::pow.Tensor_Scalar", "aten::pow.Scalar"})
      register_composite_kernel(op, half, &functional);
    for (const char* op :
         {"aten::pow.Tensor_Tensor_out", "aten::pow.Tensor_Scalar_out", "aten::pow.Scalar_out"})
      register_composite_kernel(op, half, &out);
    for (const char* op : {"aten::pow_.Scalar", "aten::pow_.Tensor"})
      register_composite_kernel(op, half, &in_place);
  }
} registrar;

}  // namespace
}  // namespace torch_fl
