// RNG kernels whose CPU versions would draw from the CPU default generator
// (they take no Generator argument), so the fallback cannot route them
// through the flagos generator. Written with ops that do take one.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace torch_fl {
namespace {

std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p,
                                                  std::optional<bool> train) {
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  const bool training = train.value_or(true);
  if (!training || p == 0 || input.numel() == 0) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  const double keep = 1. - p;
  const double scale = keep == 0 ? 0. : 1. / keep;
  at::Tensor mask = at::empty_like(input).bernoulli_(keep);
  at::Tensor output = input * mask * scale;
  // A comparison, not a dtype-converting copy: every vendor computes it on the device, and it
  // records into a device graph (a converting copy is staged on the host where memory is not
  // host-addressable).
  return {output, mask.ne(0)};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("native_dropout", TORCH_FN(native_dropout)); }

}  // namespace
}  // namespace torch_fl
