#include "glue/runtime_access.h"

#include <ATen/Context.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/CallOnce.h>
#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <cstddef>
#include <mutex>

#include "glue/mirror/mirror_mode.h"
#include "runtime/delegate/delegate_runtime.h"

namespace torch_fl {
namespace {

std::mutex g_activate_mutex;
std::atomic<const tfl_runtime_v1*> g_runtime{nullptr};
// A runtime's device count is fixed once it is initialised (as for CUDA);
// cached because every factory and guard asks for it.
std::atomic<int> g_device_count{-1};
// The delegate runtime's table, whose devices are counted on first use.
const tfl_runtime_v1* g_delegate_table = nullptr;
std::string g_runtime_path;  // guarded by g_activate_mutex
// Mirror mode (delegate runtime): written once before g_runtime is published.
std::optional<c10::DeviceType> g_mirror_type;
const c10::impl::DeviceGuardImplInterface* g_mirror_guard = nullptr;
constexpr const char* kDelegatePrefix = "delegate:";

const char* status_text(const tfl_runtime_v1* rt, tfl_status st) {
  const char* s = rt && rt->status_name ? rt->status_name(st) : nullptr;
  return s ? s : "unknown status";
}

}  // namespace

void activate_runtime_library(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_activate_mutex);
  if (g_runtime.load() != nullptr) {
    TORCH_CHECK(path == g_runtime_path, "flagos: runtime '", g_runtime.load()->name,
                "' is already active (", g_runtime_path, "); cannot switch to ", path,
                " in the same process");
    return;
  }
  if (path.rfind(kDelegatePrefix, 0) == 0) {
    const std::string type_name = path.substr(std::char_traits<char>::length(kDelegatePrefix));
    c10::DeviceType type = c10::DeviceType::CPU;
    try {
      type = c10::Device(type_name).type();
    } catch (const c10::Error&) {
      TORCH_CHECK(false, "flagos: runtime '", path, "' names an unknown device type '", type_name,
                  "'");
    }
    TORCH_CHECK(type != c10::DeviceType::CPU && type != c10::DeviceType::PrivateUse1,
                "flagos: the delegate runtime cannot mirror ", c10::DeviceTypeName(type, true));
    TORCH_CHECK(c10::impl::hasDeviceGuardImpl(type), "flagos: runtime '", path,
                "': this torch build has no ", c10::DeviceTypeName(type, true),
                " backend to mirror");
    const tfl_runtime_v1* rt = delegate::runtime_table(type);
    g_mirror_type = type;
    g_mirror_guard = c10::impl::getDeviceGuardImpl(type);
    // Devices are counted on first use, not here: counting starts the mirrored
    // driver (cudaGetDeviceCount), after which a forked child of a process
    // that only imported torch could not use the device, as it can with
    // torch's own backend (whose count at import goes through NVML).
    g_delegate_table = rt;
    g_runtime_path = path;
    // The mirrored backend's allocators and streams replace flagos's own
    // before anything can use the runtime.
    mirror::install_mirror_mode(type, g_mirror_guard);
    g_runtime.store(rt);
    return;
  }
  // RTLD_GLOBAL is not needed: core resolves only the entry point, and a
  // runtime library carries its own SDK dependencies.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  TORCH_CHECK(handle != nullptr, "flagos: cannot load runtime library ", path, ": ", dlerror());
  auto get = reinterpret_cast<tfl_runtime_get_fn>(dlsym(handle, TFL_RUNTIME_ENTRY_SYMBOL));
  TORCH_CHECK(get != nullptr, "flagos: ", path, " is not a torch-fl runtime (no symbol ",
              TFL_RUNTIME_ENTRY_SYMBOL, ")");
  const tfl_runtime_v1* rt = get(TFL_RUNTIME_ABI_VERSION);
  TORCH_CHECK(rt != nullptr, "flagos: runtime ", path, " does not speak runtime ABI v",
              TFL_RUNTIME_ABI_VERSION);
  TORCH_CHECK(
      rt->abi_version == TFL_RUNTIME_ABI_VERSION && rt->struct_size >= TFL_RUNTIME_V1_0_SIZE,
      "flagos: runtime ", path, " returned an ABI v", rt->abi_version, " table of ",
      rt->struct_size, " bytes; core needs v", TFL_RUNTIME_ABI_VERSION, " of at least ",
      TFL_RUNTIME_V1_0_SIZE, " bytes (the v1.0 table)");
  // Every v1.0 function is required; later ones are optional (TFL_RUNTIME_HAS).
#define TFL_CHECK_V1_0_FIELD(field, minor, returns_status)                                  \
  TORCH_CHECK(minor > 0 || rt->field != nullptr, "flagos: runtime ", path, " ('", rt->name, \
              "') leaves the v1.0 function ", #field, " NULL");
  TFL_RUNTIME_V1_FUNCTIONS(TFL_CHECK_V1_0_FIELD)
#undef TFL_CHECK_V1_0_FIELD
  const tfl_status st = rt->init();
  if (st != TFL_OK) {
    TORCH_CHECK(false, "flagos: runtime '", rt->name,
                "' failed to initialise: ", status_text(rt, st), " (", rt->last_error(), ")");
  }
  int count = 0;
  const tfl_status cst = rt->device_count(&count);
  TORCH_CHECK(cst == TFL_OK, "flagos: runtime '", rt->name,
              "' cannot count its devices: ", status_text(rt, cst), " (", rt->last_error(), ")");
  // PyTorch numbers devices with 8-bit indices: more would wrap to negative.
  constexpr int kMaxDevices = std::numeric_limits<c10::DeviceIndex>::max();
  TORCH_CHECK(count <= kMaxDevices, "flagos: runtime '", rt->name, "' reports ", count,
              " devices, more than the ", kMaxDevices,
              " a PyTorch process can number (device indices are 8-bit); make fewer visible to "
              "this process (the runtime's device-count or visible-devices setting)");
  g_device_count.store(count);
  g_runtime_path = path;
  g_runtime.store(rt);
}

bool runtime_active() noexcept { return g_runtime.load() != nullptr; }

namespace {

// fork(): the runtime's threads (sim's stream workers) and driver state do
// not survive in the child, which would wait on them forever. As with CUDA,
// a child of a parent that used the runtime may not use it: every runtime call
// there raises. A parent that only activated it leaves the child free.
std::atomic<bool> g_used{false};
std::atomic<bool> g_bad_fork{false};

void after_fork_in_child() {
  if (g_runtime.load(std::memory_order_relaxed) && g_used.load(std::memory_order_relaxed)) {
    g_bad_fork.store(true, std::memory_order_relaxed);
  }
}

[[noreturn]] void throw_no_runtime() {
  TORCH_CHECK(false,
              "flagos: no vendor runtime is active. `import torch_fl` (or `import torch` with "
              "torch-fl-core installed) selects one; see torch_fl.info()");
}

void mark_used() {
  static std::once_flag at_fork;
  std::call_once(at_fork, [] { pthread_atfork(nullptr, nullptr, &after_fork_in_child); });
  g_used.store(true, std::memory_order_relaxed);
}

}  // namespace

bool in_bad_fork() noexcept { return g_bad_fork.load(std::memory_order_relaxed); }

const tfl_runtime_v1& runtime() {
  const tfl_runtime_v1* rt = g_runtime.load(std::memory_order_acquire);
  if (C10_LIKELY(rt != nullptr && g_used.load(std::memory_order_relaxed) &&
                 !g_bad_fork.load(std::memory_order_relaxed))) {
    return *rt;
  }
  if (rt == nullptr) throw_no_runtime();
  check_not_in_bad_fork();
  mark_used();
  return *rt;
}

void check_not_in_bad_fork() {
  if (C10_LIKELY(!g_bad_fork.load(std::memory_order_relaxed))) return;
  const tfl_runtime_v1* rt = g_runtime.load(std::memory_order_acquire);
  TORCH_CHECK(false, "flagos: cannot re-initialize the device in a forked subprocess (runtime '",
              rt ? rt->name : "none",
              "' was in use when the process forked). To use flagos with multiprocessing, use the "
              "'spawn' start method.");
}

std::string runtime_name() {
  const tfl_runtime_v1* rt = g_runtime.load();
  return rt ? rt->name : "none";
}

std::vector<RuntimeField> runtime_fields() {
  const tfl_runtime_v1* rt = g_runtime.load();
  std::vector<RuntimeField> out;
#define TFL_FIELD_INFO(field, minor, returns_status)                               \
  out.push_back(RuntimeField{#field, minor, offsetof(tfl_runtime_v1, field),       \
                             sizeof(static_cast<tfl_runtime_v1*>(nullptr)->field), \
                             rt != nullptr && TFL_RUNTIME_HAS(rt, field)});
  TFL_RUNTIME_V1_FUNCTIONS(TFL_FIELD_INFO)
#undef TFL_FIELD_INFO
  return out;
}

const tfl_runtime_v1* runtime_table_if_active() noexcept { return g_runtime.load(); }

uint32_t runtime_struct_size() noexcept {
  const tfl_runtime_v1* rt = g_runtime.load();
  return rt ? rt->struct_size : 0;
}

bool has_capability(uint64_t cap) noexcept {
  const tfl_runtime_v1* rt = g_runtime.load();
  return rt && (rt->capabilities & cap) == cap;
}

void ensure_mirror_initialized() {
  check_not_in_bad_fork();
  static c10::once_flag once;
  c10::call_once(once, [] {
    // The mirrored backend's first use counts as the runtime's (its driver is
    // started now): a child forked after this may not use flagos.
    mark_used();
    if (const auto type = mirror_device_type()) at::globalContext().lazyInitDevice(*type);
  });
}

std::optional<c10::DeviceType> mirror_device_type() noexcept {
  return g_runtime.load(std::memory_order_acquire) ? g_mirror_type : std::nullopt;
}

const c10::impl::DeviceGuardImplInterface* mirror_guard() noexcept {
  return g_runtime.load(std::memory_order_acquire) ? g_mirror_guard : nullptr;
}

namespace {

// The device count, counting the delegate runtime's devices on first use.
int counted_devices() noexcept {
  int n = g_device_count.load(std::memory_order_relaxed);
  if (n < 0 && g_delegate_table != nullptr) {
    int count = 0;
    if (g_delegate_table->device_count(&count) != TFL_OK) count = 0;
    g_device_count.store(count, std::memory_order_relaxed);
    n = count;
  }
  // Activation refuses more; a delegate runtime (CUDA) checks its own count.
  return std::clamp(n, 0, static_cast<int>(std::numeric_limits<c10::DeviceIndex>::max()));
}

}  // namespace

c10::DeviceIndex device_count_noexcept() noexcept {
  if (!g_runtime.load(std::memory_order_acquire)) return 0;
  return static_cast<c10::DeviceIndex>(counted_devices());
}

c10::DeviceIndex device_count() {
  runtime();  // throws with the explanation when no runtime is active
  return static_cast<c10::DeviceIndex>(counted_devices());
}

namespace {
std::mutex g_setting_mutex;
std::string g_device_count_setting;
}  // namespace

void set_device_count_setting(std::string text) {
  std::lock_guard<std::mutex> lock(g_setting_mutex);
  g_device_count_setting = std::move(text);
}

void check_device_index(c10::DeviceIndex index) {
  const auto n = device_count();
  if (C10_LIKELY(index >= 0 && index < n)) return;
  std::string setting;
  if (index >= n) {
    std::lock_guard<std::mutex> lock(g_setting_mutex);
    if (!g_device_count_setting.empty()) setting = "; " + g_device_count_setting;
  }
  TORCH_CHECK(false, "flagos: invalid device ordinal ", static_cast<int>(index), " (runtime '",
              runtime_name(), "' has ", static_cast<int>(n), " device", n == 1 ? "" : "s", ")",
              setting);
}

void throw_runtime_error(tfl_status status, const char* call, c10::DeviceIndex device) {
  const tfl_runtime_v1* rt = g_runtime.load();
  const char* detail = rt ? rt->last_error() : "";
  const std::string where =
      device >= 0 ? "flagos:" + std::to_string(static_cast<int>(device)) : std::string("flagos");
  if (status == TFL_ERROR_OUT_OF_MEMORY) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, "flagos out of memory in runtime call ", call, " on ",
                     where, " (runtime '", runtime_name(), "'): ", status_text(rt, status),
                     (detail && *detail) ? ": " : "", detail ? detail : "");
  }
  TORCH_CHECK(false, "flagos runtime call ", call, " failed on ", where, " (runtime '",
              runtime_name(), "'): ", status_text(rt, status), (detail && *detail) ? ": " : "",
              detail ? detail : "");
}

namespace {

// With one device it is the current one: no runtime call to ask or set it
// (the router does both on every routed op).
bool single_device() { return g_device_count.load(std::memory_order_relaxed) == 1; }

}  // namespace

c10::DeviceIndex current_device() {
  if (single_device()) return 0;
  int d = 0;
  TFL_CALL(-1, get_device, &d);
  return static_cast<c10::DeviceIndex>(d);
}

CurrentDeviceScope::CurrentDeviceScope(c10::DeviceIndex device) {
  if (device < 0 || (device == 0 && single_device())) return;
  TFL_CALL(device, get_device, &prev_);
  if (prev_ != device) {
    TFL_CALL(device, set_device, device);
    changed_ = true;
  }
}

CurrentDeviceScope::~CurrentDeviceScope() {
  // Not runtime(): a destructor must not throw.
  const tfl_runtime_v1* rt = g_runtime.load(std::memory_order_acquire);
  if (changed_ && rt != nullptr) rt->set_device(prev_);
}

}  // namespace torch_fl
