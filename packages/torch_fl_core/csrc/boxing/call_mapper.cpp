#include "boxing/call_mapper.h"

#include <ATen/ATen.h>

#include "boxing/alias_pool.h"
#include "boxing/alias_view.h"
#include "boxing/call_arguments.h"
#include "boxing/quantized_tensors.h"
#include "boxing/result_adoption.h"
#include "boxing/sparse_tensors.h"

namespace torch_fl::boxing {

namespace {
// What an entry is found by in the index: its source tensor, its storage and
// its data (the first entry of each).
enum Key : uint32_t { kSource, kStorage, kData };
}  // namespace

CallMapper::~CallMapper() {
  for (const KeptList& k : kept_) k.set->give_back();
  if (index_ != nullptr) PointerIndex::release(index_);
}

void CallMapper::index(size_t i) const {
  const Entry& e = entries_[i];
  const auto v = static_cast<uint32_t>(i);
  index_->insert(e.storage, kStorage, v);
  if (data_indexed_) {
    if (const void* data = e.source->unsafe_storage().data()) index_->insert(data, kData, v);
  }
}

const at::Tensor& CallMapper::arg(const at::Tensor& t) {
  if (!t.defined() || !t.device().is_privateuseone()) return t;
  const c10::TensorImpl* source = t.unsafeGetTensorImpl();
  const c10::StorageImpl* storage = source->unsafe_storage().unsafeGetStorageImpl();
  int64_t first = -1;  // the first entry over this storage
  if (C10_LIKELY(index_ == nullptr)) {
    // A handful of arguments per call: a linear scan is the cheapest lookup.
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].source == source) return entries_[i].alias;
      if (first < 0 && entries_[i].storage == storage) first = static_cast<int64_t>(i);
    }
  } else {
    first = index_->find(storage, kStorage);
    for (int64_t i = first; i >= 0; i = entries_[i].next) {
      if (entries_[i].source == source) return entries_[i].alias;
    }
  }
  if (C10_UNLIKELY(!kept_.empty()) && first < 0) {
    const int64_t kept = kept_alias(t, source, storage);
    if (kept >= 0) return entries_[kept].alias;
  }
  const auto n = static_cast<int32_t>(entries_.size());
  if (C10_LIKELY(first < 0 && aliases_ == Aliases::kPooled)) {
    // The common case: a new storage, a pooled alias (copied out of the pool
    // straight into the entry).
    entries_.push_back(Entry{source, storage, pooled_alias(t, target_, key_, index_ != nullptr)});
  } else {
    entries_.push_back(Entry{source, storage,
                             first >= 0 ? alias_sharing_storage(entries_[first].alias, t, key_)
                                        : make_alias(t, target_, key_)});
    if (first >= 0) {
      entries_[n].next = entries_[first].next;
      entries_[first].next = n;
    }
  }
  if (index_ != nullptr) {
    if (first < 0 || data_indexed_) index(n);
  } else if (entries_.size() == kScanned) {
    index_ = PointerIndex::acquire();
    for (size_t i = 0; i < entries_.size(); ++i) index(i);
  }
  return entries_.back().alias;
}

int64_t CallMapper::kept_alias(const at::Tensor& t, const c10::TensorImpl* source,
                               const c10::StorageImpl* storage) {
  const void* data = storage->data();
  if (data == nullptr) return -1;
  for (const KeptList& k : kept_) {
    const int64_t i = k.set->find_data(data);
    if (i < 0) continue;
    const at::Tensor& sibling = k.sources[i];
    if (sibling.storage().unsafeGetStorageImpl() != storage) return -1;
    // The list tensor itself, or another tensor over its storage: an entry
    // (one alias storage, as natively; an alias of another tensor goes with
    // the call, so the kept one is free again after it).
    entries_.push_back(Entry{source, storage,
                             sibling.unsafeGetTensorImpl() == source
                                 ? k.set->aliases()[i]
                                 : alias_sharing_storage(k.set->aliases()[i], t, key_)});
    if (index_ != nullptr) index(entries_.size() - 1);
    return static_cast<int64_t>(entries_.size()) - 1;
  }
  return -1;
}

bool CallMapper::shares_memory_with_call(const ListAliases& set) const {
  for (const Entry& e : entries_) {
    const void* data = e.source->unsafe_storage().data();
    if (data != nullptr && set.find_data(data) >= 0) return true;
  }
  for (const KeptList& k : kept_) {
    // The held sets' memory is their lists' (checked when they were taken).
    for (const void* data : k.set->data()) {
      if (set.find_data(data) >= 0) return true;
    }
  }
  return false;
}

at::TensorList CallMapper::arg_list(at::TensorList l, std::vector<at::Tensor>& owned) {
  const bool long_list = aliases_ == Aliases::kPooled && l.size() >= ListAliases::kMinLength;
  ListAliases::Found found = ListAliases::Found::kNone;
  if (long_list) {
    ListAliases* set = ListAliases::find(l, target_, key_, found);
    if (found == ListAliases::Found::kInUse) {
      // Held already: by this call when the caller passed the same list twice
      // (addcmul_(s, g, g)), and then these aliases again.
      for (const KeptList& k : kept_) {
        if (k.set != set || k.sources.size() != l.size()) continue;
        bool same = true;
        for (size_t i = 0; i < l.size() && same; ++i) {
          same = k.sources[i].unsafeGetTensorImpl() == l[i].unsafeGetTensorImpl();
        }
        if (same) return set->aliases();
      }
    } else if (found == ListAliases::Found::kFound && !shares_memory_with_call(*set)) {
      set->hold();
      kept_.push_back(KeptList{set, l});
      return set->aliases();
    }
  }
  owned.reserve(l.size());
  reserve(l.size());
  for (const auto& t : l) owned.push_back(arg(t));
  // A set that exists (held elsewhere, or sharing memory with this call's
  // other arguments) is not rebuilt.
  if (long_list) {
    ListAliases::missed();
    if (found == ListAliases::Found::kNone) ListAliases::note(l, target_, key_);
  }
  return owned;
}

at::Tensor CallMapper::result(const at::Tensor& r) const {
  if (!r.defined() || r.device().is_privateuseone()) return r;
  // A mirrored kernel's result on another device stays there, as it does
  // natively: CUDA's flash and memory-efficient attention return their philox
  // seed and offset as CPU tensors. (Host kernels' results all stand for
  // flagos tensors.)
  if (!target_.is_cpu() && r.device().type() != target_.type()) return r;
  // A sparse result (to_sparse) joins flagos as its parts, a quantized one as its integers.
  constexpr c10::DispatchKeySet kParts =
      c10::sparse_ks | c10::sparse_csr_ks | c10::DispatchKeySet(c10::DispatchKey::Quantized);
  if (C10_UNLIKELY(r.unsafeGetTensorImpl()->key_set().has_any(kParts))) {
    return r.is_quantized() ? quantized_result(*this, r) : sparse_result(*this, r);
  }
  if (const void* data = r.storage().data()) {
    if (C10_LIKELY(index_ == nullptr)) {
      for (const Entry& e : entries_) {
        const c10::Storage& s = e.source->unsafe_storage();
        if (s.data() == data) return flagos_over(s, r);
      }
    } else {
      if (!data_indexed_) {
        data_indexed_ = true;
        for (size_t i = 0; i < entries_.size(); ++i) index(i);
      }
      const int64_t i = index_->find(data, kData);
      if (i >= 0) return flagos_over(entries_[i].source->unsafe_storage(), r);
    }
    for (const KeptList& k : kept_) {
      const int64_t i = k.set->find_data(data);
      if (i >= 0) return flagos_over(k.sources[i].storage(), r);
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

MappedCall::MappedCall(const c10::FunctionSchema& schema, torch::jit::Stack* stack,
                       CallMapper& mapper)
    : schema_(schema), mapper_(mapper) {
  const size_t n = schema.arguments().size();
  map_stack_arguments(
      stack, n, [&mapper](const at::Tensor& t) { return mapper.arg(t); }, mapper.target(),
      originals_, aliases_);
  const auto& args = schema.arguments();
  for (size_t i = 0; i < n && i < args.size(); ++i) {
    const auto* info = args[i].alias_info();
    if (info == nullptr || !info->isWrite() || !originals_[i].isTensorList() ||
        !aliases_[i].isTensorList()) {
      continue;
    }
    const auto bases = originals_[i].toTensorList();
    const auto views = aliases_[i].toTensorList();
    for (size_t j = 0; j < bases.size() && j < views.size(); ++j) {
      list_versions_.watch(bases.get(j), views.get(j));
    }
    list_versions_.may_repeat();
  }
}

void MappedCall::adopt_written() {
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
  list_versions_.apply();
}

int MappedCall::written_argument(size_t i) const { return boxing::written_argument(schema_, i); }

c10::IValue MappedCall::result(size_t i, c10::IValue value) const {
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
