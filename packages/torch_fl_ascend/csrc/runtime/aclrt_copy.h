// Copies and memset. The NPU owning the pointer that decides runs the copy (H2D: dst; D2H, D2D,
// memset: src/ptr). Copies between NPUs need peer access enabled in both directions, then an
// ACL_MEMCPY_DEVICE_TO_DEVICE copy issued with the source NPU current on a source-NPU stream.
// aclrtMemcpyAsync with host memory needs aclrtMallocHost memory: pageable host memory is copied
// synchronously after the stream's earlier work instead, as CUDA does for pageable H2D.
#pragma once

#include <torch_fl/runtime.h>

#include <cstddef>

namespace tfl_aclrt {

tfl_status rt_memcpy(void* dst, const void* src, size_t n, tfl_memcpy_kind kind);
tfl_status rt_memcpy_async(void* dst, const void* src, size_t n, tfl_memcpy_kind kind,
                           tfl_stream stream);
tfl_status rt_memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device,
                                size_t n, tfl_stream stream);
tfl_status rt_memset_async(void* ptr, int value, size_t n, tfl_stream stream);

void forget_peer_access_after_fork();

}  // namespace tfl_aclrt
