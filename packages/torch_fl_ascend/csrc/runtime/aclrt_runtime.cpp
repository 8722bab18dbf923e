// The torch-fl runtime table (include/torch_fl/runtime.h) over CANN's aclrt. Compiled against
// the toolkit's acl/acl.h and runtime.h only, no torch.
//
// What CANN requires, and how this file meets it:
//  - aclInit once per process, before any aclrt call. A repeat returns
//    ACL_ERROR_REPEAT_INITIALIZE, accepted: the application (or another library) may have
//    initialised first.
//  - device pointers are device-scoped: every call touching one runs with its owning NPU
//    current (H2D: dst decides; D2H, D2D, memset, free: src/ptr). Ownership is tracked here
//    (start, size, device) for every malloc: aclrtPointerGetAttributes only exists in recent
//    toolkits, reports no allocation bounds, and an interior pointer's allocation is what
//    pointer_info and the overrun checks need.
//  - a stream belongs to the NPU current when it was created, and is used with that NPU current.
//  - copies between NPUs need aclrtDeviceEnablePeerAccess in both directions (once per pair,
//    each with its own NPU current), then an ACL_MEMCPY_DEVICE_TO_DEVICE copy issued with the
//    source NPU current on a source-NPU stream.
//  - aclrtMemcpyAsync with host memory needs aclrtMallocHost memory (CANN documents that other
//    host memory fails unpredictably when the copy runs); pageable host memory is copied
//    synchronously after the stream's earlier work instead, as CUDA does for pageable H2D.
//    Async host-to-host copies are not supported by aclrtMemcpyAsync: done on the host once
//    the stream has drained.
//  - host functions: aclrtLaunchCallback(ACL_CALLBACK_BLOCK) runs fn on a thread subscribed to
//    the stream (aclrtSubscribeReport) that serves aclrtProcessReport; BLOCK holds later work on
//    the stream until fn returned, the ordering runtime.h asks for.
//  - aclrtStreamQuery reports COMPLETE=0 / NOT_READY=1 but aclrtQueryEventStatus reports
//    NOT_READY=0 / COMPLETE=1: each is compared with its own enum's names, never with 0.
//  - aclrtDestroyStream needs the stream drained first: stream_destroy synchronizes it.
#include <acl/acl.h>
#include <pthread.h>
#include <torch_fl/kit/runtime_allocations.h>
#include <torch_fl/kit/runtime_copies.h>
#include <torch_fl/kit/runtime_default_streams.h>
#include <torch_fl/kit/runtime_errors.h>
#include <torch_fl/kit/runtime_stream_order.h>
#include <torch_fl/kit/runtime_table.h>
#include <torch_fl/runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

struct tfl_stream_st {
  aclrtStream stream;
  int device;
  std::mutex subscribe_mutex;
  bool subscribed = false;  // to its device's report thread (first launch_host_func)
};

struct tfl_event_st {
  std::mutex mutex;
  aclrtEvent event;
  int device;  // where `event` was created: the device of the stream it was last recorded on
  uint32_t flags;
  bool recorded = false;
};

namespace {

using torch_fl::kit::memcpy_kind_name;
using torch_fl::kit::pointer_text;

// ---- status mapping and messages ----

const char* acl_error_name(aclError e) {
  switch (e) {
    case ACL_SUCCESS:
      return "ACL_SUCCESS";
    case ACL_ERROR_INVALID_PARAM:
      return "ACL_ERROR_INVALID_PARAM";
    case ACL_ERROR_UNINITIALIZE:
      return "ACL_ERROR_UNINITIALIZE";
    case ACL_ERROR_REPEAT_INITIALIZE:
      return "ACL_ERROR_REPEAT_INITIALIZE";
    case ACL_ERROR_BAD_ALLOC:
      return "ACL_ERROR_BAD_ALLOC";
    case ACL_ERROR_API_NOT_SUPPORT:
      return "ACL_ERROR_API_NOT_SUPPORT";
    case ACL_ERROR_INVALID_DEVICE:
      return "ACL_ERROR_INVALID_DEVICE";
    case ACL_ERROR_MEMORY_ADDRESS_UNALIGNED:
      return "ACL_ERROR_MEMORY_ADDRESS_UNALIGNED";
    case ACL_ERROR_RESOURCE_NOT_MATCH:
      return "ACL_ERROR_RESOURCE_NOT_MATCH";
    case ACL_ERROR_INVALID_RESOURCE_HANDLE:
      return "ACL_ERROR_INVALID_RESOURCE_HANDLE";
    case ACL_ERROR_FEATURE_UNSUPPORTED:
      return "ACL_ERROR_FEATURE_UNSUPPORTED";
    case ACL_ERROR_STORAGE_OVER_LIMIT:
      return "ACL_ERROR_STORAGE_OVER_LIMIT";
    case ACL_ERROR_INTERNAL_ERROR:
      return "ACL_ERROR_INTERNAL_ERROR";
    case ACL_ERROR_FAILURE:
      return "ACL_ERROR_FAILURE";
    case ACL_ERROR_RT_PARAM_INVALID:
      return "ACL_ERROR_RT_PARAM_INVALID";
    case ACL_ERROR_RT_INVALID_DEVICEID:
      return "ACL_ERROR_RT_INVALID_DEVICEID";
    case ACL_ERROR_RT_CONTEXT_NULL:
      return "ACL_ERROR_RT_CONTEXT_NULL";
    case ACL_ERROR_RT_STREAM_CONTEXT:
      return "ACL_ERROR_RT_STREAM_CONTEXT";
    case ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID:
      return "ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID";
    case ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL:
      return "ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL";
    case ACL_ERROR_RT_STREAM_SUBSCRIBE:
      return "ACL_ERROR_RT_STREAM_SUBSCRIBE";
    case ACL_ERROR_RT_THREAD_SUBSCRIBE:
      return "ACL_ERROR_RT_THREAD_SUBSCRIBE";
    case ACL_ERROR_RT_STREAM_NO_CB_REG:
      return "ACL_ERROR_RT_STREAM_NO_CB_REG";
    case ACL_ERROR_RT_INVALID_MEMORY_TYPE:
      return "ACL_ERROR_RT_INVALID_MEMORY_TYPE";
    case ACL_ERROR_RT_INVALID_HANDLE:
      return "ACL_ERROR_RT_INVALID_HANDLE";
    case ACL_ERROR_RT_INVALID_MALLOC_TYPE:
      return "ACL_ERROR_RT_INVALID_MALLOC_TYPE";
    case ACL_ERROR_RT_WAIT_TIMEOUT:
      return "ACL_ERROR_RT_WAIT_TIMEOUT";
    case ACL_ERROR_RT_FEATURE_NOT_SUPPORT:
      return "ACL_ERROR_RT_FEATURE_NOT_SUPPORT";
    case ACL_ERROR_RT_MEMORY_ALLOCATION:
      return "ACL_ERROR_RT_MEMORY_ALLOCATION";
    case ACL_ERROR_RT_MEMORY_FREE:
      return "ACL_ERROR_RT_MEMORY_FREE";
    case ACL_ERROR_RT_NO_DEVICE:
      return "ACL_ERROR_RT_NO_DEVICE";
    case ACL_ERROR_RT_NO_PERMISSION:
      return "ACL_ERROR_RT_NO_PERMISSION";
    case ACL_ERROR_RT_INTERNAL_ERROR:
      return "ACL_ERROR_RT_INTERNAL_ERROR";
    case ACL_ERROR_RT_STREAM_NOT_COMPLETE:
      return "ACL_ERROR_RT_STREAM_NOT_COMPLETE";
    case ACL_ERROR_RT_EVENT_NOT_COMPLETE:
      return "ACL_ERROR_RT_EVENT_NOT_COMPLETE";
    case ACL_ERROR_RT_REPORT_TIMEOUT:
      return "ACL_ERROR_RT_REPORT_TIMEOUT";
    case ACL_ERROR_RT_AICORE_EXCEPTION:
      return "ACL_ERROR_RT_AICORE_EXCEPTION";
    case ACL_ERROR_RT_DEV_SETUP_ERROR:
      return "ACL_ERROR_RT_DEV_SETUP_ERROR";
    default:
      return nullptr;
  }
}

tfl_status to_status(aclError e) {
  switch (e) {
    case ACL_SUCCESS:
      return TFL_OK;
    case ACL_ERROR_INVALID_PARAM:
    case ACL_ERROR_RT_PARAM_INVALID:
    case ACL_ERROR_MEMORY_ADDRESS_UNALIGNED:
      return TFL_ERROR_INVALID_VALUE;
    case ACL_ERROR_UNINITIALIZE:
      return TFL_ERROR_NOT_INITIALIZED;
    case ACL_ERROR_BAD_ALLOC:
    case ACL_ERROR_RT_MEMORY_ALLOCATION:
      return TFL_ERROR_OUT_OF_MEMORY;
    case ACL_ERROR_INVALID_DEVICE:
    case ACL_ERROR_RT_INVALID_DEVICEID:
    case ACL_ERROR_RT_NO_DEVICE:
      return TFL_ERROR_INVALID_DEVICE;
    case ACL_ERROR_INVALID_RESOURCE_HANDLE:
    case ACL_ERROR_RT_INVALID_HANDLE:
    case ACL_ERROR_RT_STREAM_CONTEXT:
      return TFL_ERROR_INVALID_HANDLE;
    case ACL_ERROR_RT_INVALID_MEMORY_TYPE:
    case ACL_ERROR_RT_MEMORY_FREE:
      return TFL_ERROR_INVALID_POINTER;
    case ACL_ERROR_API_NOT_SUPPORT:
    case ACL_ERROR_FEATURE_UNSUPPORTED:
    case ACL_ERROR_RT_FEATURE_NOT_SUPPORT:
      return TFL_ERROR_NOT_SUPPORTED;
    case ACL_ERROR_RT_STREAM_NOT_COMPLETE:
    case ACL_ERROR_RT_EVENT_NOT_COMPLETE:
      return TFL_ERROR_NOT_READY;
    default:
      return TFL_ERROR_DEVICE;
  }
}

std::string acl_error_text(aclError e) {
  const char* name = acl_error_name(e);
  return std::string(name ? name : "aclError") + " (aclError " + std::to_string(e) + ")";
}

// "aclrtMalloc(&p, size, ...)" -> "aclrtMalloc": the call's name for messages.
std::string call_name(const char* expr) {
  const char* paren = std::strchr(expr, '(');
  return paren ? std::string(expr, paren) : std::string(expr);
}

// The toolkit's text for the calling thread's latest failure (real CANN clears it on read),
// trimmed and bounded: it can be a multi-line report with a traceback.
std::string recent_error_message() {
  const char* raw = aclGetRecentErrMsg();
  if (!raw) return "";
  std::string s(raw, strnlen(raw, 2048));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// Records "<call> on Ascend NPU N failed: <status> (aclError N); <detail>; CANN: <message>"
// and maps the status.
tfl_status fail_acl(const std::string& call, int device, aclError e,
                    const std::string& detail = "") {
  const std::string recent = recent_error_message();
  std::string msg = call;
  if (device >= 0) msg += " on Ascend NPU " + std::to_string(device);
  msg += " failed: " + acl_error_text(e);
  if (!detail.empty()) msg += "; " + detail;
  if (!recent.empty()) msg += "; CANN: " + recent;
  return torch_fl::kit::fail(to_status(e), std::move(msg));
}

tfl_status fail(tfl_status s, const std::string& msg) {
  return torch_fl::kit::fail(s, "aclrt runtime: " + msg);
}

#define ACL_CHECK(device, call, ...)                                                       \
  do {                                                                                     \
    const aclError _e = (call);                                                            \
    if (_e != ACL_SUCCESS) return fail_acl(call_name(#call), (device), _e, ##__VA_ARGS__); \
  } while (0)

// ---- initialisation ----

std::mutex g_init_mutex;
std::atomic<bool> g_ready{false};
int g_count = 0;

torch_fl::kit::DefaultStreams<tfl_stream_st> g_default;  // made with their device current

tfl_status rt_init() {
  if (g_ready.load(std::memory_order_acquire)) return TFL_OK;
  std::lock_guard<std::mutex> lock(g_init_mutex);
  if (g_ready.load(std::memory_order_relaxed)) return TFL_OK;
  const aclError e = aclInit(nullptr);
  if (e != ACL_SUCCESS && e != ACL_ERROR_REPEAT_INITIALIZE) return fail_acl("aclInit", -1, e);
  uint32_t n = 0;
  const aclError c = aclrtGetDeviceCount(&n);
  if (c == ACL_ERROR_RT_NO_DEVICE) {
    n = 0;  // initialised, but no NPU: device_count reports 0
  } else if (c != ACL_SUCCESS) {
    return fail_acl("aclrtGetDeviceCount", -1, c);
  }
  g_default.reset(static_cast<int>(n));
  g_count = static_cast<int>(n);
  g_ready.store(true, std::memory_order_release);
  return TFL_OK;
}

#define READY() \
  if (tfl_status _st = rt_init()) return _st

tfl_status check_device(int device) {
  if (device < 0 || device >= g_count) {
    return fail(TFL_ERROR_INVALID_DEVICE, "no Ascend NPU " + std::to_string(device) + " (" +
                                              std::to_string(g_count) + " visible)");
  }
  return TFL_OK;
}

// The calling thread's device. A thread that never chose one is on NPU 0 (as with CUDA); CANN
// has no current device until aclrtSetDevice, so that is made explicit here.
aclError thread_device(int32_t* device, const char** call) {
  *call = "aclrtGetDevice";
  const aclError g = aclrtGetDevice(device);
  if (g != ACL_ERROR_RT_CONTEXT_NULL) return g;  // success, or a real failure
  (void)aclGetRecentErrMsg();  // consume the "no context" text: it is not an error here
  *call = "aclrtSetDevice";
  const aclError e = aclrtSetDevice(0);
  if (e == ACL_SUCCESS) *device = 0;
  return e;
}

#define CURRENT(var)                                                          \
  int32_t var = -1;                                                           \
  do {                                                                        \
    const char* _call = nullptr;                                              \
    const aclError _ce = thread_device(&var, &_call);                         \
    if (_ce != ACL_SUCCESS)                                                   \
      return fail_acl(_call, -1, _ce, "finding the calling thread's device"); \
  } while (0)

// Makes `device` current for the scope (aclrt acts on the current device), then restores.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    status_ = thread_device(&prev_, &call_);
    if (status_ != ACL_SUCCESS) return;
    if (prev_ != device) {
      call_ = "aclrtSetDevice";
      status_ = aclrtSetDevice(device);
      switched_ = status_ == ACL_SUCCESS;
    }
  }
  ~DeviceScope() {
    if (switched_) (void)aclrtSetDevice(prev_);
  }
  aclError status() const { return status_; }
  const char* call() const { return call_; }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int32_t prev_ = -1;
  const char* call_ = "aclrtSetDevice";
  bool switched_ = false;
  aclError status_ = ACL_SUCCESS;
};

#define ENTER_DEVICE(device)  \
  DeviceScope _scope(device); \
  if (_scope.status() != ACL_SUCCESS) return fail_acl(_scope.call(), (device), _scope.status())

// ---- allocations: every device and pinned allocation goes through this file ----

torch_fl::kit::AllocationRegistry g_allocations;

int owner_of(const void* p) { return g_allocations.owner_of(p); }

bool pinned_range(const void* p, size_t n) { return g_allocations.host_range(p, n); }

// [p, p + n) must stay inside p's device allocation: the toolkit would fault at execution,
// after the call returned success.
tfl_status check_range(const char* what, const void* p, size_t n) {
  torch_fl::kit::Allocation a;
  if (!g_allocations.device_allocation(p, &a)) return TFL_OK;
  const size_t off = a.offset(p);
  if (off + n > a.size) {
    return fail(TFL_ERROR_INVALID_VALUE,
                std::string(what) + " " + pointer_text(p) + ": " + std::to_string(n) +
                    " bytes at offset " + std::to_string(off) + " overrun its allocation of " +
                    std::to_string(a.size) + " bytes on Ascend NPU " + std::to_string(a.device));
  }
  return TFL_OK;
}

// ---- streams ----

tfl_status new_stream(int device, tfl_stream_st** out) {
  aclrtStream s = nullptr;
  // Priority is not passed on: CANN's training parts take only 0 (a reserved value).
  // FAST_LAUNCH: resources reserved at creation instead of on each first launch.
  ACL_CHECK(device, aclrtCreateStreamWithConfig(&s, 0, ACL_STREAM_FAST_LAUNCH));
  auto* st = new tfl_stream_st();
  st->stream = s;
  st->device = device;
  *out = st;
  return TFL_OK;
}

// The runtime's default stream of `device`: a created stream rather than CANN's NULL stream,
// so it can be subscribed for host functions and ordered like any other stream.
tfl_status default_stream(int device, tfl_stream_st** out) {
  if (tfl_status s = check_device(device)) return s;
  return g_default.get(device, out, [](int device, tfl_stream_st** made) {
    ENTER_DEVICE(device);
    return new_stream(device, made);
  });
}

// NULL -> the current device's default stream.
tfl_status resolve(tfl_stream s, tfl_stream_st** out) {
  if (s) {
    *out = s;
    return TFL_OK;
  }
  CURRENT(device);
  return default_stream(device, out);
}

#define RESOLVE(var, s)         \
  tfl_stream_st* var = nullptr; \
  if (tfl_status _rs = resolve((s), &var)) return _rs

// The peer event barrier's SDK steps (kit::stream_after).
struct AclOrder {
  tfl_status record(tfl_stream_st* signal, aclrtEvent* ev) const {
    ENTER_DEVICE(signal->device);
    ACL_CHECK(signal->device, aclrtCreateEventWithFlag(ev, ACL_EVENT_SYNC));
    const aclError e = aclrtRecordEvent(*ev, signal->stream);
    if (e != ACL_SUCCESS) {
      const tfl_status s = fail_acl("aclrtRecordEvent", signal->device, e);
      (void)aclrtDestroyEvent(*ev);
      return s;
    }
    return TFL_OK;
  }
  tfl_status wait(tfl_stream_st* waiter, aclrtEvent ev) const {
    ENTER_DEVICE(waiter->device);
    ACL_CHECK(waiter->device, aclrtStreamWaitEvent(waiter->stream, ev));
    return TFL_OK;
  }
  void destroy(tfl_stream_st* signal, aclrtEvent ev) const {
    // The runtime keeps the event's resources until the queued wait has used them.
    DeviceScope back(signal->device);
    (void)aclrtDestroyEvent(ev);
  }
};

// Makes `waiter` wait for the work queued so far on `signal`.
tfl_status stream_after(tfl_stream_st* waiter, tfl_stream_st* signal) {
  return torch_fl::kit::stream_after<aclrtEvent>(waiter, signal, AclOrder{});
}

// ---- host functions: one report thread per device serves aclrtProcessReport ----
// CANN lets one thread serve several streams of one device, never streams of two devices. So a
// device's host functions run one at a time, in the order their streams reach them (as with
// CUDA's callback thread): one that blocks holds back the host functions of the device's other
// streams, never their device work.

struct Reporter {
  std::atomic<uint64_t> thread_id{0};
  std::atomic<bool> started{false};
  std::atomic<bool> finished{false};
  aclError setup_status = ACL_SUCCESS;
};

std::mutex g_reporter_mutex;
std::map<int, Reporter*> g_reporters;
std::atomic<bool> g_stop_reporters{false};

void reporter_main(int device, Reporter* r) {
  // Callbacks run in the context of the stream's device.
  r->setup_status = aclrtSetDevice(device);
  r->thread_id.store(static_cast<uint64_t>(pthread_self()), std::memory_order_release);
  r->started.store(true, std::memory_order_release);
  while (r->setup_status == ACL_SUCCESS && !g_stop_reporters.load(std::memory_order_acquire)) {
    // A timeout returns so that process exit can stop the thread; failing calls (no stream
    // subscribed yet) must not spin.
    const aclError e = aclrtProcessReport(100);
    if (e != ACL_SUCCESS && e != ACL_ERROR_RT_REPORT_TIMEOUT) {
      (void)aclGetRecentErrMsg();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  r->finished.store(true, std::memory_order_release);
}

// At exit, report threads stop within one aclrtProcessReport timeout; one stuck in a host
// function is left behind rather than hanging the exit.
void stop_reporters() {
  g_stop_reporters.store(true, std::memory_order_release);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  std::lock_guard<std::mutex> lock(g_reporter_mutex);
  for (auto& kv : g_reporters) {
    while (!kv.second->finished.load(std::memory_order_acquire) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
}

tfl_status reporter_for(int device, uint64_t* thread_id) {
  std::lock_guard<std::mutex> lock(g_reporter_mutex);
  Reporter*& r = g_reporters[device];
  if (!r) {
    static std::once_flag exit_hook;
    std::call_once(exit_hook, [] { std::atexit(stop_reporters); });
    r = new Reporter();
    std::thread(reporter_main, device, r).detach();
    while (!r->started.load(std::memory_order_acquire)) std::this_thread::yield();
  }
  if (r->setup_status != ACL_SUCCESS) {
    return fail_acl("aclrtSetDevice", device, r->setup_status,
                    "on the host-function report thread");
  }
  *thread_id = r->thread_id.load(std::memory_order_acquire);
  return TFL_OK;
}

tfl_status subscribe(tfl_stream_st* st) {
  std::lock_guard<std::mutex> lock(st->subscribe_mutex);
  if (st->subscribed) return TFL_OK;
  uint64_t tid = 0;
  if (tfl_status s = reporter_for(st->device, &tid)) return s;
  ENTER_DEVICE(st->device);
  ACL_CHECK(st->device, aclrtSubscribeReport(tid, st->stream));
  st->subscribed = true;
  return TFL_OK;
}

// ---- copies ----

aclrtMemcpyKind acl_kind(tfl_memcpy_kind k) {
  switch (k) {
    case TFL_MEMCPY_HOST_TO_HOST:
      return ACL_MEMCPY_HOST_TO_HOST;
    case TFL_MEMCPY_HOST_TO_DEVICE:
      return ACL_MEMCPY_HOST_TO_DEVICE;
    case TFL_MEMCPY_DEVICE_TO_HOST:
      return ACL_MEMCPY_DEVICE_TO_HOST;
    case TFL_MEMCPY_DEVICE_TO_DEVICE:
      return ACL_MEMCPY_DEVICE_TO_DEVICE;
  }
  return ACL_MEMCPY_DEFAULT;
}

std::string where(int device) {
  return device >= 0 ? "Ascend NPU " + std::to_string(device) : std::string("host");
}

// The device a copy runs on (the one owning the pointer that decides; for D2D the source) and,
// for D2D, the destination's device. A kind that does not fit the pointers is refused.
tfl_status copy_device(void* dst, const void* src, size_t n, tfl_memcpy_kind kind, int* device,
                       int* other) {
  if (kind < TFL_MEMCPY_HOST_TO_HOST || kind > TFL_MEMCPY_DEVICE_TO_DEVICE) {
    return fail(TFL_ERROR_INVALID_VALUE,
                "unknown memcpy kind " + std::to_string(static_cast<int>(kind)));
  }
  const int d = owner_of(dst), s = owner_of(src);
  torch_fl::kit::CopyRoute route;
  const bool fits = torch_fl::kit::copy_route(kind, d, s, &route);
  *device = route.device;
  *other = route.other;
  if (!fits) {
    return fail(TFL_ERROR_INVALID_MEMCPY_KIND,
                std::string("memcpy kind ") + memcpy_kind_name(kind) + " does not match dst " +
                    pointer_text(dst) + " (" + where(d) + ") and src " + pointer_text(src) + " (" +
                    where(s) + ")");
  }
  if (tfl_status st = check_range("memcpy dst", dst, n)) return st;
  return check_range("memcpy src", src, n);
}

std::string copy_detail(tfl_memcpy_kind kind, size_t n) {
  return std::string(memcpy_kind_name(kind)) + ", " + std::to_string(n) + " bytes";
}

// Peer access between two NPUs, enabled once per pair in both directions (CANN's rule: each
// direction is enabled with its own device current).
std::mutex g_peer_mutex;
std::map<std::pair<int, int>, bool> g_peer;  // (low, high) -> enabled

tfl_status ensure_peer(int a, int b) {
  std::lock_guard<std::mutex> lock(g_peer_mutex);
  const auto key = std::minmax(a, b);
  if (g_peer.count(key)) return TFL_OK;
  for (const auto& dir : {std::make_pair(a, b), std::make_pair(b, a)}) {
    int32_t can = 0;
    ACL_CHECK(dir.first, aclrtDeviceCanAccessPeer(&can, dir.first, dir.second));
    if (can != 1) {
      return fail(TFL_ERROR_NOT_SUPPORTED,
                  "Ascend NPU " + std::to_string(dir.first) + " cannot copy to or from NPU " +
                      std::to_string(dir.second) + " (aclrtDeviceCanAccessPeer reports 0)");
    }
  }
  for (const auto& dir : {std::make_pair(a, b), std::make_pair(b, a)}) {
    ENTER_DEVICE(dir.first);
    ACL_CHECK(dir.first, aclrtDeviceEnablePeerAccess(dir.second, 0));
  }
  g_peer[key] = true;
  return TFL_OK;
}

std::string peer_detail(int src, int dst, size_t n) {
  return "Ascend NPU " + std::to_string(src) + " -> NPU " + std::to_string(dst) + ", " +
         std::to_string(n) + " bytes";
}

// ======================= the table's functions =======================

constexpr auto rt_status_name = torch_fl::kit::status_name;
constexpr auto rt_last_error = torch_fl::kit::last_error;

tfl_status rt_device_count(int* count) {
  if (!count) return fail(TFL_ERROR_INVALID_VALUE, "device_count: NULL out-parameter");
  READY();
  *count = g_count;
  return TFL_OK;
}

tfl_status rt_get_device(int* device) {
  if (!device) return fail(TFL_ERROR_INVALID_VALUE, "get_device: NULL out-parameter");
  READY();
  CURRENT(d);
  *device = d;
  return TFL_OK;
}

tfl_status rt_set_device(int device) {
  READY();
  if (tfl_status s = check_device(device)) return s;
  ACL_CHECK(device, aclrtSetDevice(device));
  return TFL_OK;
}

tfl_status rt_device_synchronize() {
  READY();
  CURRENT(device);
  ACL_CHECK(device, aclrtSynchronizeDevice());
  return TFL_OK;
}

tfl_status rt_mem_get_info(size_t* free_bytes, size_t* total_bytes) {
  if (!free_bytes || !total_bytes)
    return fail(TFL_ERROR_INVALID_VALUE, "mem_get_info: NULL out-parameter");
  READY();
  CURRENT(device);
  size_t f = 0, t = 0;
  ACL_CHECK(device, aclrtGetMemInfo(ACL_HBM_MEM, &f, &t));
  *free_bytes = f;
  *total_bytes = t;
  return TFL_OK;
}

tfl_status rt_device_name(int device, char* buf, size_t len) {
  if (!buf || len == 0) return fail(TFL_ERROR_INVALID_VALUE, "device_name: empty buffer");
  READY();
  if (tfl_status s = check_device(device)) return s;
  // One SoC per machine: aclrtGetSocName names the chip ("Ascend910B1"), the index tells
  // the cards apart.
  const char* soc = aclrtGetSocName();
  std::snprintf(buf, len, "%s (NPU %d)", soc && *soc ? soc : "Ascend", device);
  return TFL_OK;
}

tfl_status rt_malloc(void** ptr, size_t size) {
  if (!ptr) return fail(TFL_ERROR_INVALID_VALUE, "malloc: NULL out-parameter");
  if (size == 0) {
    *ptr = nullptr;
    return TFL_OK;
  }
  READY();
  CURRENT(device);
  void* p = nullptr;
  ACL_CHECK(device, aclrtMalloc(&p, size, ACL_MEM_MALLOC_HUGE_FIRST),
            std::to_string(size) + " bytes");
  g_allocations.add_device(p, size, device);
  *ptr = p;
  return TFL_OK;
}

tfl_status rt_free(void* ptr) {
  if (!ptr) return TFL_OK;
  READY();
  torch_fl::kit::Allocation a;
  if (!g_allocations.device_start(ptr, &a)) {
    return fail(TFL_ERROR_INVALID_POINTER,
                "free of " + pointer_text(ptr) +
                    (a.device >= 0 ? ", inside an allocation of Ascend NPU " +
                                         std::to_string(a.device) + " but not its start"
                                   : ", which no Ascend NPU allocated here"));
  }
  {
    ENTER_DEVICE(a.device);  // device-scoped: freed with its owner current
    ACL_CHECK(a.device, aclrtFree(ptr));
  }
  g_allocations.remove_device(ptr);
  return TFL_OK;
}

tfl_status rt_host_malloc(void** ptr, size_t size) {
  if (!ptr) return fail(TFL_ERROR_INVALID_VALUE, "host_malloc: NULL out-parameter");
  if (size == 0) {
    *ptr = nullptr;
    return TFL_OK;
  }
  READY();
  CURRENT(device);  // aclrtMallocHost needs a context
  void* p = nullptr;
  ACL_CHECK(device, aclrtMallocHost(&p, size), std::to_string(size) + " bytes of pinned memory");
  g_allocations.add_host(p, size);
  *ptr = p;
  return TFL_OK;
}

tfl_status rt_host_free(void* ptr) {
  if (!ptr) return TFL_OK;
  READY();
  if (!g_allocations.host_start(ptr)) {
    return fail(TFL_ERROR_INVALID_POINTER,
                "host_free of " + pointer_text(ptr) + ", which host_malloc did not return");
  }
  CURRENT(device);
  ACL_CHECK(device, aclrtFreeHost(ptr));
  g_allocations.remove_host(ptr);
  return TFL_OK;
}

tfl_status rt_pointer_info(const void* ptr, tfl_pointer_kind* kind, int* device) {
  if (!kind || !device) return fail(TFL_ERROR_INVALID_VALUE, "pointer_info: NULL out-parameter");
  g_allocations.pointer_info(ptr, kind, device);
  return TFL_OK;
}

tfl_status rt_memcpy(void* dst, const void* src, size_t n, tfl_memcpy_kind kind) {
  if (n == 0) return TFL_OK;
  READY();
  int device = -1, other = -1;
  if (tfl_status s = copy_device(dst, src, n, kind, &device, &other)) return s;
  if (kind == TFL_MEMCPY_HOST_TO_HOST) {
    std::memmove(dst, src, n);
    return TFL_OK;
  }
  // "after the current device's default stream work": the devices involved drain first.
  for (int d : {device, other}) {
    if (d < 0) continue;
    tfl_stream_st* ds = nullptr;
    if (tfl_status s = default_stream(d, &ds)) return s;
    ENTER_DEVICE(d);
    ACL_CHECK(d, aclrtSynchronizeStream(ds->stream));
  }
  if (kind == TFL_MEMCPY_DEVICE_TO_DEVICE && other != device) {
    if (tfl_status s = ensure_peer(device, other)) return s;
    ENTER_DEVICE(device);
    ACL_CHECK(device, aclrtMemcpy(dst, n, src, n, ACL_MEMCPY_DEVICE_TO_DEVICE),
              peer_detail(device, other, n));
    return TFL_OK;
  }
  ENTER_DEVICE(device);
  ACL_CHECK(device, aclrtMemcpy(dst, n, src, n, acl_kind(kind)), copy_detail(kind, n));
  return TFL_OK;
}

tfl_status rt_memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device,
                                size_t n, tfl_stream stream);

tfl_status rt_memcpy_async(void* dst, const void* src, size_t n, tfl_memcpy_kind kind,
                           tfl_stream stream) {
  if (n == 0) return TFL_OK;
  READY();
  int device = -1, other = -1;
  if (tfl_status s = copy_device(dst, src, n, kind, &device, &other)) return s;
  if (kind == TFL_MEMCPY_DEVICE_TO_DEVICE && other != device)
    return rt_memcpy_peer_async(dst, other, src, device, n, stream);
  RESOLVE(st, stream);
  if (kind == TFL_MEMCPY_HOST_TO_HOST) {
    ENTER_DEVICE(st->device);
    ACL_CHECK(st->device, aclrtSynchronizeStream(st->stream));
    std::memmove(dst, src, n);
    return TFL_OK;
  }
  if (st->device != device) {
    return fail(TFL_ERROR_INVALID_VALUE, std::string("memcpy_async ") + memcpy_kind_name(kind) +
                                             " on Ascend NPU " + std::to_string(device) +
                                             " was given a stream of NPU " +
                                             std::to_string(st->device));
  }
  ENTER_DEVICE(device);
  const void* host = kind == TFL_MEMCPY_HOST_TO_DEVICE   ? src
                     : kind == TFL_MEMCPY_DEVICE_TO_HOST ? static_cast<const void*>(dst)
                                                         : nullptr;
  if (host && !pinned_range(host, n)) {
    // Pageable host memory: CANN's async copy may not touch it, so the bytes move now, after
    // the stream's earlier work (which is what stream order asks of them).
    ACL_CHECK(device, aclrtSynchronizeStream(st->stream));
    ACL_CHECK(device, aclrtMemcpy(dst, n, src, n, acl_kind(kind)),
              copy_detail(kind, n) + ", pageable host memory");
    return TFL_OK;
  }
  ACL_CHECK(device, aclrtMemcpyAsync(dst, n, src, n, acl_kind(kind), st->stream),
            copy_detail(kind, n));
  return TFL_OK;
}

tfl_status rt_memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device,
                                size_t n, tfl_stream stream) {
  if (n == 0) return TFL_OK;
  READY();
  const int d = owner_of(dst), s = owner_of(src);
  if (d != dst_device || s != src_device) {
    return fail(TFL_ERROR_INVALID_POINTER,
                "memcpy_peer_async dst " + pointer_text(dst) + " is on " + where(d) +
                    " (expected NPU " + std::to_string(dst_device) + "), src " + pointer_text(src) +
                    " is on " + where(s) + " (expected NPU " + std::to_string(src_device) + ")");
  }
  if (tfl_status st = check_range("memcpy_peer_async dst", dst, n)) return st;
  if (tfl_status st = check_range("memcpy_peer_async src", src, n)) return st;
  RESOLVE(st, stream);
  if (dst_device == src_device) {
    if (st->device != src_device) {
      return fail(TFL_ERROR_INVALID_VALUE,
                  "memcpy_peer_async within Ascend NPU " + std::to_string(src_device) +
                      " was given a stream of NPU " + std::to_string(st->device));
    }
    ENTER_DEVICE(src_device);
    ACL_CHECK(src_device, aclrtMemcpyAsync(dst, n, src, n, ACL_MEMCPY_DEVICE_TO_DEVICE, st->stream),
              copy_detail(TFL_MEMCPY_DEVICE_TO_DEVICE, n));
    return TFL_OK;
  }
  if (tfl_status e = ensure_peer(src_device, dst_device)) return e;
  if (st->device == src_device) {
    ENTER_DEVICE(src_device);
    ACL_CHECK(src_device, aclrtMemcpyAsync(dst, n, src, n, ACL_MEMCPY_DEVICE_TO_DEVICE, st->stream),
              peer_detail(src_device, dst_device, n));
    return TFL_OK;
  }
  // A stream of another device: the copy runs on the source's default stream, ordered after
  // `stream`, and `stream` is ordered after it.
  tfl_stream_st* src_default = nullptr;
  if (tfl_status e = default_stream(src_device, &src_default)) return e;
  return torch_fl::kit::run_in_order_of(st, src_default, stream_after, [&](tfl_stream_st* runner) {
    ENTER_DEVICE(src_device);
    ACL_CHECK(src_device,
              aclrtMemcpyAsync(dst, n, src, n, ACL_MEMCPY_DEVICE_TO_DEVICE, runner->stream),
              peer_detail(src_device, dst_device, n));
    return TFL_OK;
  });
}

tfl_status rt_memset_async(void* ptr, int value, size_t n, tfl_stream stream) {
  if (n == 0) return TFL_OK;
  READY();
  const int device = owner_of(ptr);
  if (device < 0) {
    return fail(TFL_ERROR_INVALID_POINTER,
                "memset_async of " + pointer_text(ptr) + ", which no Ascend NPU allocated here");
  }
  if (tfl_status s = check_range("memset_async", ptr, n)) return s;
  RESOLVE(st, stream);
  if (st->device != device) {
    return fail(TFL_ERROR_INVALID_VALUE, "memset_async of an Ascend NPU " + std::to_string(device) +
                                             " pointer on a stream of NPU " +
                                             std::to_string(st->device));
  }
  ENTER_DEVICE(device);
  ACL_CHECK(device, aclrtMemsetAsync(ptr, n, value, n, st->stream), std::to_string(n) + " bytes");
  return TFL_OK;
}

tfl_status rt_stream_create(tfl_stream* stream, int priority) {
  (void)priority;  // see new_stream: CANN's training parts have no stream priorities
  if (!stream) return fail(TFL_ERROR_INVALID_VALUE, "stream_create: NULL out-parameter");
  READY();
  CURRENT(device);
  tfl_stream_st* st = nullptr;
  if (tfl_status s = new_stream(device, &st)) return s;
  *stream = st;
  return TFL_OK;
}

tfl_status rt_stream_destroy(tfl_stream stream) {
  if (!stream)
    return fail(TFL_ERROR_INVALID_HANDLE, "stream_destroy: the default stream is not destroyed");
  READY();
  {
    ENTER_DEVICE(stream->device);
    // CANN: a stream is drained before aclrtDestroyStream (and its host functions run).
    ACL_CHECK(stream->device, aclrtSynchronizeStream(stream->stream));
    if (stream->subscribed) {
      uint64_t tid = 0;
      if (tfl_status s = reporter_for(stream->device, &tid)) return s;
      ACL_CHECK(stream->device, aclrtUnSubscribeReport(tid, stream->stream));
    }
    ACL_CHECK(stream->device, aclrtDestroyStream(stream->stream));
  }
  delete stream;
  return TFL_OK;
}

tfl_status rt_stream_synchronize(tfl_stream stream) {
  READY();
  RESOLVE(st, stream);
  ENTER_DEVICE(st->device);
  ACL_CHECK(st->device, aclrtSynchronizeStream(st->stream));
  return TFL_OK;
}

tfl_status rt_stream_query(tfl_stream stream) {
  READY();
  RESOLVE(st, stream);
  ENTER_DEVICE(st->device);
  aclrtStreamStatus status = ACL_STREAM_STATUS_RESERVED;
  ACL_CHECK(st->device, aclrtStreamQuery(st->stream, &status));
  if (status == ACL_STREAM_STATUS_COMPLETE) return TFL_OK;
  if (status == ACL_STREAM_STATUS_NOT_READY) return TFL_ERROR_NOT_READY;
  return fail(TFL_ERROR_DEVICE, "aclrtStreamQuery on Ascend NPU " + std::to_string(st->device) +
                                    " returned stream status " +
                                    std::to_string(static_cast<int>(status)));
}

tfl_status rt_stream_wait_event(tfl_stream stream, tfl_event event) {
  if (!event) return fail(TFL_ERROR_INVALID_HANDLE, "stream_wait_event: NULL event");
  READY();
  RESOLVE(st, stream);
  std::lock_guard<std::mutex> lock(event->mutex);
  // An event never recorded has nothing to wait for (CUDA's rule); CANN would wait forever.
  if (!event->recorded) return TFL_OK;
  ENTER_DEVICE(st->device);
  ACL_CHECK(st->device, aclrtStreamWaitEvent(st->stream, event->event),
            "event of NPU " + std::to_string(event->device));
  return TFL_OK;
}

tfl_status rt_launch_host_func(tfl_stream stream, tfl_host_fn fn, void* user_data) {
  if (!fn) return fail(TFL_ERROR_INVALID_VALUE, "launch_host_func: NULL function");
  READY();
  RESOLVE(st, stream);
  if (tfl_status s = subscribe(st)) return s;
  ENTER_DEVICE(st->device);
  ACL_CHECK(st->device, aclrtLaunchCallback(fn, user_data, ACL_CALLBACK_BLOCK, st->stream));
  return TFL_OK;
}

uint32_t acl_event_flags(uint32_t flags) {
  // SYNC: usable by aclrtStreamWaitEvent; TIME_LINE: records timestamps (costs a little).
  return ACL_EVENT_SYNC | ((flags & TFL_EVENT_DISABLE_TIMING) ? 0u : ACL_EVENT_TIME_LINE);
}

tfl_status rt_event_create(tfl_event* event, uint32_t flags) {
  if (!event) return fail(TFL_ERROR_INVALID_VALUE, "event_create: NULL out-parameter");
  if (flags & ~static_cast<uint32_t>(TFL_EVENT_DISABLE_TIMING))
    return fail(TFL_ERROR_INVALID_VALUE, "event_create: unknown flags " + std::to_string(flags));
  READY();
  CURRENT(device);
  aclrtEvent e = nullptr;
  ACL_CHECK(device, aclrtCreateEventWithFlag(&e, acl_event_flags(flags)));
  auto* ev = new tfl_event_st();
  ev->event = e;
  ev->device = device;
  ev->flags = flags;
  *event = ev;
  return TFL_OK;
}

tfl_status rt_event_destroy(tfl_event event) {
  if (!event) return fail(TFL_ERROR_INVALID_HANDLE, "event_destroy: NULL event");
  READY();
  {
    ENTER_DEVICE(event->device);
    ACL_CHECK(event->device, aclrtDestroyEvent(event->event));
  }
  delete event;
  return TFL_OK;
}

tfl_status rt_event_record(tfl_event event, tfl_stream stream) {
  if (!event) return fail(TFL_ERROR_INVALID_HANDLE, "event_record: NULL event");
  READY();
  RESOLVE(st, stream);
  std::lock_guard<std::mutex> lock(event->mutex);
  if (event->device != st->device) {
    // A CANN event lives in its device's context: recorded on another device's stream, it is
    // re-created there (a record replaces whatever the event held anyway).
    aclrtEvent fresh = nullptr;
    {
      ENTER_DEVICE(st->device);
      ACL_CHECK(st->device, aclrtCreateEventWithFlag(&fresh, acl_event_flags(event->flags)));
    }
    {
      DeviceScope old(event->device);
      (void)aclrtDestroyEvent(event->event);
    }
    event->event = fresh;
    event->device = st->device;
    event->recorded = false;
  }
  ENTER_DEVICE(st->device);
  ACL_CHECK(st->device, aclrtRecordEvent(event->event, st->stream));
  event->recorded = true;
  return TFL_OK;
}

tfl_status rt_event_synchronize(tfl_event event) {
  if (!event) return fail(TFL_ERROR_INVALID_HANDLE, "event_synchronize: NULL event");
  READY();
  std::lock_guard<std::mutex> lock(event->mutex);
  if (!event->recorded) return TFL_OK;
  ENTER_DEVICE(event->device);
  ACL_CHECK(event->device, aclrtSynchronizeEvent(event->event));
  return TFL_OK;
}

// Whether a recorded event's work has completed (aclrtQueryEventStatus: NOT_READY=0, COMPLETE=1).
tfl_status event_done(tfl_event_st* event, bool* done) {
  ENTER_DEVICE(event->device);
  aclrtEventRecordedStatus status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
  ACL_CHECK(event->device, aclrtQueryEventStatus(event->event, &status));
  *done = status == ACL_EVENT_RECORDED_STATUS_COMPLETE;
  return TFL_OK;
}

tfl_status rt_event_query(tfl_event event) {
  if (!event) return fail(TFL_ERROR_INVALID_HANDLE, "event_query: NULL event");
  READY();
  std::lock_guard<std::mutex> lock(event->mutex);
  if (!event->recorded) return TFL_OK;  // nothing pending, as with CUDA
  bool done = false;
  if (tfl_status s = event_done(event, &done)) return s;
  return done ? TFL_OK : TFL_ERROR_NOT_READY;
}

tfl_status rt_event_elapsed_ms(float* ms, tfl_event start, tfl_event end) {
  if (!ms || !start || !end)
    return fail(TFL_ERROR_INVALID_VALUE, "event_elapsed_ms: NULL argument");
  READY();
  if ((start->flags | end->flags) & TFL_EVENT_DISABLE_TIMING)
    return fail(TFL_ERROR_INVALID_VALUE, "event_elapsed_ms: an event was created without timing");
  std::unique_lock<std::mutex> l1(start->mutex, std::defer_lock);
  std::unique_lock<std::mutex> l2(end->mutex, std::defer_lock);
  if (start == end) {
    l1.lock();
  } else {
    std::lock(l1, l2);
  }
  if (!start->recorded || !end->recorded)
    return fail(TFL_ERROR_INVALID_VALUE, "event_elapsed_ms: an event was never recorded");
  for (tfl_event_st* e : {start, end}) {
    bool done = false;
    if (tfl_status s = event_done(e, &done)) return s;
    if (!done) return fail(TFL_ERROR_NOT_READY, "event_elapsed_ms: an event has not completed yet");
  }
  ENTER_DEVICE(end->device);
  float v = 0.0f;
  ACL_CHECK(end->device, aclrtEventElapsedTime(&v, start->event, end->event));
  *ms = v;
  return TFL_OK;
}

// v1.2: the aclrtStream behind a runtime stream (NULL: `device`'s default stream).
tfl_status rt_native_stream(tfl_stream stream, int device, void** out) {
  if (!out) return fail(TFL_ERROR_INVALID_VALUE, "native_stream: NULL out-parameter");
  if (stream) {
    *out = stream->stream;
    return TFL_OK;
  }
  READY();
  tfl_stream_st* st = nullptr;
  if (tfl_status s = default_stream(device, &st)) return s;
  *out = st->stream;
  return TFL_OK;
}

// v1.2: presence check without torch: aclInit and the number of NPUs, or a message why not.
tfl_status rt_probe(int* count, char* msg, size_t len) {
  if (count) *count = 0;
  if (msg && len) msg[0] = '\0';
  if (!count) return fail(TFL_ERROR_INVALID_VALUE, "probe: NULL out-parameter");
  if (tfl_status s = rt_init()) {
    if (msg && len) std::snprintf(msg, len, "%s", torch_fl::kit::last_error());
    return s;
  }
  *count = g_count;
  if (g_count == 0 && msg && len) std::snprintf(msg, len, "aclrtGetDeviceCount reports no NPU");
  return TFL_OK;
}

// ---- fork ----
// A forked child has none of the parent's NPU state (the driver's, the toolkit's) nor its report
// threads, and CANN starts it uninitialised: the runtime forgets the parent's streams,
// allocations, peer access and report threads, so the child initialises afresh on first use
// (core refuses flagos in a child whose parent had used it; a parent that only probed forks
// children that can use it). Locks held by threads that did not fork are re-made, not waited
// for; the parent's objects are abandoned, never destroyed.
template <typename M>
void remake(M& m) {
  new (&m) M();
}

void after_fork_in_child() {
  remake(g_init_mutex);
  remake(g_default);
  remake(g_allocations);
  remake(g_reporter_mutex);
  remake(g_peer_mutex);
  g_ready.store(false);
  g_count = 0;
  new (&g_reporters) std::map<int, Reporter*>();
  new (&g_peer) std::map<std::pair<int, int>, bool>();
  g_stop_reporters.store(false);
  torch_fl::kit::thread_error().clear();
}

__attribute__((constructor)) void register_fork_handler() {
  pthread_atfork(nullptr, nullptr, after_fork_in_child);
}

// v1.1 IPC left out: CANN's IPC memory (aclrtIpcMemGetExportKey / aclrtIpcMemImportByKey) exists
// only in recent toolkits and, by default, opens only in processes the exporter named in advance
// (aclrtIpcMemSetImportPid), which the ABI's "any process may open the handle" does not give.
// Without it, torch.multiprocessing refuses flagos tensors, naming the device and .cpu().
constexpr std::nullptr_t rt_ipc_get_handle = nullptr;
constexpr std::nullptr_t rt_ipc_open_handle = nullptr;
constexpr std::nullptr_t rt_ipc_close_handle = nullptr;

// NPU memory is device-scoped (no host-addressable memory). aclnn ops and other kernels queued on
// one aclrtStream run in stream order, so producers need no barrier.
TFL_KIT_RUNTIME_TABLE(kTable, "aclrt",
                      TFL_CAP_PEER_COPY | TFL_CAP_EVENT_TIMING | TFL_CAP_PINNED_HOST_MEMORY);

}  // namespace

TFL_KIT_RUNTIME_ENTRY(kTable)
