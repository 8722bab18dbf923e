// Device and pinned-host allocations, their owner registry and capacity.
//
// Sim "device memory" is ordinary host memory (TFL_CAP_HOST_ADDRESSABLE_MEMORY)
// but every allocation is owned by one device, so misuse that would fault on
// real hardware (a pointer used on the wrong card, a host pointer passed as
// device memory, a copy running off the end) fails loudly here too.
#include "sim_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "sim_config.h"
#include "sim_control.h"
#include "sim_device.h"
#include "sim_entry.h"
#include "sim_errors.h"
#include "sim_graph.h"

namespace torch_fl::sim {
namespace {

struct Usage {
  uint64_t allocations = 0;
  uint64_t bytes = 0;
};

struct Registry {
  std::mutex mutex;
  // Keyed by base address, so the owner of an interior pointer is the last
  // allocation starting at or below it.
  std::map<uintptr_t, AllocationInfo> allocations;
  std::vector<Usage> devices;
  Usage host;
};

// Leaked on purpose: frees from other libraries' static destructors at
// process exit must still find it.
Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry();
    reg->devices.resize(static_cast<size_t>(config().device_count));
    return reg;
  }();
  return *r;
}

Usage& usage_of(Registry& reg, int device) {
  return device < 0 ? reg.host : reg.devices[static_cast<size_t>(device)];
}

AllocationInfo find_locked(Registry& reg, uintptr_t p) {
  auto it = reg.allocations.upper_bound(p);
  if (it == reg.allocations.begin()) return {};
  --it;
  if (p - it->second.base >= it->second.size) return {};
  return it->second;
}

void* aligned_block(size_t size) {
  // aligned_alloc wants a size that is a multiple of the alignment.
  if (size > SIZE_MAX - kAllocationAlignment) return nullptr;
  const size_t rounded =
      (size + kAllocationAlignment - 1) / kAllocationAlignment * kAllocationAlignment;
  return std::aligned_alloc(kAllocationAlignment, rounded);
}

std::atomic<uint64_t> g_next_serial{1};

// Device memory in a memfd, shared-mapped, so ipc_get_handle can hand it to
// another process. Where no memfd can be made (descriptors exhausted, no
// memfd_create), an ordinary private block: usable, just not shareable.
void* device_block(size_t size, int* fd, uint64_t* serial) {
  *serial = g_next_serial.fetch_add(1, std::memory_order_relaxed);
  char name[48];
  std::snprintf(name, sizeof(name), "tfl-sim-%llu", static_cast<unsigned long long>(*serial));
  const int f = memfd_create(name, MFD_CLOEXEC);
  if (f >= 0) {
    const size_t mapped = mapped_size(size);
    void* p = ftruncate(f, static_cast<off_t>(mapped)) == 0
                  ? mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0)
                  : MAP_FAILED;
    if (p != MAP_FAILED) {
      *fd = f;
      return p;
    }
    close(f);
  }
  *fd = -1;
  return aligned_block(size);
}

void release_block(const AllocationInfo& info) {
  void* p = reinterpret_cast<void*>(info.base);
  if (info.fd >= 0) {
    munmap(p, mapped_size(info.size));
    close(info.fd);
  } else {
    std::free(p);
  }
}

// Shared by malloc (device >= 0, capacity-limited) and host_malloc (device -1).
tfl_status allocate(const char* fn, void** ptr, size_t size, int device, tfl_pointer_kind kind) {
  if (ptr == nullptr) return set_error(TFL_ERROR_INVALID_VALUE, "%s: ptr is NULL", fn);
  if (size == 0) {
    *ptr = nullptr;
    return TFL_OK;
  }
  Registry& reg = registry();
  {
    // Reserve the bytes first so two threads cannot both fit in the last gap.
    std::lock_guard<std::mutex> lock(reg.mutex);
    if (device >= 0) {
      const size_t capacity = config().capacity;
      const uint64_t live = reg.devices[static_cast<size_t>(device)].bytes;
      if (size > capacity - live) {
        return set_error(TFL_ERROR_OUT_OF_MEMORY,
                         "%s: out of memory on flagos sim device %d: tried to allocate %zu bytes, "
                         "%llu bytes free of %zu bytes total (FLAGOS_SIM_MEMORY)",
                         fn, device, size, static_cast<unsigned long long>(capacity - live),
                         capacity);
      }
    }
    usage_of(reg, device).bytes += size;
  }
  int fd = -1;
  uint64_t serial = 0;
  void* block = kind == TFL_POINTER_DEVICE ? device_block(size, &fd, &serial) : aligned_block(size);
  std::lock_guard<std::mutex> lock(reg.mutex);
  Usage& usage = usage_of(reg, device);
  if (block == nullptr) {
    usage.bytes -= size;
    return set_error(TFL_ERROR_OUT_OF_MEMORY, "%s: the host could not provide %zu bytes for %s", fn,
                     size, device >= 0 ? "sim device memory" : "pinned host memory");
  }
  const uintptr_t base = reinterpret_cast<uintptr_t>(block);
  reg.allocations.emplace(base, AllocationInfo{base, size, device, kind, fd, serial, false});
  usage.allocations += 1;
  *ptr = block;
  return TFL_OK;
}

tfl_status release(const char* fn, void* ptr, tfl_pointer_kind want) {
  if (ptr == nullptr) return TFL_OK;  // like free(NULL) and cudaFree(nullptr)
  Registry& reg = registry();
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  AllocationInfo found;
  {
    std::lock_guard<std::mutex> lock(reg.mutex);
    found = find_locked(reg, p);
    if (found.kind == TFL_POINTER_UNKNOWN) {
      return set_error(TFL_ERROR_INVALID_POINTER,
                       "%s: %p was not allocated by the sim runtime (or was already freed)", fn,
                       ptr);
    }
    if (found.kind != want) {
      return set_error(TFL_ERROR_INVALID_POINTER, "%s: %p is %s; free it with %s", fn, ptr,
                       found.kind == TFL_POINTER_DEVICE ? "device memory" : "pinned host memory",
                       found.kind == TFL_POINTER_DEVICE ? "tfl_free" : "tfl_host_free");
    }
    if (found.imported) {
      return set_error(TFL_ERROR_INVALID_POINTER,
                       "%s: %p was mapped from another process by ipc_open_handle; release it "
                       "with ipc_close_handle",
                       fn, ptr);
    }
    if (found.base != p) {
      return set_error(
          TFL_ERROR_INVALID_POINTER,
          "%s: %p points %zu bytes into the allocation at %p; free takes the allocation's start",
          fn, ptr, static_cast<size_t>(p - found.base), reinterpret_cast<void*>(found.base));
    }
    reg.allocations.erase(p);
    Usage& usage = usage_of(reg, found.device);
    usage.allocations -= 1;
    usage.bytes -= found.size;
  }
  release_block(found);
  return TFL_OK;
}

}  // namespace

size_t mapped_size(size_t size) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (size + page - 1) / page * page;
}

AllocationInfo find_allocation(const void* ptr) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  return find_locked(reg, reinterpret_cast<uintptr_t>(ptr));
}

AllocationInfo find_allocation_by_serial(uint64_t serial) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  for (const auto& [base, info] : reg.allocations) {
    if (info.serial == serial && !info.imported && info.kind == TFL_POINTER_DEVICE) return info;
  }
  return {};
}

void register_imported(const AllocationInfo& info) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  reg.allocations.emplace(info.base, info);
}

void unregister_imported(uintptr_t base) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  reg.allocations.erase(base);
}

tfl_status sim_malloc(void** ptr, size_t size) {
  return entry(Call::malloc, [&] {
    int device;
    const tfl_status st = checked_current_device("tfl_malloc", &device);
    if (st != TFL_OK) return st;
    return allocate("tfl_malloc", ptr, size, device, TFL_POINTER_DEVICE);
  });
}

tfl_status sim_free(void* ptr) {
  return entry(Call::free, [&] { return release("tfl_free", ptr, TFL_POINTER_DEVICE); });
}

tfl_status sim_host_malloc(void** ptr, size_t size) {
  return entry(Call::host_malloc, [&] {
    // Pinning may synchronize the device in a real SDK (cudaMallocHost): a
    // capture forbids it, malloc and free it allows.
    const tfl_status st = check_unsafe_call("tfl_host_malloc", -1);
    if (st != TFL_OK) return st;
    return allocate("tfl_host_malloc", ptr, size, -1, TFL_POINTER_HOST);
  });
}

tfl_status sim_host_free(void* ptr) {
  return entry(Call::host_free, [&] { return release("tfl_host_free", ptr, TFL_POINTER_HOST); });
}

tfl_status sim_pointer_info(const void* ptr, tfl_pointer_kind* kind, int* device) {
  return entry(Call::pointer_info, [&] {
    if (kind == nullptr || device == nullptr) {
      return set_error(TFL_ERROR_INVALID_VALUE, "tfl_pointer_info: kind or device is NULL");
    }
    const AllocationInfo found = find_allocation(ptr);
    *kind = found.kind;
    *device = found.device;
    return TFL_OK;
  });
}

tfl_status sim_mem_get_info(size_t* free_bytes, size_t* total_bytes) {
  return entry(Call::mem_get_info, [&] {
    if (free_bytes == nullptr || total_bytes == nullptr) {
      return set_error(TFL_ERROR_INVALID_VALUE,
                       "tfl_mem_get_info: free_bytes or total_bytes is NULL");
    }
    int device;
    const tfl_status st = checked_current_device("tfl_mem_get_info", &device);
    if (st != TFL_OK) return st;
    Registry& reg = registry();
    std::lock_guard<std::mutex> lock(reg.mutex);
    const size_t capacity = config().capacity;
    *free_bytes = capacity - static_cast<size_t>(reg.devices[static_cast<size_t>(device)].bytes);
    *total_bytes = capacity;
    return TFL_OK;
  });
}

}  // namespace torch_fl::sim

// ---- exported test-only control API (sim_control.h) ------------------------

using namespace torch_fl::sim;

namespace {

// Usage of `device` (-1: pinned host), or nothing for a bad index.
bool read_usage(int device, Usage* out) {
  if (ensure_initialized() != TFL_OK) return false;
  if (device < -1 || device >= config().device_count) return false;
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  *out = usage_of(reg, device);
  return true;
}

}  // namespace

extern "C" TFL_SIM_EXPORT uint64_t tfl_sim_live_allocations(int device) {
  Usage usage;
  return read_usage(device, &usage) ? usage.allocations : 0;
}

extern "C" TFL_SIM_EXPORT uint64_t tfl_sim_live_bytes(int device) {
  Usage usage;
  return read_usage(device, &usage) ? usage.bytes : 0;
}
