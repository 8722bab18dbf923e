// Device memory shared between processes: handles name a memfd by the
// exporting process's pid, descriptor and the allocation's serial; opening one
// maps the same pages here, so writes on either side are seen by the other.
//
// The contract a real runtime's IPC has, enforced: only device allocations
// export; a handle opens only while its exporter holds the allocation (an
// exporter that freed it or exited is an error, never another allocation's
// bytes); a mapping outlives the exporter's free; one handle opened twice is
// one mapping with a count; a mapping is released by ipc_close_handle only.
#include "sim_ipc.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "sim_config.h"
#include "sim_device.h"
#include "sim_entry.h"
#include "sim_errors.h"
#include "sim_memory.h"

namespace torch_fl::sim {
namespace {

constexpr char kMagic[8] = {'T', 'F', 'L', 'S', 'I', 'M', '1', '\0'};

// What a handle's bytes hold.
struct Handle {
  char magic[8];
  int32_t pid;
  int32_t fd;
  uint64_t serial;
  uint64_t size;
  int32_t device;
};
static_assert(sizeof(Handle) <= TFL_IPC_HANDLE_SIZE, "the sim handle must fit tfl_ipc_handle");

// One mapping per (exporter pid, serial) in this process, counted.
struct Mapping {
  uintptr_t base = 0;
  size_t size = 0;
  int device = -1;
  int opens = 0;
  bool own = false;  // the exporter is this process: the allocation itself, not a new mapping
};

struct Mappings {
  std::mutex mutex;
  std::map<std::pair<int32_t, uint64_t>, Mapping> by_key;
  std::map<uintptr_t, std::pair<int32_t, uint64_t>> key_of_base;
};

Mappings& mappings() {
  static Mappings* m = new Mappings();  // leaked: closes may run from static destructors
  return *m;
}

// Whether /proc/<pid>/fd/<fd> is still the memfd of allocation `serial`: a
// descriptor number is reused once the exporter closes it.
bool names_allocation(int32_t pid, int32_t fd, uint64_t serial) {
  char path[64], target[256];
  std::snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
  const ssize_t n = readlink(path, target, sizeof(target) - 1);
  if (n <= 0) return false;
  target[n] = '\0';
  char want[64];
  std::snprintf(want, sizeof(want), "/memfd:tfl-sim-%llu ",
                static_cast<unsigned long long>(serial));
  return std::strncmp(target, want, std::strlen(want)) == 0;
}

tfl_status gone(const Handle& h) {
  return set_error(TFL_ERROR_INVALID_HANDLE,
                   "tfl_ipc_open_handle: process %d no longer holds the exported allocation "
                   "(%llu bytes on flagos sim device %d): it freed it or exited. The sender must "
                   "keep the tensor alive until the receiver has it",
                   h.pid, static_cast<unsigned long long>(h.size), h.device);
}

}  // namespace

tfl_status sim_ipc_get_handle(const void* ptr, tfl_ipc_handle* handle, size_t* offset,
                              size_t* size) {
  return entry(Call::ipc_get_handle, [&] {
    if (handle == nullptr || offset == nullptr || size == nullptr) {
      return set_error(TFL_ERROR_INVALID_VALUE,
                       "tfl_ipc_get_handle: handle, offset or size is NULL");
    }
    const AllocationInfo found = find_allocation(ptr);
    if (found.kind != TFL_POINTER_DEVICE) {
      return set_error(TFL_ERROR_INVALID_POINTER,
                       "tfl_ipc_get_handle: %p is not sim device memory (%s)", ptr,
                       found.kind == TFL_POINTER_HOST ? "pinned host memory" : "unknown pointer");
    }
    Handle h{};
    std::memcpy(h.magic, kMagic, sizeof(kMagic));
    h.size = found.size;
    h.device = found.device;
    if (found.imported) {
      // Re-exported: the original exporter's handle, so every process maps
      // one allocation (and it stays valid while that exporter holds it).
      Mappings& m = mappings();
      std::lock_guard<std::mutex> lock(m.mutex);
      const auto key = m.key_of_base.at(found.base);
      h.pid = key.first;
      h.serial = key.second;
      h.fd = static_cast<int32_t>(found.fd);
    } else {
      if (found.fd < 0) {
        return set_error(TFL_ERROR_NOT_SUPPORTED,
                         "tfl_ipc_get_handle: the allocation at %p is private (no memfd could be "
                         "made for it when it was allocated)",
                         reinterpret_cast<void*>(found.base));
      }
      h.pid = static_cast<int32_t>(getpid());
      h.fd = found.fd;
      h.serial = found.serial;
    }
    std::memset(handle->bytes, 0, sizeof(handle->bytes));
    std::memcpy(handle->bytes, &h, sizeof(h));
    *offset = reinterpret_cast<uintptr_t>(ptr) - found.base;
    *size = found.size;
    return TFL_OK;
  });
}

tfl_status sim_ipc_open_handle(const tfl_ipc_handle* handle, void** ptr, size_t* size,
                               int* device) {
  return entry(Call::ipc_open_handle, [&] {
    if (handle == nullptr || ptr == nullptr || size == nullptr || device == nullptr) {
      return set_error(TFL_ERROR_INVALID_VALUE,
                       "tfl_ipc_open_handle: handle, ptr, size or device is NULL");
    }
    Handle h;
    std::memcpy(&h, handle->bytes, sizeof(h));
    if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0 || h.size == 0) {
      return set_error(TFL_ERROR_INVALID_HANDLE,
                       "tfl_ipc_open_handle: not a handle of the sim runtime");
    }
    if (h.device < 0 || h.device >= config().device_count) {
      return set_error(TFL_ERROR_INVALID_DEVICE,
                       "tfl_ipc_open_handle: the allocation lives on sim device %d, and this "
                       "process has %d (FLAGOS_SIM_DEVICES)",
                       h.device, config().device_count);
    }
    Mappings& m = mappings();
    std::lock_guard<std::mutex> lock(m.mutex);
    const auto key = std::make_pair(h.pid, h.serial);
    auto it = m.by_key.find(key);
    if (it == m.by_key.end()) {
      Mapping mapping;
      mapping.size = h.size;
      mapping.device = h.device;
      if (h.pid == static_cast<int32_t>(getpid())) {
        const AllocationInfo own = find_allocation_by_serial(h.serial);
        if (own.kind != TFL_POINTER_DEVICE) return gone(h);
        mapping.base = own.base;
        mapping.own = true;
      } else {
        if (!names_allocation(h.pid, h.fd, h.serial)) return gone(h);
        char path[64];
        std::snprintf(path, sizeof(path), "/proc/%d/fd/%d", h.pid, h.fd);
        const int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0) {
          if (errno == ENOENT) return gone(h);
          return set_error(TFL_ERROR_DEVICE, "tfl_ipc_open_handle: cannot open %s: %s", path,
                           std::strerror(errno));
        }
        void* p = mmap(nullptr, mapped_size(h.size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        const int map_errno = errno;
        close(fd);  // the mapping keeps the pages
        if (p == MAP_FAILED) {
          return set_error(TFL_ERROR_OUT_OF_MEMORY, "tfl_ipc_open_handle: mmap of %llu bytes: %s",
                           static_cast<unsigned long long>(h.size), std::strerror(map_errno));
        }
        mapping.base = reinterpret_cast<uintptr_t>(p);
        AllocationInfo info;
        info.base = mapping.base;
        info.size = h.size;
        info.device = h.device;
        info.kind = TFL_POINTER_DEVICE;
        info.fd = h.fd;
        info.serial = h.serial;
        info.imported = true;
        register_imported(info);
      }
      it = m.by_key.emplace(key, mapping).first;
      m.key_of_base.emplace(mapping.base, key);
    }
    it->second.opens += 1;
    *ptr = reinterpret_cast<void*>(it->second.base);
    *size = it->second.size;
    *device = it->second.device;
    return TFL_OK;
  });
}

tfl_status sim_ipc_close_handle(void* ptr) {
  return entry(Call::ipc_close_handle, [&] {
    Mappings& m = mappings();
    std::lock_guard<std::mutex> lock(m.mutex);
    const auto kb = m.key_of_base.find(reinterpret_cast<uintptr_t>(ptr));
    if (kb == m.key_of_base.end()) {
      return set_error(TFL_ERROR_INVALID_POINTER,
                       "tfl_ipc_close_handle: %p is not a pointer ipc_open_handle gave (or it "
                       "was closed as often as it was opened)",
                       ptr);
    }
    auto it = m.by_key.find(kb->second);
    if (--it->second.opens == 0) {
      if (!it->second.own) {
        unregister_imported(it->second.base);
        munmap(ptr, mapped_size(it->second.size));
      }
      m.by_key.erase(it);
      m.key_of_base.erase(kb);
    }
    return TFL_OK;
  });
}

}  // namespace torch_fl::sim
