// _has_compatible_shallow_copy_type: nn.Module._apply moves a parameter in
// place (keeping the Parameter object, and with it tied weights) only when
// this says the old and new tensors can share a TensorImpl type. ATen's
// answer lists the dense backends it knows and leaves PrivateUse1 out, so
// `module.to("flagos")` would replace every Parameter. flagos tensors are
// plain strided TensorImpls like CPU ones; say so.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace torch_fl {
namespace {

bool dense_cpu_or_flagos(const at::Tensor& t) {
  return t.layout() == c10::kStrided && (t.device().is_cpu() || t.device().is_privateuseone()) &&
         !t.is_quantized() && !t.is_nested();
}

bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  if (self.key_set() == from.key_set()) return true;
  if (dense_cpu_or_flagos(self) && dense_cpu_or_flagos(from)) return true;
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

// The op is CompositeImplicitAutograd, so the autograd key is where flagos
// calls land first.
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
}
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
}

}  // namespace
}  // namespace torch_fl
