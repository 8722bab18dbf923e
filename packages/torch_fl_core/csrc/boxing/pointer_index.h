// A pointer -> index table for one long call (a cat or a foreach over a
// model's parameters), without heap work per call in steady state.
//
// Why: std::unordered_map allocates a node per entry; a foreach over 150
// tensors made 900 allocations and frees per call in the call mapper alone.
// This table is open-addressed, cleared in O(1) by a generation stamp, and
// taken from a per-thread stack (a Python kernel may route a nested call
// while an outer call holds its table), so its memory is reused call after call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace torch_fl::boxing {

// The slot hash of the open-addressed tables of boxing (this one and the
// alias pool's long-call table): a pointer mixed with a tag.
inline size_t pointer_hash(const void* p, uint64_t tag) {
  uint64_t h = reinterpret_cast<uintptr_t>(p) ^ (tag * 0x9e3779b97f4a7c15ULL);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ULL;
  return static_cast<size_t>(h ^ (h >> 29));
}

class PointerIndex {
 public:
  // The value stored for (key, tag), or -1.
  int64_t find(const void* key, uint32_t tag) const {
    if (slots_.empty()) return -1;
    const size_t mask = slots_.size() - 1;
    for (size_t i = hash(key, tag) & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.gen != gen_) return -1;
      if (s.key == key && s.tag == tag) return s.value;
    }
  }
  // Stores value for (key, tag) unless the pair is present (the first one wins).
  void insert(const void* key, uint32_t tag, uint32_t value) {
    if ((live_ + 1) * 2 > slots_.size()) grow();
    const size_t mask = slots_.size() - 1;
    for (size_t i = hash(key, tag) & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (s.gen != gen_) {
        s = Slot{key, tag, gen_, value};
        ++live_;
        return;
      }
      if (s.key == key && s.tag == tag) return;
    }
  }
  void clear() {
    live_ = 0;
    if (++gen_ == 0) {  // the stamp wrapped: old slots could look live again
      for (Slot& s : slots_) s.gen = 0;
      gen_ = 1;
    }
  }

  // A cleared table of the calling thread's stack; give it back with release().
  static PointerIndex* acquire();
  static void release(PointerIndex* index);

 private:
  struct Slot {
    const void* key = nullptr;
    uint32_t tag = 0;
    uint32_t gen = 0;  // live when equal to gen_
    uint32_t value = 0;
  };
  static size_t hash(const void* key, uint32_t tag) {
    return pointer_hash(key, uint64_t{tag} << 61);
  }
  void grow();

  std::vector<Slot> slots_;
  size_t live_ = 0;
  uint32_t gen_ = 1;
};

}  // namespace torch_fl::boxing
