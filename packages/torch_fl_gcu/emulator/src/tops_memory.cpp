// Device memory in each card's unmapped address range, and pinned host memory.
#include <cstdlib>

#include "tops_state.h"

using namespace tops_emu;

EMU_API topsError_t topsMalloc(void** ptr, size_t size) {
  ENTER("topsMalloc");
  if (!ptr) return fail(topsErrorInvalidValue);
  if (!valid_card(t_device)) return fail(topsErrorNoDevice);
  if (size == 0) {
    *ptr = nullptr;
    return topsSuccess;
  }
  Card& c = S().cards[static_cast<size_t>(t_device)];
  if (size > c.memory.available()) return fail(topsErrorOutOfMemory);
  char* host = static_cast<char*>(std::malloc(size));
  if (!host) return fail(topsErrorOutOfMemory);
  c.memory.reserve(size);
  auto a = std::make_shared<emu_kit::Allocation>();
  a->device = t_device;
  a->base = c.next;
  a->bytes = a->accounted = size;
  a->host = host;
  c.next += (size + 511) & ~static_cast<uintptr_t>(511);
  S().allocs.add(a);
  *ptr = reinterpret_cast<void*>(a->base);
  return topsSuccess;
}

EMU_API topsError_t topsFree(void* ptr) {
  ENTER("topsFree");
  if (!ptr) return topsSuccess;
  if (!valid_card(t_device)) return fail(topsErrorNoDevice);
  emu_kit::AllocRef a = S().allocs.at(ptr);
  // Another card's pointer does not resolve while this card is current.
  if (!a || a->device != t_device) return fail(topsErrorInvalidDevicePointer);
  S().allocs.remove(ptr);
  S().cards[static_cast<size_t>(t_device)].memory.release(a->accounted);
  return topsSuccess;
}

EMU_API topsError_t topsHostMalloc(void** ptr, size_t size, unsigned int flags) {
  ENTER("topsHostMalloc");
  if (!ptr) return fail(topsErrorInvalidValue);
  if (size == 0) {
    *ptr = nullptr;
    return topsSuccess;
  }
  void* p = std::malloc(size);
  if (!p) return fail(topsErrorOutOfMemory);
  auto a = std::make_shared<emu_kit::Allocation>();
  a->host = static_cast<char*>(p);
  a->base = reinterpret_cast<uintptr_t>(p);
  a->bytes = a->accounted = size;
  S().host_allocs.add(a);
  *ptr = p;
  return topsSuccess;
}

EMU_API topsError_t topsHostFree(void* ptr) {
  ENTER("topsHostFree");
  if (!ptr) return topsSuccess;
  if (!S().host_allocs.remove(ptr)) return fail(topsErrorInvalidValue);
  return topsSuccess;
}

EMU_API topsError_t topsPointerGetAttributes(topsPointerAttribute_t* attr, const void* ptr) {
  ENTER("topsPointerGetAttributes");
  if (!attr || !ptr) return fail(topsErrorInvalidValue);
  if (resolve_on(t_device, ptr, 1)) {
    attr->memoryType = topsMemoryTypeDevice;
    attr->device = t_device;
    attr->device_pointer = const_cast<void*>(ptr);
    attr->host_pointer = nullptr;
    attr->isManaged = 0;
    attr->allocationFlags = 0;
    return topsSuccess;
  }
  if (S().host_allocs.at(ptr)) {
    attr->memoryType = topsMemoryTypeHost;
    attr->device = -1;
    attr->device_pointer = nullptr;
    attr->host_pointer = const_cast<void*>(ptr);
    attr->isManaged = 0;
    attr->allocationFlags = 0;
    return topsSuccess;
  }
  // Device-scoped: another card's pointer is unknown while this card is current.
  return fail(topsErrorInvalidValue);
}
