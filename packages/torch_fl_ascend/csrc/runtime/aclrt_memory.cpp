#include "aclrt_memory.h"

#include <torch_fl/kit/runtime_allocations.h>

#include <string>

#include "aclrt_device.h"
#include "aclrt_errors.h"
#include "aclrt_fork.h"

namespace tfl_aclrt {

namespace {

torch_fl::kit::AllocationRegistry g_allocations;

}  // namespace

int owner_of(const void* p) { return g_allocations.owner_of(p); }

bool pinned_range(const void* p, size_t n) { return g_allocations.host_range(p, n); }

tfl_status check_range(const char* what, const void* p, size_t n) {
  torch_fl::kit::Allocation a;
  if (!g_allocations.device_allocation(p, &a)) return TFL_OK;
  const size_t off = a.offset(p);
  if (off + n > a.size) {
    return fail(TFL_ERROR_INVALID_VALUE,
                std::string(what) + " " + pointer_text(p) + ": " + std::to_string(n) +
                    " bytes at offset " + std::to_string(off) + " overrun its allocation of " +
                    std::to_string(a.size) + " bytes on Ascend NPU " + std::to_string(a.device));
  }
  return TFL_OK;
}

tfl_status rt_malloc(void** ptr, size_t size) {
  if (!ptr) return fail(TFL_ERROR_INVALID_VALUE, "malloc: NULL out-parameter");
  if (size == 0) {
    *ptr = nullptr;
    return TFL_OK;
  }
  READY();
  CURRENT(device);
  void* p = nullptr;
  ACL_CHECK(device, aclrtMalloc(&p, size, ACL_MEM_MALLOC_HUGE_FIRST),
            std::to_string(size) + " bytes");
  g_allocations.add_device(p, size, device);
  *ptr = p;
  return TFL_OK;
}

tfl_status rt_free(void* ptr) {
  if (!ptr) return TFL_OK;
  READY();
  torch_fl::kit::Allocation a;
  if (!g_allocations.device_start(ptr, &a)) {
    return fail(TFL_ERROR_INVALID_POINTER,
                "free of " + pointer_text(ptr) +
                    (a.device >= 0 ? ", inside an allocation of Ascend NPU " +
                                         std::to_string(a.device) + " but not its start"
                                   : ", which no Ascend NPU allocated here"));
  }
  {
    ENTER_DEVICE(a.device);  // device-scoped: freed with its owner current
    ACL_CHECK(a.device, aclrtFree(ptr));
  }
  g_allocations.remove_device(ptr);
  return TFL_OK;
}

tfl_status rt_host_malloc(void** ptr, size_t size) {
  if (!ptr) return fail(TFL_ERROR_INVALID_VALUE, "host_malloc: NULL out-parameter");
  if (size == 0) {
    *ptr = nullptr;
    return TFL_OK;
  }
  READY();
  CURRENT(device);  // aclrtMallocHost needs a context
  void* p = nullptr;
  ACL_CHECK(device, aclrtMallocHost(&p, size), std::to_string(size) + " bytes of pinned memory");
  g_allocations.add_host(p, size);
  *ptr = p;
  return TFL_OK;
}

tfl_status rt_host_free(void* ptr) {
  if (!ptr) return TFL_OK;
  READY();
  if (!g_allocations.host_start(ptr)) {
    return fail(TFL_ERROR_INVALID_POINTER,
                "host_free of " + pointer_text(ptr) + ", which host_malloc did not return");
  }
  CURRENT(device);
  ACL_CHECK(device, aclrtFreeHost(ptr));
  g_allocations.remove_host(ptr);
  return TFL_OK;
}

tfl_status rt_pointer_info(const void* ptr, tfl_pointer_kind* kind, int* device) {
  if (!kind || !device) return fail(TFL_ERROR_INVALID_VALUE, "pointer_info: NULL out-parameter");
  g_allocations.pointer_info(ptr, kind, device);
  return TFL_OK;
}

void forget_allocations_after_fork() { remake(g_allocations); }

}  // namespace tfl_aclrt
