// scaled_dot_product_attention on flagos picks its kernel through
// _fused_sdp_choice_stub, a DispatchStub with a PrivateUse1 slot. Left empty,
// ATen falls back to the math path (a matmul-softmax-matmul decomposition):
// on the cuda vendor that is several kernels and an S x S score tensor per
// head instead of one fused kernel.
//
// flagos answers with the choice of the backend the route table sends
// aten::_fused_sdp_choice to (box:cuda asks CUDA's sdp_utils on alias views,
// honouring torch.backends.cuda's enable_*_sdp flags and sdpa_kernel(), and
// on the delegate runtime asks CUDA's kernel directly; box:cpu asks the CPU's),
// kept only when the kernel ATen then calls for a
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
#include <ATen/ExpandUtils.h>
#include <ATen/SDPBackend.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <torch/library.h>

#include <limits>
#include <optional>

#include "glue/runtime_access.h"
#include "router/backend.h"
#include "boxing/alias_pool.h"
#include "boxing/alias_view.h"
#include "router/router.h"

namespace torch_fl {
namespace {

constexpr int64_t kMath = static_cast<int64_t>(at::SDPBackend::math);

// Asked on every scaled_dot_product_attention call: cached lookups.
RouteProbe g_choice("aten::_fused_sdp_choice");
RouteProbe g_flash_cpu("aten::_scaled_dot_product_flash_attention_for_cpu");
RouteProbe g_flash_cpu_bwd("aten::_scaled_dot_product_flash_attention_for_cpu_backward");
RouteProbe g_flash("aten::_scaled_dot_product_flash_attention");
RouteProbe g_flash_bwd("aten::_scaled_dot_product_flash_attention_backward");
RouteProbe g_efficient("aten::_scaled_dot_product_efficient_attention");
RouteProbe g_efficient_bwd("aten::_scaled_dot_product_efficient_attention_backward");
RouteProbe g_cudnn("aten::_scaled_dot_product_cudnn_attention");
RouteProbe g_cudnn_bwd("aten::_scaled_dot_product_cudnn_attention_backward");

bool routed_pair(RouteProbe& fwd, RouteProbe& bwd, c10::ScalarType dtype) {
  return fwd.peek(dtype) != nullptr && bwd.peek(dtype) != nullptr;
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

// The choice of the backend _fused_sdp_choice is routed to. On the delegate
// runtime, when that is box:<the mirrored device>, the mirrored device's
// kernel is asked on alias views directly: the answer box:cuda would give,
// without the router's scope (device switch, result handling) per attention
// call. (Its DispatchStub cannot be called from here: DispatchStubImpl's
// exported signature depends on torch's CPU-capability build macros.)
//
// Under tracing (Dynamo's FakeTensors, AOT's functional tensors, symbolic
// shapes) the operands have no memory to alias, and a dispatcher call would
// record _fused_sdp_choice in the traced graph as a node returning an int,
// which the joint-graph partitioner rejects. The choice reads only metadata:
// a box chooser is asked on storage-less tensors of the operands' geometry,
// so a compiled graph picks the kernel eager mode picks; any other chooser
// cannot be asked without memory and tracing takes the math path.
bool traced(const at::Tensor& t) {
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  constexpr auto tracing_keys = c10::python_ks | c10::functorch_transforms_ks |
                                c10::DispatchKeySet(c10::DispatchKey::Functionalize);
  return t.key_set().has_any(tracing_keys) || !impl->has_storage() ||
         impl->has_symbolic_sizes_strides();
}

at::Tensor geometry_only(const at::Tensor& t, c10::Device device, c10::DispatchKey key) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, c10::DataPtr(nullptr, device),
                       /*allocator=*/nullptr, /*resizable=*/false);
  auto impl =
      c10::make_intrusive<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(key), t.dtype());
  impl->set_sizes_and_strides(t.sym_sizes(), t.sym_strides(), t.sym_storage_offset());
  return at::Tensor(std::move(impl));
}

int64_t ask_on_geometry(Backend& chooser, const at::Tensor& q, const at::Tensor& k,
                        const at::Tensor& v, const std::optional<at::Tensor>& mask,
                        double dropout_p, bool is_causal, std::optional<double> scale,
                        bool enable_gqa) {
  const auto box = chooser.box_target();
  if (!box) return kMath;
  const c10::DeviceIndex index = q.device().index();
  const c10::Device device = boxing::target_device(box->second, index);
  std::optional<CurrentDeviceScope> current;
  if (device.type() != c10::DeviceType::CPU) current.emplace(index);
  auto shaped = [&](const at::Tensor& t) {
    return t.defined() && t.device().is_privateuseone() ? geometry_only(t, device, box->first) : t;
  };
  std::optional<at::Tensor> mask_shaped;
  if (mask.has_value()) mask_shaped = shaped(*mask);
  return at::_ops::_fused_sdp_choice::redispatch(c10::DispatchKeySet(box->first), shaped(q),
                                                 shaped(k), shaped(v), mask_shaped, dropout_p,
                                                 is_causal, scale, enable_gqa);
}

int64_t ask_chooser(Backend& chooser, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal,
                    std::optional<double> scale, bool enable_gqa) {
  if (traced(q) || traced(k) || traced(v) ||
      (mask.has_value() && mask->defined() && traced(*mask))) {
    return ask_on_geometry(chooser, q, k, v, mask, dropout_p, is_causal, scale, enable_gqa);
  }
  const auto box = chooser.box_target();
  const auto mirror = mirror_device_type();
  if (box && mirror && box->second == *mirror && q.device().is_privateuseone()) {
    const c10::DeviceIndex index = q.device().index();
    CurrentDeviceScope current(index);  // the choice reads the current device's properties
    const c10::Device device(*mirror, index);
    auto alias = [&](const at::Tensor& t) {
      return t.defined() && t.device().is_privateuseone()
                 ? boxing::pooled_alias(t, device, box->first)
                 : t;
    };
    std::optional<at::Tensor> mask_alias;
    if (mask.has_value()) mask_alias = alias(*mask);
    return at::_ops::_fused_sdp_choice::redispatch(c10::DispatchKeySet(box->first), alias(q),
                                                   alias(k), alias(v), mask_alias, dropout_p,
                                                   is_causal, scale, enable_gqa);
  }
  return at::_fused_sdp_choice(q, k, v, mask, dropout_p, is_causal, scale, enable_gqa);
}

int64_t fused_sdp_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal,
                         std::optional<double> scale, bool enable_gqa) {
  const auto dtype = q.scalar_type();
  Backend* chooser = g_choice.pick(dtype);
  if (chooser == nullptr) return kMath;
  const int64_t choice =
      ask_chooser(*chooser, q, k, v, mask, dropout_p, is_causal, scale, enable_gqa);
  switch (static_cast<at::SDPBackend>(choice)) {
    case at::SDPBackend::flash_attention:
      if (routed_pair(g_flash_cpu, g_flash_cpu_bwd, dtype)) return choice;
      if (routed_pair(g_flash, g_flash_bwd, dtype) &&
          flash_bridge_fits(q, k, v, mask, enable_gqa)) {
        return static_cast<int64_t>(at::SDPBackend::overrideable);
      }
      return kMath;
    case at::SDPBackend::efficient_attention:
      return routed_pair(g_efficient, g_efficient_bwd, dtype) ? choice : kMath;
    case at::SDPBackend::cudnn_attention:
      return routed_pair(g_cudnn, g_cudnn_bwd, dtype) ? choice : kMath;
    default:
      return kMath;
  }
}

using FusedOut = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt,
                            c10::SymInt, at::Tensor, at::Tensor, at::Tensor>;

// The overrideable attention runs on a routed fused kernel: flash (no mask,
// what the "overrideable" choice above picks), else memory-efficient
// attention, which takes an additive bias as CUDA's does, else the CPU flash
// kernel (boolean or additive masks). Forward and backward pick by the same
// rule, so they pair while the routes do not change in between.
enum class Bridge { kFlash, kEfficient, kFlashCpu, kNone };

Bridge bridge_for(c10::ScalarType dtype, bool has_mask) {
  // CUDA's flash kernel computes in half precision only ("FlashAttention only support fp16 and
  // bf16"): other dtypes go to memory-efficient attention where it is routed (it takes them), and
  // to flash only where nothing else is (a flash route of another backend may take them).
  const bool efficient = routed_pair(g_efficient, g_efficient_bwd, dtype);
  const bool half = dtype == at::kHalf || dtype == at::kBFloat16;
  if (!has_mask && (half || !efficient) && routed_pair(g_flash, g_flash_bwd, dtype)) {
    return Bridge::kFlash;
  }
  if (efficient) return Bridge::kEfficient;
  if (routed_pair(g_flash_cpu, g_flash_cpu_bwd, dtype)) return Bridge::kFlashCpu;
  return Bridge::kNone;
}

[[noreturn]] void no_bridge(const char* op, const at::Tensor& q, bool has_mask) {
  TORCH_CHECK(false, "flagos: ", op, " on ", q.device(), " (vendor runtime '", runtime_name(),
              "', dtype ", q.scalar_type(), (has_mask ? ", with an attention mask" : ""),
              "): no fused attention kernel is routed for it; route "
              "_scaled_dot_product_efficient_attention, _scaled_dot_product_flash_attention_for_cpu"
              " or (without a mask) _scaled_dot_product_flash_attention, each with its backward, "
              "or call scaled_dot_product_attention, which then runs the math path");
}

// The bias memory-efficient attention takes, as SDPA prepares it before calling that kernel: a
// boolean mask made additive (-inf where it is false), its last dimension padded to 16 elements
// (the kernel's alignment; sliced back, so only the stride grows), broadcast to
// [batch, heads, L, S] ("Bias expected in BMHK format" otherwise).
at::Tensor efficient_bias(const at::Tensor& mask, const at::Tensor& q, const at::Tensor& k) {
  constexpr int64_t kAlign = 16;
  at::Tensor bias = mask;
  if (bias.scalar_type() == at::kBool) {
    bias = at::zeros_like(bias, q.options())
               .masked_fill_(bias.logical_not(), -std::numeric_limits<double>::infinity());
  }
  bool aligned = bias.stride(-1) == 1;
  for (int64_t i = 0; i + 1 < bias.dim(); ++i) aligned = aligned && bias.stride(i) % kAlign == 0;
  if (!aligned) {
    const int64_t last = bias.size(-1);
    bias = at::pad(bias, {0, kAlign - last % kAlign}).slice(-1, 0, last);
  }
  return bias.expand({q.size(0), q.size(1), q.size(2), k.size(2)});
}

FusedOut fused_attention_overrideable(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      const std::optional<at::Tensor>& attn_bias, double dropout_p,
                                      bool is_causal, bool return_debug_mask,
                                      std::optional<double> scale) {
  const bool has_mask = attn_bias.has_value() && attn_bias->defined();
  switch (bridge_for(q.scalar_type(), has_mask)) {
    case Bridge::kFlash:
      return at::_scaled_dot_product_flash_attention(q, k, v, dropout_p, is_causal,
                                                     return_debug_mask, scale);
    case Bridge::kEfficient: {
      std::optional<at::Tensor> bias;
      if (has_mask) bias = efficient_bias(*attn_bias, q, k);
      auto [out, lse, seed, offset] = at::_scaled_dot_product_efficient_attention(
          q, k, v, bias, /*compute_log_sumexp=*/true, dropout_p, is_causal, scale);
      return {out,           lse,           at::Tensor(),    at::Tensor(),
              q.sym_size(2), k.sym_size(2), std::move(seed), std::move(offset),
              at::Tensor()};
    }
    case Bridge::kFlashCpu: {
      auto [out, lse] = at::_scaled_dot_product_flash_attention_for_cpu(
          q, k, v, dropout_p, is_causal, attn_bias, scale);
      return {out,           lse,          at::Tensor(), at::Tensor(), q.sym_size(2),
              k.sym_size(2), at::Tensor(), at::Tensor(), at::Tensor()};
    }
    case Bridge::kNone:
      break;
  }
  no_bridge("_scaled_dot_product_fused_attention_overrideable", q, has_mask);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_overrideable_backward(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const at::Tensor& out,
    const at::Tensor& logsumexp, const at::Tensor& cum_seq_q, const at::Tensor& cum_seq_k,
    c10::SymInt max_q, c10::SymInt max_k, double dropout_p, bool is_causal,
    const at::Tensor& philox_seed, const at::Tensor& philox_offset, std::optional<double> scale) {
  const bool has_mask = attn_bias.defined();
  auto masked = [&](at::Tensor gq, at::Tensor gk, at::Tensor gv,
                    at::Tensor gb) -> std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> {
    return {grad_input_mask[0] ? gq : at::Tensor(), grad_input_mask[1] ? gk : at::Tensor(),
            grad_input_mask[2] ? gv : at::Tensor(), grad_input_mask[3] ? gb : at::Tensor()};
  };
  switch (bridge_for(q.scalar_type(), has_mask)) {
    case Bridge::kFlash: {
      auto [gq, gk, gv] = at::_scaled_dot_product_flash_attention_backward_symint(
          grad_out, q, k, v, out, logsumexp, cum_seq_q, cum_seq_k, std::move(max_q),
          std::move(max_k), dropout_p, is_causal, philox_seed, philox_offset, scale);
      return masked(gq, gk, gv, at::Tensor());
    }
    case Bridge::kEfficient: {
      const at::Tensor bias = has_mask ? efficient_bias(attn_bias, q, k) : attn_bias;
      auto [gq, gk, gv, gb] = at::_scaled_dot_product_efficient_attention_backward(
          grad_out, q, k, v, bias, out, logsumexp, philox_seed, philox_offset, dropout_p,
          grad_input_mask, is_causal, scale);
      // The bias was broadcast for the kernel: its gradient sums back to the mask's shape.
      if (gb.defined() && gb.sizes() != attn_bias.sizes()) gb = at::sum_to(gb, attn_bias.sizes());
      return masked(gq, gk, gv, gb);
    }
    case Bridge::kFlashCpu: {
      TORCH_CHECK(!grad_input_mask[3], "flagos: the overrideable attention backward on ",
                  q.device(),
                  " runs the CPU flash kernel, which gives no gradient for the attention mask");
      std::optional<at::Tensor> mask;
      if (has_mask) mask = attn_bias;
      auto [gq, gk, gv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(
          grad_out, q, k, v, out, logsumexp, dropout_p, is_causal, mask, scale);
      return masked(gq, gk, gv, at::Tensor());
    }
    case Bridge::kNone:
      break;
  }
  no_bridge("_scaled_dot_product_fused_attention_overrideable_backward", q, has_mask);
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
