// Backend-specific view kernels. ATen's implementations only touch metadata,
// so they are correct for any device; views must never reach the CPU
// fallback (it would return copies instead of aliases).
#include <ATen/NativeFunctions.h>
#include <torch/library.h>

namespace torch_fl {
namespace {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real));
  m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex));
}

}  // namespace
}  // namespace torch_fl
