#include "boxing/pointer_index.h"

#include <memory>

namespace torch_fl::boxing {

void PointerIndex::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
  const size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.gen != gen_) continue;
    size_t i = hash(s.key, s.tag) & mask;
    while (slots_[i].gen == gen_) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

namespace {
// Tables not in use on this thread; a call takes one and gives it back cleared.
thread_local std::vector<std::unique_ptr<PointerIndex>> t_free;
}  // namespace

PointerIndex* PointerIndex::acquire() {
  if (t_free.empty()) return new PointerIndex();
  PointerIndex* index = t_free.back().release();
  t_free.pop_back();
  return index;
}

void PointerIndex::release(PointerIndex* index) {
  index->clear();
  t_free.emplace_back(index);
}

}  // namespace torch_fl::boxing
