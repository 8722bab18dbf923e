// Virtual devices: count, the per-thread current device, names.
#pragma once

#include <torch_fl/runtime.h>

#include <cstddef>

namespace torch_fl::sim {

// The calling thread's current device (default 0), unchecked.
int current_device() noexcept;
// INVALID_DEVICE with a message naming `fn` unless 0 <= device < count.
tfl_status check_device(const char* fn, int device);
// The current device, checked (fails when there are no devices).
tfl_status checked_current_device(const char* fn, int* device);

tfl_status sim_device_count(int* count);
tfl_status sim_get_device(int* device);
tfl_status sim_set_device(int device);
tfl_status sim_device_synchronize();
tfl_status sim_device_name(int device, char* buf, size_t len);
// v1.2: the device count, with the reason when there is none.
tfl_status sim_probe(int* count, char* msg, size_t len);

}  // namespace torch_fl::sim
