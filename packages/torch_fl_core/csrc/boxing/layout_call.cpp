#include "boxing/layout_call.h"

#include <ATen/ATen.h>
#include <ATen/quantized/QTensorImpl.h>

#include "boxing/call_arguments.h"
#include "boxing/call_mapper.h"
#include "boxing/quantized_tensors.h"
#include "boxing/sparse_tensors.h"

namespace torch_fl::boxing {

LayoutMappedCall::LayoutMappedCall(const c10::FunctionSchema& schema, torch::jit::Stack* stack,
                                   CallMapper& mapper)
    : schema_(schema), mapper_(mapper) {
  map_stack_arguments(
      stack, schema.arguments().size(), [this](const at::Tensor& t) { return arg(t); },
      mapper.target(), originals_, aliases_);
}

at::Tensor LayoutMappedCall::arg(const at::Tensor& t) {
  if (!t.defined() || !t.device().is_privateuseone()) return t;
  at::Tensor alias;
  if (is_sparse_layout(t) || t.is_quantized()) {
    for (const Mapped& m : mapped_) {
      if (m.source == t.unsafeGetTensorImpl()) return m.alias;
    }
    alias = t.is_quantized() ? quantized_arg(mapper_, t, kept_) : sparse_arg(mapper_, t);
    mapped_.push_back(
        {t.unsafeGetTensorImpl(), alias, t.is_quantized() ? alias.quantizer().get() : nullptr});
  } else {
    alias = mapper_.arg(t);
  }
  // Some kernels decide what to compute from it (_sparse_mm_reduce_impl keeps amax/amin's
  // argmax only for a backward). The call's autograd ran above this kernel, so no graph is
  // recorded on the aliases (the mapper's owning aliases are the call's own).
  if (t.requires_grad() && !alias.requires_grad()) alias.requires_grad_(true);
  return alias;
}

void LayoutMappedCall::adopt_written() {
  const auto& args = schema_.arguments();
  for (size_t i = 0; i < args.size() && i < originals_.size(); ++i) {
    const auto* info = args[i].alias_info();
    if (info == nullptr || !info->isWrite()) continue;
    if (!originals_[i].isTensor() || !aliases_[i].isTensor()) continue;
    const at::Tensor& original = originals_[i].toTensor();
    const at::Tensor& alias = aliases_[i].toTensor();
    if (!original.defined() || !original.device().is_privateuseone()) continue;
    if (is_sparse_layout(original)) {
      sparse_written(mapper_, original, alias);
      continue;
    }
    CallMapper::written(original, alias);
    if (original.is_quantized() && alias.is_quantized()) {
      const auto given = std::find_if(mapped_.begin(), mapped_.end(), [&](const Mapped& m) {
        return m.source == original.unsafeGetTensorImpl();
      });
      if (given != mapped_.end() && alias.quantizer().get() != given->given) {
        // The kernel gave its output another quantizer (copy_ from another quantized tensor).
        const at::Tensor moved = quantized_result(mapper_, alias);
        static_cast<at::QTensorImpl*>(original.unsafeGetTensorImpl())
            ->set_quantizer_(moved.quantizer());
      }
    }
  }
}

c10::IValue LayoutMappedCall::result(size_t i, c10::IValue value) const {
  const int w = written_argument(schema_, i);
  if (w >= 0 && originals_[w].isTensor()) {
    const at::Tensor& original = originals_[w].toTensor();
    if (value.isTensor() && value.toTensor().defined() &&
        !value.toTensor().is_same(aliases_[w].toTensor()) && !value.toTensor().is_same(original)) {
      // A kernel that returned another tensor than the one it was given: its values are copied in.
      const at::Tensor src = mapper_.result(value.toTensor());
      if (!is_sparse_layout(original) && original.sizes() != src.sizes()) {
        original.resize_(src.sizes());
      }
      original.copy_(src);
    }
    return original;
  }
  return mapper_.result_value(value);
}

}  // namespace torch_fl::boxing
