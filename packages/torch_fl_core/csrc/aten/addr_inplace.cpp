// Tensor.addr_ on flagos. ATen's addr_ (CompositeExplicitAutograd) calls
// addr_out(self, self, ...), and the kernel tells the in-place call from an
// out= one by comparing the two references' addresses: in place, self must
// already have the result's shape; out=, self broadcasts and the output is
// resized. A call that crosses a boxed boundary (the CPU fallback, any boxed
// backend) carries values, not C++ object identity, so there the kernel would
// take the out= path and resize the caller's tensor. This kernel makes the
// in-place checks, with ATen's messages and in its order, then calls addr_out
// as ATen's composite does; with self of the right shape both paths compute
// the same values.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace torch_fl {
namespace {

at::Tensor& addr_inplace(at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2,
                         const c10::Scalar& beta, const c10::Scalar& alpha) {
  TORCH_CHECK(vec1.dim() == 1, "addr: Expected 1-D argument vec1, but got ", vec1.dim(), "-D");
  TORCH_CHECK(vec2.dim() == 1, "addr: Expected 1-D argument vec2, but got ", vec2.dim(), "-D");
  TORCH_CHECK(self.dim() == 2, "2D tensor expected, got ", self.dim(), "D tensor for input");
  TORCH_CHECK(self.size(0) == vec1.size(0) && self.size(1) == vec2.size(0),
              "size mismatch, input: ", self.sizes(), ", v1: ", vec1.sizes(),
              ", v2: ", vec2.sizes());
  return at::addr_out(self, self, vec1, vec2, beta, alpha);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("addr_", TORCH_FN(addr_inplace)); }

}  // namespace
}  // namespace torch_fl
