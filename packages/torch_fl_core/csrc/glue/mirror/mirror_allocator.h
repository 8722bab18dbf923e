// The flagos device allocator in mirror mode (delegate runtime): every flagos
// allocation comes from the mirrored backend's caching allocator (torch's CUDA
// caching allocator for "delegate:cuda"), so flagos tensors and the outputs of
// boxed CUDA kernels share one pool per device, and memory stats, empty_cache
// and recordStream are that allocator's.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Storage.h>

namespace torch_fl {

// A device allocator over `type`'s caching allocator (process lifetime;
// installed once by install_mirror_mode).
c10::DeviceAllocator* mirror_allocator(c10::DeviceType type);

// Turns `storage` (a mirrored-backend storage nothing else holds, e.g. a boxed
// kernel's fresh CUDA output) into flagos storage in place when its memory is
// owned by address; false (nothing changed) otherwise.
bool retype_mirror_storage(const c10::Storage& storage, c10::DeviceIndex device);

// A flagos-typed DataPtr over the memory of `storage` (a mirrored-backend
// storage, e.g. a boxed kernel's CUDA output), keeping it alive: the zero-copy
// way a shared result joins flagos.
c10::DataPtr adopt_mirror_storage(const c10::Storage& storage, c10::DeviceIndex device);

}  // namespace torch_fl
