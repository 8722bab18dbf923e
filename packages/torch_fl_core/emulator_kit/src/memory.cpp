#include "emu_kit/memory.h"

namespace emu_kit {

AllocRef AllocationMap::at(const void* p) const {
  auto it = by_base_.find(reinterpret_cast<uintptr_t>(p));
  return it == by_base_.end() ? nullptr : it->second;
}

AllocRef AllocationMap::remove(const void* p) {
  auto it = by_base_.find(reinterpret_cast<uintptr_t>(p));
  if (it == by_base_.end()) return nullptr;
  AllocRef a = std::move(it->second);
  by_base_.erase(it);
  return a;
}

AllocRef AllocationMap::containing(const void* p) const {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = by_base_.upper_bound(a);
  if (it == by_base_.begin()) return nullptr;
  --it;
  return a < it->second->end() ? it->second : nullptr;
}

AllocRef AllocationMap::range(const void* p, size_t n) const {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = by_base_.upper_bound(a);
  if (it == by_base_.begin()) return nullptr;
  --it;
  const AllocRef& r = it->second;
  if (a > r->end() || n > r->end() - a) return nullptr;
  return r;
}

char* AllocationMap::resolve(int device, const void* p, size_t n) const {
  if (p == nullptr) return nullptr;
  AllocRef a = range(p, n);
  return a && a->device == device ? a->host_at(p) : nullptr;
}

size_t env_size(const char* name, size_t dflt) {
  const char* v = std::getenv(name);
  if (!v || !*v || *v == '-') return dflt;  // strtoull would wrap a negative around
  char* end = nullptr;
  const unsigned long long x = std::strtoull(v, &end, 10);
  return (end && *end == '\0') ? static_cast<size_t>(x) : dflt;
}

}  // namespace emu_kit
