#include "boxing/list_versions.h"

#include <algorithm>
#include <memory>

namespace torch_fl::boxing {
namespace {

using Entries = std::vector<WrittenListVersions::Entry>;

// The thread's spare buffers (one per nesting level in use so far).
thread_local std::vector<std::unique_ptr<Entries>>* t_spare = nullptr;
struct SpareOwner {
  ~SpareOwner() {
    delete t_spare;
    t_spare = nullptr;
  }
};

Entries* take() {
  if (t_spare == nullptr) {
    static thread_local SpareOwner owner;
    (void)owner;
    t_spare = new std::vector<std::unique_ptr<Entries>>();
  }
  if (t_spare->empty()) return new Entries();
  Entries* e = t_spare->back().release();
  t_spare->pop_back();
  return e;
}

void give_back(Entries* e) {
  e->clear();
  if (t_spare != nullptr) {
    t_spare->emplace_back(e);
  } else {
    delete e;  // the thread is ending
  }
}

}  // namespace

WrittenListVersions::~WrittenListVersions() {
  if (entries_ != nullptr) give_back(entries_);
}

void WrittenListVersions::watch(const at::Tensor& original, const at::Tensor& alias) {
  if (!original.defined() || !alias.defined() || original.is_same(alias)) return;
  c10::TensorImpl* a = alias.unsafeGetTensorImpl();
  if (a->is_inference()) return;  // no counter to read (an alias made in inference mode)
  if (entries_ == nullptr) entries_ = take();
  entries_->push_back(
      Entry{original.unsafeGetTensorImpl(), a, a->version_counter().current_version()});
}

void WrittenListVersions::watch(at::TensorList originals, at::TensorList aliases, bool distinct) {
  // Aliases of two lists may coincide (the same list passed twice), so only one
  // list known distinct skips the duplicate check.
  distinct_ = distinct_ && distinct && lists_ == 0;
  ++lists_;
  for (size_t i = 0; i < originals.size() && i < aliases.size(); ++i)
    watch(originals[i], aliases[i]);
}

void WrittenListVersions::apply() {
  if (entries_ == nullptr) return;
  Entries& entries = *entries_;
  if (!distinct_) {
    // Stable: the first original of an alias takes its bumps.
    std::stable_sort(entries.begin(), entries.end(),
                     [](const Entry& x, const Entry& y) { return x.alias < y.alias; });
  }
  const c10::TensorImpl* previous = nullptr;
  for (const Entry& e : entries) {
    if (!distinct_ && e.alias == previous) continue;
    previous = e.alias;
    const uint32_t bumps = e.alias->version_counter().current_version() - e.version;
    for (uint32_t k = 0; k < bumps; ++k) e.original->bump_version();
  }
  entries.clear();
}

}  // namespace torch_fl::boxing
