// Pinned memory on the delegate runtime: the mirrored backend's (CUDA's
// cudaHostAlloc pool), so flagos pinned tensors are what its async copies
// expect; streams are translated on the way in.
#pragma once

#include <ATen/core/CachingHostAllocator.h>
#include <c10/core/DeviceType.h>

namespace torch_fl::mirror {

// The host allocator forwarding to `type`'s (process lifetime).
at::HostAllocator* mirror_host_allocator(c10::DeviceType type);

}  // namespace torch_fl::mirror
