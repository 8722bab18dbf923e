#include "boxing/call_mapper.h"

#include <ATen/ATen.h>

#include "boxing/alias_pool.h"
#include "boxing/alias_view.h"
#include "boxing/call_arguments.h"
#include "boxing/result_adoption.h"

namespace torch_fl::boxing {

at::Tensor CallMapper::arg(const at::Tensor& t) {
  if (!t.defined() || !t.device().is_privateuseone()) return t;
  const c10::TensorImpl* source = t.unsafeGetTensorImpl();
  const c10::StorageImpl* storage = source->unsafe_storage().unsafeGetStorageImpl();
  // A handful of arguments per call: a linear scan is the cheapest lookup.
  const Entry* sibling = nullptr;
  for (const Entry& e : entries_) {
    if (e.source == source) return e.alias;
    if (sibling == nullptr && e.storage == storage) sibling = &e;
  }
  at::Tensor alias = sibling != nullptr             ? alias_sharing_storage(sibling->alias, t, key_)
                     : aliases_ == Aliases::kPooled ? pooled_alias(t, target_, key_)
                                                    : make_alias(t, target_, key_);
  entries_.push_back(Entry{source, storage, alias});
  return alias;
}

c10::IValue CallMapper::arg_value(const c10::IValue& v) {
  return map_tensors(v, [this](const at::Tensor& t) { return arg(t); }, target_);
}

at::Tensor CallMapper::result(const at::Tensor& r) const {
  if (!r.defined() || r.device().is_privateuseone()) return r;
  // A mirrored kernel's result on another device stays there, as it does
  // natively: CUDA's flash and memory-efficient attention return their philox
  // seed and offset as CPU tensors. (Host kernels' results all stand for
  // flagos tensors.)
  if (!target_.is_cpu() && r.device().type() != target_.type()) return r;
  if (const void* data = r.storage().data()) {
    for (const Entry& e : entries_) {
      const c10::Storage& s = e.source->unsafe_storage();
      if (s.data() == data) return flagos_over(s, r);
    }
  }
  return to_flagos(r, device_, target_.type());
}

c10::IValue CallMapper::result_value(const c10::IValue& v) const {
  return map_tensors(v, [this](const at::Tensor& t) { return result(t); });
}

void CallMapper::written(const at::Tensor& original, const at::Tensor& alias) {
  if (original.defined() && original.device().is_privateuseone() && alias.defined() &&
      !alias.device().is_privateuseone()) {
    adopt_written(original, alias);
  }
}

BoxedCall::BoxedCall(const c10::FunctionSchema& schema, torch::jit::Stack* stack,
                     CallMapper& mapper)
    : schema_(schema), mapper_(mapper) {
  const size_t n = schema.arguments().size();
  const auto begin = stack->end() - static_cast<std::ptrdiff_t>(n);
  originals_.assign(begin, stack->end());
  aliases_.reserve(n);
  for (auto it = begin; it != stack->end(); ++it) {
    *it = mapper.arg_value(*it);
    aliases_.push_back(*it);
  }
}

void BoxedCall::adopt_written() {
  const auto& args = schema_.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    const auto* info = args[i].alias_info();
    if (!info || !info->isWrite()) continue;
    if (originals_[i].isTensor() && aliases_[i].isTensor()) {
      CallMapper::written(originals_[i].toTensor(), aliases_[i].toTensor());
    } else if (originals_[i].isTensorList() && aliases_[i].isTensorList()) {
      const auto bases = originals_[i].toTensorList().vec();
      const auto views = aliases_[i].toTensorList().vec();
      for (size_t j = 0; j < bases.size() && j < views.size(); ++j) {
        CallMapper::written(bases[j], views[j]);
      }
    }
  }
}

int BoxedCall::written_argument(size_t i) const { return boxing::written_argument(schema_, i); }

c10::IValue BoxedCall::result(size_t i, c10::IValue value) const {
  const int w = written_argument(i);
  if (w < 0 || !originals_[w].isTensor()) return mapper_.result_value(value);
  const at::Tensor& original = originals_[w].toTensor();
  if (value.isTensor() && value.toTensor().defined()) {
    const c10::TensorImpl* got = value.toTensor().unsafeGetTensorImpl();
    const bool is_alias =
        aliases_[w].isTensor() && got == aliases_[w].toTensor().unsafeGetTensorImpl();
    if (!is_alias && got != original.unsafeGetTensorImpl()) {
      // A kernel that returned a new tensor instead of writing the one it was
      // given (a Python kernel may): its values are copied in.
      const at::Tensor src = mapper_.result(value.toTensor());
      if (original.sizes() != src.sizes()) original.resize_(src.sizes());
      original.copy_(src);
    }
  }
  return original;
}

}  // namespace torch_fl::boxing
