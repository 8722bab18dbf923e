// Copies and memset, validated against the allocation registry.
#pragma once

#include <torch_fl/runtime.h>

#include <cstddef>

namespace torch_fl::sim {

tfl_status sim_memcpy(void* dst, const void* src, size_t n, tfl_memcpy_kind kind);
tfl_status sim_memcpy_async(void* dst, const void* src, size_t n, tfl_memcpy_kind kind,
                            tfl_stream stream);
tfl_status sim_memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device,
                                 size_t n, tfl_stream stream);
tfl_status sim_memset_async(void* ptr, int value, size_t n, tfl_stream stream);

}  // namespace torch_fl::sim
