// Device memory shared between processes (runtime ABI v1.1): a sim device
// allocation is a memfd, so another process of the same machine maps the same
// pages through /proc/<pid>/fd/<fd>.
#pragma once

#include <torch_fl/runtime.h>

#include <cstddef>

namespace torch_fl::sim {

tfl_status sim_ipc_get_handle(const void* ptr, tfl_ipc_handle* handle, size_t* offset,
                              size_t* size);
tfl_status sim_ipc_open_handle(const tfl_ipc_handle* handle, void** ptr, size_t* size, int* device);
tfl_status sim_ipc_close_handle(void* ptr);

}  // namespace torch_fl::sim
