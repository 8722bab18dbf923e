// Device and pinned-host allocations, their owner registry and capacity.
#pragma once

#include <torch_fl/runtime.h>

#include <cstddef>
#include <cstdint>

namespace torch_fl::sim {

// Allocations are this aligned, so any dtype and vectorized host kernels
// running on sim device memory see well-aligned tensors.
constexpr size_t kAllocationAlignment = 512;

// The allocation a pointer lies in; kind TFL_POINTER_UNKNOWN when none.
struct AllocationInfo {
  uintptr_t base = 0;
  size_t size = 0;
  int device = -1;  // -1 for pinned host memory
  tfl_pointer_kind kind = TFL_POINTER_UNKNOWN;
  // Device allocations live in a memfd so another process can map them
  // (sim_ipc): its descriptor, -1 where none could be made (the allocation is
  // then private), and a process-unique serial naming it.
  int fd = -1;
  uint64_t serial = 0;
  // Mapped from another process's allocation by ipc_open_handle: owned by
  // sim_ipc, never by tfl_free, and not counted in this process's usage.
  bool imported = false;

  // [ptr, ptr + n) lies inside this allocation.
  bool contains(const void* ptr, size_t n) const noexcept {
    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    return p >= base && p - base <= size && n <= size - (p - base);
  }
};

AllocationInfo find_allocation(const void* ptr);
// The bytes a memfd-backed allocation of `size` maps (whole pages).
size_t mapped_size(size_t size);
// The live device allocation of this process with `serial`, if any.
AllocationInfo find_allocation_by_serial(uint64_t serial);
// Registers / unregisters a mapping ipc_open_handle made (imported = true).
void register_imported(const AllocationInfo& info);
void unregister_imported(uintptr_t base);

tfl_status sim_malloc(void** ptr, size_t size);
tfl_status sim_free(void* ptr);
tfl_status sim_host_malloc(void** ptr, size_t size);
tfl_status sim_host_free(void* ptr);
tfl_status sim_pointer_info(const void* ptr, tfl_pointer_kind* kind, int* device);
tfl_status sim_mem_get_info(size_t* free_bytes, size_t* total_bytes);

}  // namespace torch_fl::sim
