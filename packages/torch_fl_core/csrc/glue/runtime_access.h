// The active runtime table and the one way core reports its failures.
#pragma once

#include <c10/core/Device.h>
#include <c10/util/Exception.h>
#include <torch_fl/runtime.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace c10::impl {
struct DeviceGuardImplInterface;
}

namespace torch_fl {

// Loads a runtime shared library (dlopen + tfl_runtime_get) and makes it the
// active runtime. Only one runtime may be active per process; activating the
// same library twice is a no-op, a different one is an error.
//
// `spec` is either the path of such a library or "delegate:<device type>"
// (e.g. "delegate:cuda"): the delegate runtime, which mirrors an in-process
// torch backend through c10's device-generic interfaces (runtime/delegate).
void activate_runtime_library(const std::string& spec);
bool runtime_active() noexcept;
// The active table; throws a clear error when no vendor runtime was activated.
const tfl_runtime_v1& runtime();
// True in a forked child of a process that had used the runtime: every
// runtime call raises there (as CUDA's calls do in such a child).
bool in_bad_fork() noexcept;
// Raises the forked-subprocess error in such a child (calls into the mirrored
// backend check it: they never pass through the runtime table).
void check_not_in_bad_fork();
std::string runtime_name();
bool has_capability(uint64_t cap) noexcept;

// A function field of the runtime table (runtime.h's TFL_RUNTIME_V1_FUNCTIONS),
// and whether the active runtime has it (its struct_size covers it, not NULL).
struct RuntimeField {
  const char* name;
  unsigned minor;  // the v1.x that added it
  size_t offset;
  size_t size;
  bool present;
};
std::vector<RuntimeField> runtime_fields();
uint32_t runtime_struct_size() noexcept;  // 0 when no runtime is active
// The active table without counting as a use of the runtime (a fork after
// only this leaves the child free to use flagos); nullptr when none is active.
const tfl_runtime_v1* runtime_table_if_active() noexcept;
// Whether the runtime shares device memory between processes (its ipc_*
// functions: glue/ipc_sharing).
bool runtime_shares_memory();

// The device type the delegate runtime mirrors (CUDA for "delegate:cuda"), or
// nullopt for a library runtime. In mirror mode flagos streams, events, memory,
// pinned memory and generators ARE the mirrored backend's (glue forwards to
// it), so every producer on a device shares one stream order and one pool.
std::optional<c10::DeviceType> mirror_device_type() noexcept;
// The mirrored backend's guard implementation (nullptr outside mirror mode).
const c10::impl::DeviceGuardImplInterface* mirror_guard() noexcept;
// Mirror mode: initialises the mirrored backend once (its allocator and
// driver; torch.cuda does this lazily too). Called before first use, never at
// import: a process that imports torch and forks must not have touched CUDA.
void ensure_mirror_initialized();
inline c10::Device mirror_device(c10::DeviceIndex index) {
  return c10::Device(*mirror_device_type(), index);
}

// Device count that never throws (0 when no runtime is active or it fails):
// DeviceGuardImpl::deviceCount and hooks' isAvailable must not throw.
c10::DeviceIndex device_count_noexcept() noexcept;
c10::DeviceIndex device_count();  // throws on runtime failure
void check_device_index(c10::DeviceIndex index);
// What sets this process's device count ("FLAGOS_SIM_DEVICES (at most 64, ...)"),
// for check_device_index's error; from the vendor's device_count_setting().
void set_device_count_setting(std::string text);

// Throws c10::Error (or c10::OutOfMemoryError for TFL_ERROR_OUT_OF_MEMORY)
// naming the runtime call, the device, the runtime name and its status text.
[[noreturn]] void throw_runtime_error(tfl_status status, const char* call, c10::DeviceIndex device);

// RAII: make `device` current on this thread for the scope (runtime calls act
// on the current device), restoring the previous one after.
class CurrentDeviceScope {
 public:
  explicit CurrentDeviceScope(c10::DeviceIndex device);
  ~CurrentDeviceScope();
  CurrentDeviceScope(const CurrentDeviceScope&) = delete;
  CurrentDeviceScope& operator=(const CurrentDeviceScope&) = delete;

 private:
  int prev_ = -1;
  bool changed_ = false;
};

c10::DeviceIndex current_device();

}  // namespace torch_fl

// TFL_CALL(device, fn, args...): call runtime().fn(args...) and throw on failure.
#define TFL_CALL(device, fn, ...)                                     \
  do {                                                                \
    const tfl_status _tfl_st = ::torch_fl::runtime().fn(__VA_ARGS__); \
    if (C10_UNLIKELY(_tfl_st != TFL_OK)) {                            \
      ::torch_fl::throw_runtime_error(_tfl_st, #fn, (device));        \
    }                                                                 \
  } while (0)
