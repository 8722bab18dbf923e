// Which allocation a pointer belongs to, for a vendor runtime whose SDK cannot
// say (pointer_info, the device-scoped calls that need the owning device, and
// range checks need the allocation's start, size and device). Every device and
// pinned-host allocation of the runtime is recorded here.
#pragma once

#include <torch_fl/runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <utility>

namespace torch_fl::kit {

struct Allocation {
  uintptr_t start = 0;
  size_t size = 0;
  int device = -1;  // -1: pinned host memory

  // p's distance from the start.
  size_t offset(const void* p) const { return reinterpret_cast<uintptr_t>(p) - start; }
};

class AllocationRegistry {
 public:
  void add_device(void* p, size_t size, int device) {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    device_[address(p)] = {size, device};
  }
  void add_host(void* p, size_t size) {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    host_[address(p)] = size;
  }
  // Forgets the allocation starting at p (what free/host_free were given).
  void remove_device(const void* p) {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    device_.erase(address(p));
  }
  void remove_host(const void* p) {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    host_.erase(address(p));
  }

  // The device allocation containing p (anywhere inside it), if any.
  bool device_allocation(const void* p, Allocation* out) const {
    const uintptr_t a = address(p);
    std::shared_lock<std::shared_mutex> lock(mutex_);
    auto it = device_.upper_bound(a);
    if (it == device_.begin()) return false;
    --it;
    if (a >= it->first + std::max<size_t>(it->second.first, 1)) return false;
    *out = Allocation{it->first, it->second.first, it->second.second};
    return true;
  }
  // The owning device of p, or -1 when no device allocation contains it.
  int owner_of(const void* p) const {
    Allocation a;
    return device_allocation(p, &a) ? a.device : -1;
  }
  // Whether p is the start of a device allocation, which is what free takes.
  bool device_start(const void* p, Allocation* out) const {
    return device_allocation(p, out) && out->start == address(p);
  }
  // Whether [p, p + n) lies inside one pinned-host allocation (n >= 1).
  bool host_range(const void* p, size_t n) const {
    const uintptr_t a = address(p);
    std::shared_lock<std::shared_mutex> lock(mutex_);
    auto it = host_.upper_bound(a);
    if (it == host_.begin()) return false;
    --it;
    const uintptr_t end = it->first + it->second;
    return a < end && a + std::max<size_t>(n, 1) <= end;
  }
  // Whether p is the start of a pinned-host allocation, which is what host_free takes.
  bool host_start(const void* p) const {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    return host_.count(address(p)) != 0;
  }

  // The table's pointer_info over the recorded allocations.
  void pointer_info(const void* p, tfl_pointer_kind* kind, int* device) const {
    const int owner = owner_of(p);
    if (owner >= 0) {
      *kind = TFL_POINTER_DEVICE;
      *device = owner;
    } else if (p != nullptr && host_range(p, 1)) {
      *kind = TFL_POINTER_HOST;
      *device = -1;
    } else {
      *kind = TFL_POINTER_UNKNOWN;
      *device = -1;
    }
  }

 private:
  static uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

  mutable std::shared_mutex mutex_;
  std::map<uintptr_t, std::pair<size_t, int>> device_;  // start -> (size, device)
  std::map<uintptr_t, size_t> host_;                    // start -> size
};

}  // namespace torch_fl::kit
