#include "boxing/list_aliases.h"

#include <c10/core/TensorImpl.h>

#include <array>
#include <memory>

#include "boxing/alias_view.h"

namespace torch_fl::boxing {
namespace {

// At most this many sets and aliases per thread: a model's optimizer lists
// (parameters, gradients, two or three states) and a few more. Beyond that
// the least recently used set not in use goes.
constexpr size_t kMaxSets = 16;
constexpr size_t kMaxAliases = 16384;
// Lists seen once, by their memory: a list that comes back gets a set.
constexpr size_t kCandidates = 32;

void* list_data(const at::Tensor& t) {
  // mutable_data: a copy-on-write storage is materialised before a kernel may
  // write it, as for every other alias.
  return t.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl()->mutable_data();
}

// Everything a set is built for besides its memory.
uint64_t set_kind(at::TensorList l, c10::Device target, c10::DispatchKey key) {
  return static_cast<uint64_t>(static_cast<uint8_t>(target.type())) |
         static_cast<uint64_t>(static_cast<uint8_t>(target.index())) << 8 |
         static_cast<uint64_t>(static_cast<uint16_t>(key)) << 16 |
         static_cast<uint64_t>(static_cast<uint8_t>(l[0].device().index())) << 32 |
         static_cast<uint64_t>(l.size()) << 40;
}

// Whether a list tensor can be one of a set: a defined dense flagos tensor
// with memory.
bool eligible(const at::Tensor& t, c10::DeviceIndex device) {
  if (!t.defined() || !t.device().is_privateuseone() || t.device().index() != device) {
    return false;
  }
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  return impl->has_storage() && impl->layout() == c10::kStrided &&
         impl->unsafe_storage().data() != nullptr;
}

struct Candidate {
  uint64_t kind = 0;
  const void* first = nullptr;
  const void* last = nullptr;
  uint64_t used = 0;
};

}  // namespace

struct ListAliasTable {
  std::vector<std::unique_ptr<ListAliases>> sets;
  size_t aliases = 0;
  std::array<Candidate, kCandidates> candidates{};
  uint64_t tick = 0;
  ListAliases::Stats stats;

  ListAliases* find(uint64_t kind, const void* first, const void* last) {
    for (auto& s : sets) {
      if (s->kind_ == kind && s->data_.front() == first && s->data_.back() == last) {
        return s.get();
      }
    }
    return nullptr;
  }
  void keep(std::unique_ptr<ListAliases> set);
};

namespace {
// On the heap, one plain pointer in TLS (as the alias pool); the owner frees
// the table when the thread ends.
thread_local ListAliasTable* t_table = nullptr;
struct TableOwner {
  ~TableOwner() {
    delete t_table;
    t_table = nullptr;
  }
};
ListAliasTable& table() {
  ListAliasTable* t = t_table;
  if (C10_UNLIKELY(t == nullptr)) {
    static thread_local TableOwner owner;
    (void)owner;
    t = t_table = new ListAliasTable();
  }
  return *t;
}
}  // namespace

void ListAliasTable::keep(std::unique_ptr<ListAliases> set) {
  const size_t n = set->aliases_.size();
  if (n > kMaxAliases) return;
  while (sets.size() >= kMaxSets || aliases + n > kMaxAliases) {
    // The least recently used set no call holds goes.
    auto victim = sets.end();
    for (auto it = sets.begin(); it != sets.end(); ++it) {
      if (!(*it)->in_use_ && (victim == sets.end() || (*it)->used_ < (*victim)->used_)) {
        victim = it;
      }
    }
    if (victim == sets.end()) return;
    aliases -= (*victim)->aliases_.size();
    sets.erase(victim);
  }
  aliases += n;
  sets.push_back(std::move(set));
}

ListAliases::ListAliases(uint64_t kind, at::TensorList l, c10::Device target, c10::DispatchKey key)
    : kind_(kind) {
  data_.reserve(l.size());
  nbytes_.reserve(l.size());
  aliases_.reserve(l.size());
  for (const at::Tensor& t : l) {
    void* data = list_data(t);
    const size_t nbytes = t.unsafeGetTensorImpl()->unsafe_storage().nbytes();
    data_.push_back(data);
    nbytes_.push_back(nbytes);
    aliases_.push_back(build_alias(t, c10::DataPtr(data, target), target, key));
    data_index_.insert(data, 0, static_cast<uint32_t>(data_.size() - 1));
  }
}

bool ListAliases::matches(at::TensorList l, c10::Device target) {
  // Checked and re-pointed tensor by tensor: when a later tensor differs, the
  // aliases re-pointed before it are still free and only ever ours.
  const size_t n = l.size();
  const c10::DeviceIndex device = l[0].device().index();
  for (size_t i = 0; i < n; ++i) {
    const at::Tensor& t = l[i];
    const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
    // A flagos tensor of the set's device over the same memory.
    if (!t.defined() || impl->device_type() != c10::DeviceType::PrivateUse1 ||
        impl->device().index() != device || !impl->has_storage() ||
        impl->layout() != c10::kStrided) {
      return false;
    }
    c10::StorageImpl* storage = impl->unsafe_storage().unsafeGetStorageImpl();
    if (storage->data() != data_[i] || storage->nbytes() != nbytes_[i]) return false;
    const at::Tensor& alias = aliases_[i];
    if (alias.dtype() != t.dtype() || !alias_is_free(alias)) return false;
    // mutable_data: a copy-on-write storage is materialised first, as for
    // every alias a kernel may write through.
    rebind_alias(alias, t, storage->mutable_data(), nbytes_[i], target);
  }
  return true;
}

ListAliases* ListAliases::find(at::TensorList l, c10::Device target, c10::DispatchKey key,
                               Found& found) {
  found = Found::kNone;
  ListAliasTable& tab = table();
  if (tab.sets.empty() || !l.front().defined() ||
      !eligible(l.front(), l.front().device().index()) ||
      !eligible(l.back(), l.front().device().index())) {
    return nullptr;
  }
  ListAliases* set =
      tab.find(set_kind(l, target, key), l.front().storage().data(), l.back().storage().data());
  if (set == nullptr) return nullptr;
  if (set->in_use_) {
    found = Found::kInUse;
    return set;
  }
  if (!set->matches(l, target)) return nullptr;
  found = Found::kFound;
  return set;
}

void ListAliases::hold() {
  ListAliasTable& tab = table();
  in_use_ = true;
  used_ = ++tab.tick;
  ++tab.stats.served;
}

void ListAliases::note(at::TensorList l, c10::Device target, c10::DispatchKey key) {
  ListAliasTable& tab = table();
  if (!l.front().defined()) return;
  const c10::DeviceIndex device = l.front().device().index();
  if (!eligible(l.front(), device) || !eligible(l.back(), device)) return;
  const uint64_t kind = set_kind(l, target, key);
  const void* first = l.front().storage().data();
  const void* last = l.back().storage().data();
  const uint64_t now = ++tab.tick;
  Candidate* slot = &tab.candidates[0];
  for (Candidate& c : tab.candidates) {
    if (c.kind == kind && c.first == first && c.last == last) {
      c = Candidate{};
      // Seen before: keep a set if every tensor can be one, over memory of its own.
      PointerIndex seen;
      for (size_t i = 0; i < l.size(); ++i) {
        if (!eligible(l[i], device)) return;
        const void* data = l[i].storage().data();
        if (seen.find(data, 0) >= 0) return;
        seen.insert(data, 0, static_cast<uint32_t>(i));
      }
      ListAliases* old = tab.find(kind, first, last);
      if (old != nullptr && old->in_use_) return;
      if (old != nullptr) {
        // The same memory with other sizes or dtypes: replaced.
        for (auto it = tab.sets.begin(); it != tab.sets.end(); ++it) {
          if (it->get() == old) {
            tab.aliases -= old->aliases_.size();
            tab.sets.erase(it);
            break;
          }
        }
      }
      auto set = std::make_unique<ListAliases>(kind, l, target, key);
      set->used_ = now;
      ++tab.stats.built;
      tab.keep(std::move(set));
      return;
    }
    if (c.used < slot->used) slot = &c;
  }
  *slot = Candidate{kind, first, last, now};
}

void ListAliases::missed() { ++table().stats.missed; }

ListAliases::Stats ListAliases::stats() { return table().stats; }

}  // namespace torch_fl::boxing
