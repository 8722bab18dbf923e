// Autocast for flagos with CUDA's per-op policy: PyTorch ships the op lists
// in ATen/autocast_mode.h but registers them for PrivateUse1 nowhere, so we
// register them here, unchanged, so `torch.autocast("flagos")` casts exactly
// the ops `torch.autocast("cuda")` casts.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

// Inside at::autocast because the op-list macros name ATen types unqualified.
namespace at::autocast {
namespace {

// Same refusal and message as CUDA's autocast (its function is not exported).
at::Tensor binary_cross_entropy_banned(const at::Tensor&, const at::Tensor&,
                                       const std::optional<at::Tensor>&, int64_t) {
  TORCH_CHECK(
      false,
      "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
      "autocast.\nMany models use a sigmoid layer right before the binary cross entropy "
      "layer.\nIn this case, combine the two layers using "
      "torch.nn.functional.binary_cross_entropy_with_logits\nor torch.nn.BCEWithLogitsLoss.  "
      "binary_cross_entropy_with_logits and BCEWithLogits are\nsafe to autocast.");
}

// Ops not in any list run in the dtype they were given.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define TFL_LOW_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(TFL_LOW_PRECISION_FP)
#define TFL_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(TFL_FP32)
#define TFL_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(TFL_FP32_SET_OPT_DTYPE)
#define TFL_DIFFERENT_REDISPATCH(REDISPATCH_FUNC, REGISTER_NAME, REGISTER_SIGNATURE, \
                                 REDISPATCH_SIGNATURE, POLICY)                       \
  KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE(                               \
      REDISPATCH_FUNC, REGISTER_NAME, REGISTER_SIGNATURE, REDISPATCH_SIGNATURE, POLICY)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(TFL_DIFFERENT_REDISPATCH)
#define TFL_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(TFL_PROMOTE)
  // As on CUDA: binary_cross_entropy is unsafe in reduced precision.
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"),
         TORCH_FN((&binary_cross_entropy_banned)));
}

}  // namespace
}  // namespace at::autocast
