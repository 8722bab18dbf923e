// Device memory (aclrtMalloc) and pinned host memory (aclrtMallocHost).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "acl_capture.h"
#include "acl_state.h"

using namespace acl_emu;

namespace {
constexpr size_t kAlign = 512;  // aclrtMalloc's address alignment
constexpr size_t kPoisonBytes = size_t{64} << 20;
}  // namespace

extern "C" {

aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy) {
  ACL_ENTER("aclrtMalloc");
  ACL_NEED_DEVICE("aclrtMalloc", dev);
  if (!devPtr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: devPtr is NULL");
  if (size == 0) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: size is 0");
  unsigned base_policy = static_cast<unsigned>(policy) & 0xFFu;
  unsigned band = static_cast<unsigned>(policy) & ~0xFFu;
  if (base_policy > ACL_MEM_MALLOC_NORMAL_ONLY_P2P ||
      (band != 0 && band != ACL_MEM_TYPE_LOW_BAND_WIDTH && band != ACL_MEM_TYPE_HIGH_BAND_WIDTH))
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: policy %d is not an aclrtMemMallocPolicy",
                static_cast<int>(policy));
  const size_t accounted = (size + kAlign - 1) / kAlign * kAlign;
  State& s = S();
  {
    std::lock_guard<std::mutex> lk(s.mu);
    emu_kit::DeviceMemory& m = s.devices[static_cast<size_t>(dev)].memory;
    if (!m.reserve(accounted))
      return fail(ACL_ERROR_RT_MEMORY_ALLOCATION,
                  "aclrtMalloc: out of memory on device %d: %zu bytes asked, %zu of %zu free", dev,
                  size, m.available(), m.capacity);
  }
  void* p = nullptr;
  if (posix_memalign(&p, kAlign, accounted) != 0) {
    std::lock_guard<std::mutex> lk(s.mu);
    s.devices[static_cast<size_t>(dev)].memory.release(accounted);
    return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtMalloc: host backing of %zu bytes failed",
                size);
  }
  // Fresh device memory is not zero on hardware: poison it so readers of unwritten memory see
  // garbage rather than a lucky 0. Capped, so that a large reservation (a caching allocator's
  // segment) does not commit all of its host pages up front.
  std::memset(p, 0xA5, std::min(accounted, kPoisonBytes));
  auto a = std::make_shared<emu_kit::Allocation>();
  a->device = dev;
  a->host = static_cast<char*>(p);
  a->base = reinterpret_cast<uintptr_t>(p);
  a->bytes = size;
  a->accounted = accounted;
  std::lock_guard<std::mutex> lk(s.mu);
  s.allocs.add(a);
  *devPtr = p;
  return ACL_SUCCESS;
}

aclError aclrtFree(void* devPtr) {
  ACL_ENTER("aclrtFree");
  ACL_NEED_DEVICE("aclrtFree", dev);
  if (!devPtr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtFree: devPtr is NULL");
  State& s = S();
  AllocRef a;
  int pending;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    a = s.allocs.at(devPtr);
    if (!a) {
      AllocRef inner = s.allocs.containing(devPtr);
      if (inner)
        return fail(ACL_ERROR_INVALID_PARAM,
                    "aclrtFree: %p is inside the allocation at %p (device %d), not its start",
                    devPtr, reinterpret_cast<void*>(inner->base), inner->device);
      return fail(ACL_ERROR_INVALID_PARAM,
                  "aclrtFree: %p is not a live device allocation (double free or host memory)",
                  devPtr);
    }
    if (a->device != dev)
      return fail(ACL_ERROR_INVALID_PARAM,
                  "aclrtFree: %p belongs to device %d but device %d is current", devPtr, a->device,
                  dev);
    s.allocs.remove(devPtr);
    s.devices[static_cast<size_t>(dev)].memory.release(a->accounted);
    pending = a->retire();
  }
  if (pending > 0) {
    char buf[512];
    snprintf(buf, sizeof buf,
             "aclrtFree(%p) on device %d while %d queued work item(s) still use it: the memory "
             "must outlive the work (record an event / synchronize the stream first)",
             devPtr, dev, pending);
    s.ledger.violation(buf);
  }
  return ACL_SUCCESS;
}

aclError aclrtMallocHost(void** hostPtr, size_t size) {
  ACL_ENTER("aclrtMallocHost");
  ACL_NEED_DEVICE("aclrtMallocHost", dev);  // pinned memory is mapped through a device context
  (void)dev;
  // Pinning may synchronize the device (CUDA's rule for cudaMallocHost while capturing).
  if (aclError e = check_unsafe_call("aclrtMallocHost", -1)) return e;
  if (!hostPtr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: hostPtr is NULL");
  if (size == 0) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: size is 0");
  void* p = nullptr;
  if (posix_memalign(&p, 64, size) != 0)
    return fail(ACL_ERROR_BAD_ALLOC, "aclrtMallocHost: %zu bytes failed", size);
  auto a = std::make_shared<emu_kit::Allocation>();
  a->host = static_cast<char*>(p);
  a->base = reinterpret_cast<uintptr_t>(p);
  a->bytes = a->accounted = size;
  std::lock_guard<std::mutex> lk(S().mu);
  S().host_allocs.add(a);
  *hostPtr = p;
  return ACL_SUCCESS;
}

aclError aclrtFreeHost(void* hostPtr) {
  ACL_ENTER("aclrtFreeHost");
  int pending;
  {
    std::lock_guard<std::mutex> lk(S().mu);
    AllocRef a = S().host_allocs.remove(hostPtr);
    if (!a)
      return fail(ACL_ERROR_INVALID_PARAM, "aclrtFreeHost: %p is not an aclrtMallocHost block",
                  hostPtr);
    pending = a->retire();
  }
  // The block itself goes when the last queued copy naming it is done.
  if (pending > 0) {
    char buf[512];
    snprintf(buf, sizeof buf,
             "aclrtFreeHost(%p) while %d queued asynchronous copy(ies) still use it: pinned "
             "memory must outlive the copy (record an event / synchronize the stream first)",
             hostPtr, pending);
    S().ledger.violation(buf);
  }
  return ACL_SUCCESS;
}

aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t* free, size_t* total) {
  ACL_ENTER("aclrtGetMemInfo");
  ACL_NEED_DEVICE("aclrtGetMemInfo", dev);
  if (!free || !total) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo: NULL output");
  if (attr < ACL_DDR_MEM || attr > ACL_HBM_MEM_P2P_NORMAL)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo: attr %d is not an aclrtMemAttr",
                static_cast<int>(attr));
  bool hbm = attr == ACL_HBM_MEM || attr == ACL_HBM_MEM_HUGE || attr == ACL_HBM_MEM_NORMAL ||
             attr == ACL_HBM_MEM_P2P_HUGE || attr == ACL_HBM_MEM_P2P_NORMAL;
  std::lock_guard<std::mutex> lk(S().mu);
  const emu_kit::DeviceMemory& m = S().devices[static_cast<size_t>(dev)].memory;
  // The emulated NPU (a 910B) has HBM only.
  *total = hbm ? m.capacity : 0;
  *free = hbm ? m.available() : 0;
  return ACL_SUCCESS;
}

}  // extern "C"
