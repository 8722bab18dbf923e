// scaled_dot_product_attention on flagos picks its kernel through
// _fused_sdp_choice_stub, a DispatchStub with a PrivateUse1 slot. Left empty,
// ATen falls back to the math path (a matmul-softmax-matmul decomposition):
// on the cuda vendor that is several kernels and an S x S score tensor per
// head instead of one fused kernel.
//
// flagos answers with the choice of the backend the route table sends
// aten::_fused_sdp_choice to (box:cuda asks CUDA's sdp_utils on alias views,
// honouring torch.backends.cuda's enable_*_sdp flags and sdpa_kernel();
// box:cpu asks the CPU's), kept only when the kernel ATen then calls for a
// non-CUDA device is routed forward and backward:
//   flash      -> ATen calls _scaled_dot_product_flash_attention_for_cpu
//                 (box:cpu serves it); where that is not routed but the CUDA
//                 flash kernel is, the choice becomes "overrideable" and the
//                 overrideable kernels below run flash attention through the
//                 router (no head-dim padding here: multiples of 8 only).
//   efficient  -> _scaled_dot_product_efficient_attention
//   cudnn      -> _scaled_dot_product_cudnn_attention
// Anything else is math, which is always correct.
#include <ATen/ATen.h>
#include <ATen/SDPBackend.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <torch/library.h>

#include "router/router.h"

namespace torch_fl {
namespace {

constexpr int64_t kMath = static_cast<int64_t>(at::SDPBackend::math);

bool routed(const char* op, c10::ScalarType dtype) {
  return route_backend(op, dtype) != nullptr;
}

bool routed_pair(const char* fwd, const char* bwd, c10::ScalarType dtype) {
  return routed(fwd, dtype) && routed(bwd, dtype);
}

// The flash bridge takes what CUDA's flash kernel takes unpadded.
bool flash_bridge_fits(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                       const std::optional<at::Tensor>& mask, bool enable_gqa) {
  if (mask.has_value() && mask->defined()) return false;
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return false;
  if (enable_gqa && q.sym_size(1) != k.sym_size(1)) return false;
  for (const auto* t : {&q, &k, &v}) {
    if (t->sym_size(-1) % 8 != 0) return false;
  }
  return true;
}

int64_t fused_sdp_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal,
                         std::optional<double> scale, bool enable_gqa) {
  const auto dtype = q.scalar_type();
  if (!routed("aten::_fused_sdp_choice", dtype)) return kMath;
  const int64_t choice =
      at::_fused_sdp_choice(q, k, v, mask, dropout_p, is_causal, scale, enable_gqa);
  switch (static_cast<at::SDPBackend>(choice)) {
    case at::SDPBackend::flash_attention:
      if (routed_pair("aten::_scaled_dot_product_flash_attention_for_cpu",
                      "aten::_scaled_dot_product_flash_attention_for_cpu_backward", dtype)) {
        return choice;
      }
      if (routed_pair("aten::_scaled_dot_product_flash_attention",
                      "aten::_scaled_dot_product_flash_attention_backward", dtype) &&
          flash_bridge_fits(q, k, v, mask, enable_gqa)) {
        return static_cast<int64_t>(at::SDPBackend::overrideable);
      }
      return kMath;
    case at::SDPBackend::efficient_attention:
      return routed_pair("aten::_scaled_dot_product_efficient_attention",
                         "aten::_scaled_dot_product_efficient_attention_backward", dtype)
                 ? choice
                 : kMath;
    case at::SDPBackend::cudnn_attention:
      return routed_pair("aten::_scaled_dot_product_cudnn_attention",
                         "aten::_scaled_dot_product_cudnn_attention_backward", dtype)
                 ? choice
                 : kMath;
    default:
      return kMath;
  }
}

using FusedOut = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt,
                            c10::SymInt, at::Tensor, at::Tensor, at::Tensor>;

// Reached only through the "overrideable" choice above: flash attention via
// the routed flash ops (same outputs; philox seed/offset are flash's rng state).
FusedOut fused_attention_overrideable(const at::Tensor& q, const at::Tensor& k,
                                      const at::Tensor& v,
                                      const std::optional<at::Tensor>& attn_bias,
                                      double dropout_p, bool is_causal, bool return_debug_mask,
                                      std::optional<double> scale) {
  TORCH_CHECK(!attn_bias.has_value() || !attn_bias->defined(),
              "flagos: _scaled_dot_product_fused_attention_overrideable runs flash attention, "
              "which takes no attention mask (device ",
              q.device(), ")");
  return at::_scaled_dot_product_flash_attention(q, k, v, dropout_p, is_causal,
                                               return_debug_mask, scale);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_overrideable_backward(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const at::Tensor& out,
    const at::Tensor& logsumexp, const at::Tensor& cum_seq_q, const at::Tensor& cum_seq_k,
    c10::SymInt max_q, c10::SymInt max_k, double dropout_p, bool is_causal,
    const at::Tensor& philox_seed, const at::Tensor& philox_offset, std::optional<double> scale) {
  TORCH_CHECK(!attn_bias.defined(),
              "flagos: the overrideable attention backward runs flash attention, which takes no "
              "attention mask (device ",
              q.device(), ")");
  auto [gq, gk, gv] = at::_scaled_dot_product_flash_attention_backward_symint(
      grad_out, q, k, v, out, logsumexp, cum_seq_q, cum_seq_k, std::move(max_q),
      std::move(max_k), dropout_p, is_causal, philox_seed, philox_offset, scale);
  return {grad_input_mask[0] ? gq : at::Tensor(), grad_input_mask[1] ? gk : at::Tensor(),
          grad_input_mask[2] ? gv : at::Tensor(), at::Tensor()};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_scaled_dot_product_fused_attention_overrideable",
         TORCH_FN(fused_attention_overrideable));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward",
         TORCH_FN(fused_attention_overrideable_backward));
}

}  // namespace
}  // namespace torch_fl

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_fl::fused_sdp_choice)
}  // namespace at::native
