#include "boxing/call_mapper.h"

#include <ATen/ATen.h>

#include <unordered_map>

#include "boxing/alias_pool.h"
#include "boxing/alias_view.h"
#include "boxing/call_arguments.h"
#include "boxing/result_adoption.h"

namespace torch_fl::boxing {

struct CallMapper::Index {
  std::unordered_map<const c10::TensorImpl*, size_t> by_source;
  std::unordered_map<const c10::StorageImpl*, size_t> by_storage;  // the first entry
  std::unordered_map<const void*, size_t> by_data;                 // the first entry
};

CallMapper::CallMapper(c10::DeviceIndex device, c10::Device target, c10::DispatchKey key,
                       Aliases aliases)
    : device_(device), target_(target), key_(key), aliases_(aliases) {}

CallMapper::~CallMapper() = default;

void CallMapper::index(size_t i) {
  const Entry& e = entries_[i];
  index_->by_source.emplace(e.source, i);
  index_->by_storage.emplace(e.storage, i);
  if (const void* data = e.source->unsafe_storage().data()) index_->by_data.emplace(data, i);
}

at::Tensor CallMapper::arg(const at::Tensor& t) {
  if (!t.defined() || !t.device().is_privateuseone()) return t;
  const c10::TensorImpl* source = t.unsafeGetTensorImpl();
  const c10::StorageImpl* storage = source->unsafe_storage().unsafeGetStorageImpl();
  const Entry* sibling = nullptr;
  if (C10_LIKELY(!index_)) {
    // A handful of arguments per call: a linear scan is the cheapest lookup.
    for (const Entry& e : entries_) {
      if (e.source == source) return e.alias;
      if (sibling == nullptr && e.storage == storage) sibling = &e;
    }
  } else {
    if (auto it = index_->by_source.find(source); it != index_->by_source.end()) {
      return entries_[it->second].alias;
    }
    if (auto it = index_->by_storage.find(storage); it != index_->by_storage.end()) {
      sibling = &entries_[it->second];
    }
  }
  at::Tensor alias = sibling != nullptr             ? alias_sharing_storage(sibling->alias, t, key_)
                     : aliases_ == Aliases::kPooled ? pooled_alias(t, target_, key_)
                                                    : make_alias(t, target_, key_);
  entries_.push_back(Entry{source, storage, alias});
  if (index_) {
    index(entries_.size() - 1);
  } else if (entries_.size() == kScanned) {
    index_ = std::make_unique<Index>();
    for (size_t i = 0; i < entries_.size(); ++i) index(i);
  }
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
    if (C10_LIKELY(!index_)) {
      for (const Entry& e : entries_) {
        const c10::Storage& s = e.source->unsafe_storage();
        if (s.data() == data) return flagos_over(s, r);
      }
    } else if (auto it = index_->by_data.find(data); it != index_->by_data.end()) {
      return flagos_over(entries_[it->second].source->unsafe_storage(), r);
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
