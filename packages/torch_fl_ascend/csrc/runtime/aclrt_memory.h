// Device and pinned-host allocations: every one goes through this runtime, which records it
// (start, size, device) for pointer_info, the device-scoped calls and the overrun checks:
// aclrtPointerGetAttributes only exists in recent toolkits and reports no allocation bounds.
#pragma once

#include <torch_fl/runtime.h>

#include <cstddef>

namespace tfl_aclrt {

// The owning NPU of a device pointer (anywhere inside its allocation), or -1.
int owner_of(const void* p);
// Whether [p, p + n) lies inside one aclrtMallocHost allocation.
bool pinned_range(const void* p, size_t n);
// [p, p + n) must stay inside p's device allocation: the toolkit would fault at execution,
// after the call returned success.
tfl_status check_range(const char* what, const void* p, size_t n);

tfl_status rt_malloc(void** ptr, size_t size);
tfl_status rt_free(void* ptr);
tfl_status rt_host_malloc(void** ptr, size_t size);
tfl_status rt_host_free(void* ptr);
tfl_status rt_pointer_info(const void* ptr, tfl_pointer_kind* kind, int* device);

void forget_allocations_after_fork();

}  // namespace tfl_aclrt
