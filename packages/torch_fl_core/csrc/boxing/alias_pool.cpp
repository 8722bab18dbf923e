#include "boxing/alias_pool.h"

#include <c10/core/TensorImpl.h>

#include <array>
#include <vector>

#include "boxing/alias_view.h"
#include "boxing/pointer_index.h"

namespace torch_fl::boxing {
namespace {

// A pool, not a cache keyed by memory: a decoder's token passes about 400
// distinct weights and activations, and an alias kept per memory block is cold
// again by the time its block comes back (on the H200 host the routed call then
// paid cache misses for the cache's set, the alias's TensorImpl and its
// StorageImpl, all of which the kernel reads again). The short per-kind lists
// below, re-pointed call after call, stay in the first-level cache. An alias
// that already views the operand's memory with its geometry (a loop over the
// same tensors) is taken without writing to it.
struct AliasSlot {
  at::Tensor alias;
  const void* data = nullptr;  // the memory it was last pointed at
  size_t nbytes = 0;
  uint64_t used = 0;  // AliasPool::tick at its last use
};
// Aliases of one kind (alias_kind(): dtype, target device, dispatch key,
// flagos device). A call scans only its operand's kind, so a long list of one
// kind (a decode loop's final cat of 64 int64 tokens) costs nothing to the
// others, and each list stays as short as the most aliases of its kind one
// ordinary call holds at once. Longer calls (a cat or a foreach over many
// tensors) build the rest for the call.
constexpr size_t kSlotsPerKind = 12;
constexpr size_t kMaxKinds = 8;
struct KindPool {
  uint64_t kind = 0;
  uint64_t used = 0;  // AliasPool::tick at its last use (the least recent goes first)
  std::vector<AliasSlot> slots;
};

// The aliases of long calls, found by (memory, size, kind): open addressing
// with linear probing and no deletion, so a lookup stops at the first empty
// slot. It grows to kMaxLongSlots (at most half full), then starts over empty
// (dropping the pool's references is safe, as for the kinds above).
struct LongSlot {
  uint64_t kind = 0;
  AliasSlot slot;  // keyed by slot.data and slot.nbytes; slot.alias undefined: empty
};
constexpr size_t kMaxLongSlots = size_t{1} << 14;
struct LongTable {
  std::vector<LongSlot> slots;
  size_t live = 0;

  static size_t hash(const void* data, uint64_t kind) { return pointer_hash(data, kind); }
  // A free alias viewing (data, nbytes, kind), or the empty slot to build one
  // in (nullptr: no room without growing).
  LongSlot* find(const void* data, size_t nbytes, uint64_t kind, bool& found);
  void make_room();
};
struct AliasPool {
  std::array<KindPool, kMaxKinds> kinds;
  size_t nkinds = 0;
  LongTable long_calls;
  AliasPoolStats stats;
  uint64_t tick = 0;
  // The last alias built beyond a full kind's slots, held until the next one
  // (pooled_alias returns references; the caller copies what it keeps).
  at::Tensor overflow;

  KindPool& of(uint64_t kind, uint64_t now) {
    for (size_t i = 0; i < nkinds; ++i) {
      if (kinds[i].kind == kind) {
        kinds[i].used = now;
        return kinds[i];
      }
    }
    KindPool* k = nullptr;
    if (nkinds < kMaxKinds) {
      k = &kinds[nkinds++];
      k->slots.reserve(kSlotsPerKind);
    } else {
      // A ninth kind replaces the least recently used one. Dropping the pool's
      // references is safe: an alias a call still holds lives on with it.
      k = &kinds[0];
      for (KindPool& c : kinds) {
        if (c.used < k->used) k = &c;
      }
      k->slots.clear();
    }
    k->kind = kind;
    k->used = now;
    return *k;
  }
};
// On the heap, one pointer in TLS: a large thread_local object in this module
// made sim's routed-call overhead read higher. A plain pointer (constant-
// initialised, so reading it needs no TLS init call); the owner below frees
// the pool when the thread ends.
thread_local AliasPool* t_alias_pool = nullptr;
struct AliasPoolOwner {
  ~AliasPoolOwner() {
    delete t_alias_pool;
    t_alias_pool = nullptr;
  }
};

AliasPool& alias_pool() {
  AliasPool* pool = t_alias_pool;
  if (C10_UNLIKELY(pool == nullptr)) {
    static thread_local AliasPoolOwner owner;
    (void)owner;
    pool = t_alias_pool = new AliasPool();
  }
  return *pool;
}

// Everything an alias is built with besides its memory and geometry; the
// flagos device picks the grow allocator of its storage.
uint64_t alias_kind(const at::Tensor& t, c10::Device device, c10::DispatchKey key) {
  return static_cast<uint64_t>(static_cast<uint8_t>(t.scalar_type())) |
         static_cast<uint64_t>(static_cast<uint8_t>(device.type())) << 8 |
         static_cast<uint64_t>(static_cast<uint8_t>(device.index())) << 16 |
         static_cast<uint64_t>(static_cast<uint16_t>(key)) << 24 |
         static_cast<uint64_t>(static_cast<uint8_t>(t.device().index())) << 40;
}

// Points a free pooled alias at t's memory and geometry.
const at::Tensor& repoint(AliasSlot& slot, const at::Tensor& t, void* data, size_t nbytes,
                          c10::Device device) {
  rebind_alias(slot.alias, t, data, nbytes, device);
  slot.data = data;
  slot.nbytes = nbytes;
  return slot.alias;
}

LongSlot* LongTable::find(const void* data, size_t nbytes, uint64_t kind, bool& found) {
  found = false;
  if (slots.empty()) return nullptr;
  const size_t mask = slots.size() - 1;
  for (size_t i = hash(data, kind) & mask;; i = (i + 1) & mask) {
    LongSlot& s = slots[i];
    if (!s.slot.alias.defined()) return &s;
    // The same memory held twice at once (two storages over one block) takes
    // another slot further on.
    if (s.slot.data == data && s.slot.nbytes == nbytes && s.kind == kind &&
        alias_is_free(s.slot.alias)) {
      found = true;
      return &s;
    }
  }
}

void LongTable::make_room() {
  if (slots.size() >= kMaxLongSlots) {
    slots.assign(slots.size(), LongSlot{});
    live = 0;
    return;
  }
  std::vector<LongSlot> old = std::move(slots);
  slots.assign(old.empty() ? 256 : old.size() * 2, LongSlot{});
  const size_t mask = slots.size() - 1;
  for (LongSlot& s : old) {
    if (!s.slot.alias.defined()) continue;
    size_t i = hash(s.slot.data, s.kind) & mask;
    while (slots[i].slot.alias.defined()) i = (i + 1) & mask;
    slots[i] = std::move(s);
  }
}

const at::Tensor& long_call_alias(AliasPool& pool, const at::Tensor& t, void* data, size_t nbytes,
                                  uint64_t kind, c10::Device device, c10::DispatchKey key) {
  LongTable& table = pool.long_calls;
  bool found = false;
  LongSlot* s = table.find(data, nbytes, kind, found);
  if (found) {
    ++pool.stats.hits;
    return repoint(s->slot, t, data, nbytes, device);
  }
  if (s == nullptr || (table.live + 1) * 2 > table.slots.size()) {
    table.make_room();
    s = table.find(data, nbytes, kind, found);
  }
  ++pool.stats.builds;
  *s = LongSlot{kind, AliasSlot{build_alias(t, c10::DataPtr(data, device), device, key), data,
                                nbytes, pool.tick}};
  ++table.live;
  return s->slot.alias;
}

}  // namespace

const at::Tensor& pooled_alias(const at::Tensor& t, c10::Device device, c10::DispatchKey key,
                               bool long_call) {
  const c10::Storage& base = t.storage();
  void* data = base.mutable_data();
  const size_t nbytes = base.nbytes();
  AliasPool& pool = alias_pool();
  const uint64_t tick = ++pool.tick;
  const uint64_t kind = alias_kind(t, device, key);
  if (long_call) return long_call_alias(pool, t, data, nbytes, kind, device, key);
  KindPool& kp = pool.of(kind, tick);
  // The slot data alone finds an alias already viewing this memory, else the
  // least recently used one. Only the pick is checked for being free: the
  // aliases this call already holds are the most recently used, so the least
  // recently used one almost always is.
  AliasSlot* oldest = nullptr;
  for (AliasSlot& slot : kp.slots) {
    if (slot.data == data && slot.nbytes == nbytes && alias_is_free(slot.alias)) {
      ++pool.stats.hits;
      slot.used = tick;
      return repoint(slot, t, data, nbytes, device);
    }
    if (oldest == nullptr || slot.used < oldest->used) oldest = &slot;
  }
  if (oldest != nullptr && !alias_is_free(oldest->alias)) {
    oldest = nullptr;
    for (AliasSlot& slot : kp.slots) {
      if (alias_is_free(slot.alias) && (oldest == nullptr || slot.used < oldest->used))
        oldest = &slot;
    }
  }
  if (oldest != nullptr) {
    ++pool.stats.rebinds;
    oldest->used = tick;
    return repoint(*oldest, t, data, nbytes, device);
  }
  ++pool.stats.builds;
  // Non-owning: the caller's flagos tensor keeps the memory alive for the
  // call, and a result that aliases it is re-wrapped over the flagos storage.
  at::Tensor alias = build_alias(t, c10::DataPtr(data, device), device, key);
  if (kp.slots.size() < kSlotsPerKind) {
    kp.slots.push_back(AliasSlot{std::move(alias), data, nbytes, tick});
    return kp.slots.back().alias;
  }
  // Every slot of this kind is held by the call: this alias goes with it.
  pool.overflow = std::move(alias);
  return pool.overflow;
}

AliasPoolStats alias_pool_stats() { return alias_pool().stats; }

}  // namespace torch_fl::boxing
