// Virtual devices: count, the per-thread current device, names.
#include "sim_device.h"

#include <cstdio>

#include "sim_config.h"
#include "sim_entry.h"
#include "sim_errors.h"
#include "sim_graph.h"
#include "sim_stream.h"

namespace torch_fl::sim {
namespace {

// Like cudaSetDevice: the current device is a property of the calling thread.
thread_local int t_current_device = 0;

}  // namespace

int current_device() noexcept { return t_current_device; }

tfl_status check_device(const char* fn, int device) {
  const int count = config().device_count;
  if (device < 0 || device >= count) {
    return set_error(TFL_ERROR_INVALID_DEVICE,
                     "%s: invalid device %d: the sim runtime has %d device(s) (FLAGOS_SIM_DEVICES)",
                     fn, device, count);
  }
  return TFL_OK;
}

tfl_status checked_current_device(const char* fn, int* device) {
  const tfl_status st = check_device(fn, t_current_device);
  if (st == TFL_OK) *device = t_current_device;
  return st;
}

tfl_status sim_device_count(int* count) {
  return entry(Call::device_count, [&] {
    if (count == nullptr)
      return set_error(TFL_ERROR_INVALID_VALUE, "tfl_device_count: count is NULL");
    *count = config().device_count;
    return TFL_OK;
  });
}

tfl_status sim_get_device(int* device) {
  return entry(Call::get_device, [&] {
    if (device == nullptr)
      return set_error(TFL_ERROR_INVALID_VALUE, "tfl_get_device: device is NULL");
    return checked_current_device("tfl_get_device", device);
  });
}

tfl_status sim_set_device(int device) {
  return entry(Call::set_device, [&] {
    const tfl_status st = check_device("tfl_set_device", device);
    if (st == TFL_OK) t_current_device = device;
    return st;
  });
}

tfl_status sim_device_synchronize() {
  return entry(Call::device_synchronize, [&] {
    int device;
    tfl_status st = checked_current_device("tfl_device_synchronize", &device);
    if (st != TFL_OK) return st;
    if ((st = check_device_wait("tfl_device_synchronize", device)) != TFL_OK) return st;
    synchronize_device_streams(device);
    return TFL_OK;
  });
}

tfl_status sim_device_name(int device, char* buf, size_t len) {
  return entry(Call::device_name, [&] {
    if (buf == nullptr || len == 0) {
      return set_error(TFL_ERROR_INVALID_VALUE, "tfl_device_name: buffer is NULL or empty");
    }
    const tfl_status st = check_device("tfl_device_name", device);
    if (st != TFL_OK) return st;
    // Truncated to fit, always NUL-terminated (like cudaDeviceProp::name).
    std::snprintf(buf, len, "flagos sim device %d", device);
    return TFL_OK;
  });
}

tfl_status sim_probe(int* count, char* msg, size_t len) {
  // probe writes its out-parameters on failure too (runtime.h).
  if (count != nullptr) *count = 0;
  if (msg != nullptr && len > 0) msg[0] = '\0';
  const tfl_status st = entry(Call::probe, [&] {
    if (count == nullptr) return set_error(TFL_ERROR_INVALID_VALUE, "tfl_probe: count is NULL");
    *count = config().device_count;
    if (*count == 0 && msg != nullptr && len > 0)
      std::snprintf(msg, len, "the sim runtime has no devices (FLAGOS_SIM_DEVICES=0)");
    return TFL_OK;
  });
  if (st != TFL_OK && msg != nullptr && len > 0) std::snprintf(msg, len, "%s", last_error());
  return st;
}

}  // namespace torch_fl::sim
