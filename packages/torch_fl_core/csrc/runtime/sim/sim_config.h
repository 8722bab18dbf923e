// The sim runtime's configuration, read once from the environment.
//
//   FLAGOS_SIM_DEVICES  number of virtual devices (default 2)
//   FLAGOS_SIM_MEMORY   capacity per device in bytes, "17179869184", "512M",
//                       "4G", "4GiB" (binary suffixes K/M/G/T; default 16G)
//   FLAGOS_SIM_FAULTS   "malloc:3,memcpy_async:1[:STATUS]" (sim_faults.h)
#pragma once

#include <torch_fl/runtime.h>

#include <cstddef>

namespace torch_fl::sim {

struct Config {
  int device_count = 2;
  size_t capacity = size_t{16} << 30;
};

constexpr int kMaxDevices = 64;

// Reads the environment on the first call (any thread); later calls return
// the same result. Every table function calls it, so init() is optional.
tfl_status ensure_initialized() noexcept;
// Why initialization failed ("" when it did not).
const char* init_error() noexcept;
// Valid once ensure_initialized() returned TFL_OK.
const Config& config() noexcept;

// "512M" -> 536870912. False on garbage or overflow.
bool parse_bytes(const char* text, size_t* out) noexcept;

}  // namespace torch_fl::sim
