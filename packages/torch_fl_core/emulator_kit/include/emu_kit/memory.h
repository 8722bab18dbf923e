// Device-scoped memory: each allocation belongs to one emulated device (or is pinned host memory)
// and a pointer resolves only against its own device, the way a kernel of that device sees it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>

namespace emu_kit {

struct Allocation {
  int device = -1;       // -1: pinned host memory
  uintptr_t base = 0;    // the address the SDK handed out
  size_t bytes = 0;      // as asked for
  size_t accounted = 0;  // what it takes from its device's capacity
  // The host memory behind it (std::malloc'd, owned): `base` itself where the emulator hands out
  // host addresses, elsewhere a separate block.
  char* host = nullptr;
  // Queued work items that name it: freeing it meanwhile is a contract violation, and it stays
  // backed until they are done (they then fail instead of touching recycled memory).
  std::atomic<int> pending{0};
  std::atomic<bool> freed{false};

  Allocation() = default;
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;
  ~Allocation() { std::free(host); }

  uintptr_t end() const { return base + bytes; }
  char* host_at(const void* p) const { return host + (reinterpret_cast<uintptr_t>(p) - base); }
  // Marks it freed; the number of queued work items still naming it.
  int retire() {
    freed.store(true);
    return pending.load();
  }
};
using AllocRef = std::shared_ptr<Allocation>;

// The live allocations by start address. Not locked: its owner's lock guards it.
class AllocationMap {
 public:
  void add(AllocRef a) { by_base_[a->base] = std::move(a); }
  // The allocation starting exactly at p (nullptr: none).
  AllocRef at(const void* p) const;
  // The allocation starting exactly at p, taken out of the map (nullptr: none).
  AllocRef remove(const void* p);
  // The allocation whose block contains p (nullptr: none).
  AllocRef containing(const void* p) const;
  // The allocation that wholly contains [p, p + n); an empty range may sit at its end.
  AllocRef range(const void* p, size_t n) const;
  // The host memory behind [p, p + n) when that range lies in one allocation of `device`;
  // nullptr otherwise: device pointers are device-scoped.
  char* resolve(int device, const void* p, size_t n) const;
  size_t size() const { return by_base_.size(); }

 private:
  std::map<uintptr_t, AllocRef> by_base_;
};

// Capacity accounting of one emulated device.
struct DeviceMemory {
  size_t capacity = 0;
  size_t used = 0;
  uint64_t live = 0;  // allocations

  size_t available() const { return capacity - used; }
  bool reserve(size_t n) {
    if (n > capacity - used) return false;
    used += n;
    ++live;
    return true;
  }
  void release(size_t n) {
    used -= n;
    --live;
  }
};

// An unsigned count from the environment (dflt when unset, empty, negative or not a number).
size_t env_size(const char* name, size_t dflt);

}  // namespace emu_kit
