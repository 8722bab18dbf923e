// libascendcl.so of the torch-fl CANN emulator: the aclrt runtime over host memory.
//
// Device memory is host memory tagged with its device; a device pointer is valid only with its
// device current (or an enabled peer, for device-to-device copies). Every stream has a worker
// thread that runs its work in order, so queued work really completes later. The contract this
// enforces is listed in ascend_emulator.h's users' tests (tests/test_emulator_runtime.py).
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "acl/acl.h"
// The emulator-only and internal entry points are exported like the CANN ones.
#pragma GCC visibility push(default)
#include "ascend_emulator.h"
#include "emu_internal.h"
#pragma GCC visibility pop

namespace {

constexpr size_t kAlign = 512;  // aclrtMalloc's address alignment
constexpr size_t kPoisonBytes = size_t{64} << 20;
constexpr const char* kSocName = "Ascend910B2";

thread_local std::string t_err;       // message of the latest failure on this thread
thread_local std::string t_err_read;  // what aclGetRecentErrMsg handed out last
thread_local int32_t t_device = -1;

void set_err(const std::string& msg) { t_err = msg; }

aclError fail(aclError code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
aclError fail(aclError code, const char* fmt, ...) {
  char buf[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  set_err(std::string(buf) + " (CANN emulator, status " + std::to_string(code) + ")");
  return code;
}

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// One device allocation. The map holds one reference and every queued work item touching it
// another, so an aclrtFree'd block stays backed until the work that still names it is done
// (it then fails instead of reading recycled memory).
struct Allocation {
  int32_t device = -1;
  uintptr_t base = 0;
  size_t bytes = 0;
  size_t accounted = 0;
  std::atomic<int> pending{0};
  std::atomic<bool> freed{false};
  ~Allocation() { std::free(reinterpret_cast<void*>(base)); }
};
using AllocRef = std::shared_ptr<Allocation>;

struct Item {
  std::string name;
  std::function<aclError(char*, size_t)> run;
  std::function<void()> cleanup;
  std::vector<AllocRef> allocs;
};

struct Stream {
  int32_t device = -1;
  int32_t priority = 0;
  bool is_default = false;
  uint64_t subscriber = 0;  // host thread of aclrtSubscribeReport (0: none)
  bool subscribed = false;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Item> queue;
  uint64_t enqueued = 0, done = 0;
  aclError error = ACL_SUCCESS;  // first asynchronous failure not yet surfaced
  std::string error_msg;
  bool stop = false;
  std::thread worker;

  void start() {
    worker = std::thread([this] { loop(); });
  }
  void push(Item it) {
    std::lock_guard<std::mutex> lk(mu);
    queue.push_back(std::move(it));
    ++enqueued;
    cv.notify_all();
  }
  void loop();
  // Waits for everything queued so far; returns (and clears) the asynchronous error.
  aclError drain(std::string* msg) {
    std::unique_lock<std::mutex> lk(mu);
    uint64_t target = enqueued;
    cv.wait(lk, [&] { return done >= target; });
    aclError e = error;
    if (e != ACL_SUCCESS) {
      *msg = error_msg;
      error = ACL_SUCCESS;
      error_msg.clear();
    }
    return e;
  }
  bool idle() {
    std::lock_guard<std::mutex> lk(mu);
    return done == enqueued;
  }
  void shutdown() {
    {
      std::lock_guard<std::mutex> lk(mu);
      stop = true;
      cv.notify_all();
    }
    if (worker.joinable()) worker.join();
  }
};
using StreamRef = std::shared_ptr<Stream>;

void Stream::loop() {
  for (;;) {
    Item it;
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] { return !queue.empty() || stop; });
      if (queue.empty()) return;
      it = std::move(queue.front());
      queue.pop_front();
    }
    char msg[768] = {0};
    aclError st = ACL_SUCCESS;
    for (const AllocRef& a : it.allocs) {
      if (a->freed.load()) {
        st = ACL_ERROR_RT_AICORE_EXCEPTION;
        if (a->device < 0)
          snprintf(msg, sizeof msg,
                   "%s read/wrote pinned host memory %p (%zu bytes) that was aclrtFreeHost'd "
                   "before the stream reached the work",
                   it.name.c_str(), reinterpret_cast<void*>(a->base), a->bytes);
        else
          snprintf(msg, sizeof msg,
                   "%s read/wrote device memory %p (%zu bytes, device %d) that was aclrtFree'd "
                   "before the stream reached the work",
                   it.name.c_str(), reinterpret_cast<void*>(a->base), a->bytes, a->device);
        break;
      }
    }
    if (st == ACL_SUCCESS && it.run) st = it.run(msg, sizeof msg);
    if (it.cleanup) it.cleanup();
    for (const AllocRef& a : it.allocs) a->pending.fetch_sub(1);
    it.allocs.clear();
    std::lock_guard<std::mutex> lk(mu);
    if (st != ACL_SUCCESS && error == ACL_SUCCESS) {
      error = st;
      char full[1024];
      snprintf(full, sizeof full, "asynchronous failure of %s on device %d: %s (status %d)",
               it.name.c_str(), device, msg[0] ? msg : "work failed", st);
      error_msg = full;
    }
    ++done;
    cv.notify_all();
  }
}

struct Event {
  uint32_t flags = 0;
  bool timing = true;
  std::mutex mu;
  std::condition_variable cv;
  bool armed = false;      // recorded since creation / the last aclrtResetEvent
  uint64_t recorded = 0;   // generation of the latest aclrtRecordEvent
  uint64_t completed = 0;  // generation the stream has passed
  uint64_t stamp_ns = 0;
  aclError error = ACL_SUCCESS;  // stream failure pending when the stream passed the record
  std::string error_msg;
};
using EventRef = std::shared_ptr<Event>;

struct Report {
  aclrtCallback fn = nullptr;
  void* data = nullptr;
  bool done = false;
};
struct Reporter {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::shared_ptr<Report>> queue;
  int streams = 0;
};
using ReporterRef = std::shared_ptr<Reporter>;

struct Device {
  int32_t id = 0;
  size_t total = 0;
  size_t used = 0;
  uint64_t live = 0;
  StreamRef default_stream;
  std::vector<bool> peer;  // peer[d]: this device may access device d's memory
};

struct Fault {
  int status = 0;
  int remaining = 0;  // < 0: every call
};

struct State {
  std::mutex mu;
  std::atomic<bool> initialized{false};
  bool ever_initialized = false;
  std::vector<Device> devices;
  std::map<uintptr_t, AllocRef> allocs;       // device allocations by base
  std::map<uintptr_t, AllocRef> host_allocs;  // aclrtMallocHost blocks (device -1)
  std::unordered_map<void*, StreamRef> streams;
  std::unordered_map<void*, EventRef> events;
  std::unordered_map<uint64_t, ReporterRef> reporters;
  // Fault injection / counters / violations have their own lock: the op libraries call
  // aclEmuInternalEnter on every entry.
  std::mutex fmu;
  std::unordered_map<std::string, Fault> faults;
  std::unordered_map<std::string, uint64_t> calls;
  uint64_t violations = 0;
  std::string last_violation;
};

// Never destroyed: stream worker threads may still be parked at process exit.
State*& state_ptr() {
  static State* s = new State();
  return s;
}
State& S() { return *state_ptr(); }

// A forked child gets no worker threads and, like a process on the real driver, none of its
// parent's devices, memory or streams: it starts uninitialised (aclInit again). The parent's
// state is abandoned, not destroyed: its locks may be held by threads that did not fork.
void after_fork_in_child() {
  state_ptr() = new State();
  t_device = -1;
  t_err.clear();
}
__attribute__((constructor)) void register_fork_handler() {
  pthread_atfork(nullptr, nullptr, after_fork_in_child);
}

size_t env_size(const char* name, size_t dflt) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  char* end = nullptr;
  unsigned long long x = std::strtoull(v, &end, 10);
  return (end && *end == '\0') ? static_cast<size_t>(x) : dflt;
}

void violation(const std::string& msg) {
  State& s = S();
  std::lock_guard<std::mutex> lk(s.fmu);
  ++s.violations;
  s.last_violation = msg;
  std::fprintf(stderr, "[CANN emulator] contract violation: %s\n", msg.c_str());
}

int enter(const char* name) {
  State& s = S();
  std::lock_guard<std::mutex> lk(s.fmu);
  ++s.calls[name];
  auto it = s.faults.find(name);
  if (it == s.faults.end() || it->second.remaining == 0) return 0;
  if (it->second.remaining > 0) --it->second.remaining;
  return it->second.status;
}

// Entry of every aclrt function: counts it, applies an injected fault, requires aclInit.
#define ACL_ENTER(name)                                                                           \
  do {                                                                                            \
    if (int injected_ = enter(name)) return fail(injected_, "%s: injected fault", name);          \
    if (!S().initialized) return fail(ACL_ERROR_UNINITIALIZE, "%s: called before aclInit", name); \
  } while (0)

// Requires a current device; `dev` gets it. Caller holds nothing.
#define ACL_NEED_DEVICE(name, dev)                                                                 \
  int32_t dev = t_device;                                                                          \
  do {                                                                                             \
    if (dev < 0)                                                                                   \
      return fail(ACL_ERROR_RT_CONTEXT_NULL, "%s: no current device (call aclrtSetDevice)", name); \
  } while (0)

bool valid_device(int32_t d) { return d >= 0 && static_cast<size_t>(d) < S().devices.size(); }

// Caller holds s.mu. The allocation whose block contains ptr (nullptr: none).
AllocRef find_alloc_locked(const void* ptr) {
  State& s = S();
  uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  auto it = s.allocs.upper_bound(p);
  if (it == s.allocs.begin()) return nullptr;
  --it;
  const AllocRef& a = it->second;
  return (p >= a->base && p < a->base + a->bytes) ? a : nullptr;
}

// Caller holds s.mu. The allocation that contains [ptr, ptr + bytes) wholly (nullptr: none);
// an empty range may sit at the end of its allocation.
AllocRef find_range_locked(const void* ptr, size_t bytes) {
  State& s = S();
  uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  auto it = s.allocs.upper_bound(p);
  if (it == s.allocs.begin()) return nullptr;
  --it;
  const AllocRef& a = it->second;
  uintptr_t end = a->base + a->bytes;
  if (p < a->base || p > end || bytes > end - p) return nullptr;
  return a;
}

// Caller holds s.mu. The aclrtMallocHost block containing [ptr, ptr + bytes) (nullptr: none).
AllocRef find_pinned_locked(const void* ptr, size_t bytes) {
  State& s = S();
  uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  auto it = s.host_allocs.upper_bound(p);
  if (it == s.host_allocs.begin()) return nullptr;
  --it;
  const AllocRef& a = it->second;
  uintptr_t end = a->base + a->bytes;
  if (p < a->base || p >= end || bytes > end - p) return nullptr;
  return a;
}

// Caller holds s.mu. Default stream of a device, created on first use.
StreamRef default_stream_locked(int32_t dev) {
  Device& d = S().devices[static_cast<size_t>(dev)];
  if (!d.default_stream) {
    d.default_stream = std::make_shared<Stream>();
    d.default_stream->device = dev;
    d.default_stream->is_default = true;
    d.default_stream->start();
  }
  return d.default_stream;
}

// Resolves a stream handle (NULL: current device's default stream); nullptr if unknown.
StreamRef lookup_stream(aclrtStream h) {
  State& s = S();
  std::lock_guard<std::mutex> lk(s.mu);
  if (h == nullptr) {
    if (t_device < 0 || !valid_device(t_device)) return nullptr;
    return default_stream_locked(t_device);
  }
  auto it = s.streams.find(h);
  return it == s.streams.end() ? nullptr : it->second;
}

EventRef lookup_event(aclrtEvent h) {
  State& s = S();
  std::lock_guard<std::mutex> lk(s.mu);
  auto it = s.events.find(h);
  return it == s.events.end() ? nullptr : it->second;
}

#define ACL_NEED_STREAM(name, var, handle)                                                      \
  StreamRef var = lookup_stream(handle);                                                        \
  do {                                                                                          \
    if (!var) {                                                                                 \
      if ((handle) == nullptr)                                                                  \
        return fail(ACL_ERROR_RT_CONTEXT_NULL,                                                  \
                    "%s: default stream needs a current device (call aclrtSetDevice)", name);   \
      return fail(ACL_ERROR_INVALID_PARAM, "%s: stream %p is not a live stream", name, handle); \
    }                                                                                           \
  } while (0)

const char* kind_name(aclrtMemcpyKind k) {
  switch (k) {
    case ACL_MEMCPY_HOST_TO_HOST:
      return "ACL_MEMCPY_HOST_TO_HOST";
    case ACL_MEMCPY_HOST_TO_DEVICE:
      return "ACL_MEMCPY_HOST_TO_DEVICE";
    case ACL_MEMCPY_DEVICE_TO_HOST:
      return "ACL_MEMCPY_DEVICE_TO_HOST";
    case ACL_MEMCPY_DEVICE_TO_DEVICE:
      return "ACL_MEMCPY_DEVICE_TO_DEVICE";
    case ACL_MEMCPY_DEFAULT:
      return "ACL_MEMCPY_DEFAULT";
  }
  return "an unknown aclrtMemcpyKind";
}

// One side of a copy: the device allocation, the pinned block of an asynchronous copy's host
// side, or nullptr (host memory of a synchronous copy).
struct Side {
  AllocRef alloc;
};

// Checks one pointer of a copy against the kind and the current device. `want_device`: the
// kind says device memory (-1: ACL_MEMCPY_DEFAULT, either). Peers count only for D2D/DEFAULT.
// The host side of an asynchronous copy must be aclrtMallocHost memory: the stream reads or
// writes it later, which pageable memory does not allow.
aclError check_side(const char* fn, const char* role, const void* p, size_t n, int want_device,
                    aclrtMemcpyKind kind, int32_t cur, bool async, Side* out) {
  State& s = S();
  std::lock_guard<std::mutex> lk(s.mu);
  AllocRef a = find_alloc_locked(p);
  if (!a) {
    // Not inside any device block: host memory (pinned or pageable).
    if (want_device == 1)
      return fail(ACL_ERROR_INVALID_PARAM,
                  "%s: %s %p is not device memory (kind %s wants a device pointer of device %d)",
                  fn, role, p, kind_name(kind), cur);
    out->alloc = nullptr;
    if (async && n > 0) {
      out->alloc = find_pinned_locked(p, n);
      if (!out->alloc)
        return fail(ACL_ERROR_INVALID_PARAM,
                    "%s: %s [%p, +%zu) is pageable host memory; an asynchronous copy needs "
                    "aclrtMallocHost memory (or use aclrtMemcpy)",
                    fn, role, p, n);
    }
    return ACL_SUCCESS;
  }
  if (want_device == 0)
    return fail(ACL_ERROR_INVALID_PARAM,
                "%s: %s %p is device memory of device %d but kind %s wants host memory", fn, role,
                p, a->device, kind_name(kind));
  if (n > a->base + a->bytes - reinterpret_cast<uintptr_t>(p))
    return fail(ACL_ERROR_INVALID_PARAM,
                "%s: %s range [%p, +%zu) overruns its allocation of %zu bytes at %p (device %d)",
                fn, role, p, n, a->bytes, reinterpret_cast<void*>(a->base), a->device);
  if (a->device != cur) {
    bool d2d = kind == ACL_MEMCPY_DEVICE_TO_DEVICE || kind == ACL_MEMCPY_DEFAULT;
    if (!d2d)
      return fail(ACL_ERROR_INVALID_PARAM,
                  "%s: %s %p belongs to device %d but device %d is current", fn, role, p, a->device,
                  cur);
    if (!s.devices[static_cast<size_t>(cur)].peer[static_cast<size_t>(a->device)])
      return fail(ACL_ERROR_INVALID_PARAM,
                  "%s: %s %p belongs to device %d; device %d (current) has not enabled peer "
                  "access to it (aclrtDeviceEnablePeerAccess)",
                  fn, role, p, a->device, cur);
  }
  out->alloc = a;
  return ACL_SUCCESS;
}

aclError check_copy(const char* fn, void* dst, size_t destMax, const void* src, size_t count,
                    aclrtMemcpyKind kind, int32_t cur, bool async, Side* d, Side* sside) {
  if (dst == nullptr || src == nullptr)
    return fail(ACL_ERROR_INVALID_PARAM, "%s: %s is NULL", fn, dst ? "src" : "dst");
  if (count > destMax)
    return fail(ACL_ERROR_INVALID_PARAM, "%s: count %zu exceeds destMax %zu", fn, count, destMax);
  int want_dst, want_src;
  switch (kind) {
    case ACL_MEMCPY_HOST_TO_HOST:
      want_dst = 0, want_src = 0;
      break;
    case ACL_MEMCPY_HOST_TO_DEVICE:
      want_dst = 1, want_src = 0;
      break;
    case ACL_MEMCPY_DEVICE_TO_HOST:
      want_dst = 0, want_src = 1;
      break;
    case ACL_MEMCPY_DEVICE_TO_DEVICE:
      want_dst = 1, want_src = 1;
      break;
    case ACL_MEMCPY_DEFAULT:
      want_dst = -1, want_src = -1;
      break;
    default:
      return fail(ACL_ERROR_INVALID_PARAM, "%s: kind %d is not an aclrtMemcpyKind", fn,
                  static_cast<int>(kind));
  }
  aclError e = check_side(fn, "dst", dst, count, want_dst, kind, cur, async, d);
  if (e != ACL_SUCCESS) return e;
  return check_side(fn, "src", src, count, want_src, kind, cur, async, sside);
}

aclError check_memset(const char* fn, void* p, size_t maxCount, size_t count, int32_t cur,
                      Side* out) {
  if (p == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "%s: devPtr is NULL", fn);
  if (count > maxCount)
    return fail(ACL_ERROR_INVALID_PARAM, "%s: count %zu exceeds maxCount %zu", fn, count, maxCount);
  return check_side(fn, "devPtr", p, count, 1, ACL_MEMCPY_HOST_TO_DEVICE, cur, false, out);
}

// Queues an item whose allocations were already validated; pins them.
void enqueue(const StreamRef& st, Item it) {
  for (const AllocRef& a : it.allocs) a->pending.fetch_add(1);
  st->push(std::move(it));
}

aclError surface(const char* fn, aclError e, const std::string& msg) {
  if (e == ACL_SUCCESS) return e;
  set_err(std::string(fn) + ": " + msg + " (CANN emulator)");
  return e;
}

aclError sync_stream(const char* fn, const StreamRef& st) {
  std::string msg;
  aclError e = st->drain(&msg);
  return surface(fn, e, msg);
}

}  // namespace

extern "C" {

// ---------------------------------------------------------------- init, errors

aclError aclInit(const char* configPath) {
  State& s = S();
  if (int injected = enter("aclInit")) return fail(injected, "aclInit: injected fault");
  std::lock_guard<std::mutex> lk(s.mu);
  if (s.initialized)
    return fail(ACL_ERROR_REPEAT_INITIALIZE, "aclInit: already initialised in this process");
  if (configPath != nullptr && configPath[0] != '\0' && access(configPath, R_OK) != 0)
    return fail(ACL_ERROR_INVALID_FILE, "aclInit: config file '%s' cannot be read", configPath);
  if (!s.ever_initialized) {
    size_t n = env_size("ASCEND_EMU_DEVICES", 2);
    size_t mb = env_size("ASCEND_EMU_MEMORY_MB", 4096);
    s.devices.resize(n);
    for (size_t i = 0; i < n; ++i) {
      s.devices[i].id = static_cast<int32_t>(i);
      s.devices[i].total = mb << 20;
      s.devices[i].peer.assign(n, false);
    }
    s.ever_initialized = true;
  }
  s.initialized = true;
  return ACL_SUCCESS;
}

aclError aclFinalize() {
  ACL_ENTER("aclFinalize");
  State& s = S();
  std::vector<StreamRef> all;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    for (auto& kv : s.streams) all.push_back(kv.second);
    for (Device& d : s.devices)
      if (d.default_stream) all.push_back(d.default_stream);
  }
  std::string ignored;
  for (const StreamRef& st : all) st->drain(&ignored);
  std::lock_guard<std::mutex> lk(s.mu);
  s.initialized = false;
  return ACL_SUCCESS;
}

aclError aclrtGetVersion(int32_t* majorVersion, int32_t* minorVersion, int32_t* patchVersion) {
  if (int injected = enter("aclrtGetVersion"))
    return fail(injected, "aclrtGetVersion: injected fault");
  if (!majorVersion || !minorVersion || !patchVersion)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetVersion: NULL output");
  *majorVersion = ACL_MAJOR_VERSION;
  *minorVersion = ACL_MINOR_VERSION;
  *patchVersion = ACL_PATCH_VERSION;
  return ACL_SUCCESS;
}

// Each message is handed out once (CANN clears it when read).
const char* aclGetRecentErrMsg() {
  if (t_err.empty()) return nullptr;
  t_err_read = std::move(t_err);
  t_err.clear();
  return t_err_read.c_str();
}

size_t aclDataTypeSize(aclDataType dataType) {
  switch (dataType) {
    case ACL_BOOL:
    case ACL_INT8:
    case ACL_UINT8:
      return 1;
    case ACL_FLOAT16:
    case ACL_BF16:
    case ACL_INT16:
    case ACL_UINT16:
      return 2;
    case ACL_FLOAT:
    case ACL_INT32:
    case ACL_UINT32:
    case ACL_COMPLEX32:
      return 4;
    case ACL_INT64:
    case ACL_UINT64:
    case ACL_DOUBLE:
    case ACL_COMPLEX64:
      return 8;
    case ACL_COMPLEX128:
      return 16;
    default:
      return 0;
  }
}

// ---------------------------------------------------------------- devices

aclError aclrtGetDeviceCount(uint32_t* count) {
  ACL_ENTER("aclrtGetDeviceCount");
  if (!count) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDeviceCount: count is NULL");
  if (S().devices.empty())
    return fail(ACL_ERROR_RT_NO_DEVICE, "aclrtGetDeviceCount: no NPU (ASCEND_EMU_DEVICES=0)");
  *count = static_cast<uint32_t>(S().devices.size());
  return ACL_SUCCESS;
}

aclError aclrtSetDevice(int32_t deviceId) {
  ACL_ENTER("aclrtSetDevice");
  if (!valid_device(deviceId))
    return fail(ACL_ERROR_RT_INVALID_DEVICEID,
                "aclrtSetDevice: device %d does not exist (%zu NPUs)", deviceId,
                S().devices.size());
  t_device = deviceId;
  std::lock_guard<std::mutex> lk(S().mu);
  default_stream_locked(deviceId);
  return ACL_SUCCESS;
}

aclError aclrtGetDevice(int32_t* deviceId) {
  ACL_ENTER("aclrtGetDevice");
  if (!deviceId) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDevice: deviceId is NULL");
  if (t_device < 0)
    return fail(ACL_ERROR_RT_CONTEXT_NULL, "aclrtGetDevice: no current device on this thread");
  *deviceId = t_device;
  return ACL_SUCCESS;
}

aclError aclrtResetDevice(int32_t deviceId) {
  ACL_ENTER("aclrtResetDevice");
  if (!valid_device(deviceId))
    return fail(ACL_ERROR_RT_INVALID_DEVICEID, "aclrtResetDevice: device %d does not exist",
                deviceId);
  std::vector<StreamRef> mine;
  {
    std::lock_guard<std::mutex> lk(S().mu);
    for (auto& kv : S().streams)
      if (kv.second->device == deviceId) mine.push_back(kv.second);
    if (S().devices[static_cast<size_t>(deviceId)].default_stream)
      mine.push_back(S().devices[static_cast<size_t>(deviceId)].default_stream);
  }
  std::string ignored;
  for (const StreamRef& st : mine) st->drain(&ignored);
  if (t_device == deviceId) t_device = -1;
  return ACL_SUCCESS;
}

aclError aclrtSynchronizeDevice(void) {
  ACL_ENTER("aclrtSynchronizeDevice");
  ACL_NEED_DEVICE("aclrtSynchronizeDevice", dev);
  std::vector<StreamRef> mine;
  {
    std::lock_guard<std::mutex> lk(S().mu);
    mine.push_back(default_stream_locked(dev));
    for (auto& kv : S().streams)
      if (kv.second->device == dev) mine.push_back(kv.second);
  }
  aclError first = ACL_SUCCESS;
  std::string first_msg;
  for (const StreamRef& st : mine) {
    std::string msg;
    aclError e = st->drain(&msg);
    if (e != ACL_SUCCESS && first == ACL_SUCCESS) first = e, first_msg = msg;
  }
  return surface("aclrtSynchronizeDevice", first, first_msg);
}

aclError aclrtGetRunMode(aclrtRunMode* runMode) {
  ACL_ENTER("aclrtGetRunMode");
  if (!runMode) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetRunMode: runMode is NULL");
  *runMode = ACL_HOST;
  return ACL_SUCCESS;
}

const char* aclrtGetSocName() {
  if (enter("aclrtGetSocName") != 0 || !S().initialized) return nullptr;
  return kSocName;
}

aclError aclrtDeviceCanAccessPeer(int32_t* canAccessPeer, int32_t deviceId, int32_t peerDeviceId) {
  ACL_ENTER("aclrtDeviceCanAccessPeer");
  if (!canAccessPeer)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtDeviceCanAccessPeer: canAccessPeer is NULL");
  if (!valid_device(deviceId) || !valid_device(peerDeviceId))
    return fail(ACL_ERROR_RT_INVALID_DEVICEID,
                "aclrtDeviceCanAccessPeer: device %d or peer %d does not exist", deviceId,
                peerDeviceId);
  if (deviceId == peerDeviceId)
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtDeviceCanAccessPeer: deviceId and peerDeviceId are both %d", deviceId);
  *canAccessPeer = 1;
  return ACL_SUCCESS;
}

aclError aclrtDeviceEnablePeerAccess(int32_t peerDeviceId, uint32_t flags) {
  ACL_ENTER("aclrtDeviceEnablePeerAccess");
  ACL_NEED_DEVICE("aclrtDeviceEnablePeerAccess", dev);
  if (flags != 0)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtDeviceEnablePeerAccess: flags must be 0, got %u",
                flags);
  if (!valid_device(peerDeviceId) || peerDeviceId == dev)
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtDeviceEnablePeerAccess: peer %d is not another device (current %d)",
                peerDeviceId, dev);
  std::lock_guard<std::mutex> lk(S().mu);
  S().devices[static_cast<size_t>(dev)].peer[static_cast<size_t>(peerDeviceId)] = true;
  return ACL_SUCCESS;
}

aclError aclrtDeviceDisablePeerAccess(int32_t peerDeviceId) {
  ACL_ENTER("aclrtDeviceDisablePeerAccess");
  ACL_NEED_DEVICE("aclrtDeviceDisablePeerAccess", dev);
  std::lock_guard<std::mutex> lk(S().mu);
  if (!valid_device(peerDeviceId) ||
      !S().devices[static_cast<size_t>(dev)].peer[static_cast<size_t>(peerDeviceId)])
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtDeviceDisablePeerAccess: device %d has no peer access to %d enabled", dev,
                peerDeviceId);
  S().devices[static_cast<size_t>(dev)].peer[static_cast<size_t>(peerDeviceId)] = false;
  return ACL_SUCCESS;
}

aclError aclrtDeviceGetStreamPriorityRange(int32_t* leastPriority, int32_t* greatestPriority) {
  ACL_ENTER("aclrtDeviceGetStreamPriorityRange");
  if (!leastPriority || !greatestPriority)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtDeviceGetStreamPriorityRange: NULL output");
  *leastPriority = 7;
  *greatestPriority = 0;
  return ACL_SUCCESS;
}

// The context of a device is its Device record; setting one makes that device current.
aclError aclrtGetCurrentContext(aclrtContext* context) {
  ACL_ENTER("aclrtGetCurrentContext");
  if (!context) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetCurrentContext: context is NULL");
  if (t_device < 0)
    return fail(ACL_ERROR_RT_CONTEXT_NULL, "aclrtGetCurrentContext: no current context");
  *context = &S().devices[static_cast<size_t>(t_device)];
  return ACL_SUCCESS;
}

aclError aclrtSetCurrentContext(aclrtContext context) {
  ACL_ENTER("aclrtSetCurrentContext");
  for (Device& d : S().devices) {
    if (&d == context) {
      t_device = d.id;
      return ACL_SUCCESS;
    }
  }
  return fail(ACL_ERROR_INVALID_PARAM, "aclrtSetCurrentContext: %p is not a context", context);
}

// ---------------------------------------------------------------- memory

aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy) {
  ACL_ENTER("aclrtMalloc");
  ACL_NEED_DEVICE("aclrtMalloc", dev);
  if (!devPtr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: devPtr is NULL");
  if (size == 0) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: size is 0");
  unsigned base_policy = static_cast<unsigned>(policy) & 0xFFu;
  unsigned band = static_cast<unsigned>(policy) & ~0xFFu;
  if (base_policy > ACL_MEM_MALLOC_NORMAL_ONLY_P2P ||
      (band != 0 && band != ACL_MEM_TYPE_LOW_BAND_WIDTH && band != ACL_MEM_TYPE_HIGH_BAND_WIDTH))
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: policy %d is not an aclrtMemMallocPolicy",
                static_cast<int>(policy));
  size_t accounted = (size + kAlign - 1) / kAlign * kAlign;
  State& s = S();
  {
    std::lock_guard<std::mutex> lk(s.mu);
    Device& d = s.devices[static_cast<size_t>(dev)];
    if (accounted > d.total - d.used)
      return fail(ACL_ERROR_RT_MEMORY_ALLOCATION,
                  "aclrtMalloc: out of memory on device %d: %zu bytes asked, %zu of %zu free", dev,
                  size, d.total - d.used, d.total);
    d.used += accounted;
    d.live += 1;
  }
  void* p = nullptr;
  if (posix_memalign(&p, kAlign, accounted) != 0) {
    std::lock_guard<std::mutex> lk(s.mu);
    s.devices[static_cast<size_t>(dev)].used -= accounted;
    s.devices[static_cast<size_t>(dev)].live -= 1;
    return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtMalloc: host backing of %zu bytes failed",
                size);
  }
  // Fresh device memory is not zero on hardware: poison it so readers of unwritten memory see
  // garbage rather than a lucky 0. Capped, so that a large reservation (a caching allocator's
  // segment) does not commit all of its host pages up front.
  std::memset(p, 0xA5, std::min(accounted, kPoisonBytes));
  auto a = std::make_shared<Allocation>();
  a->device = dev;
  a->base = reinterpret_cast<uintptr_t>(p);
  a->bytes = size;
  a->accounted = accounted;
  std::lock_guard<std::mutex> lk(s.mu);
  s.allocs[a->base] = a;
  *devPtr = p;
  return ACL_SUCCESS;
}

aclError aclrtFree(void* devPtr) {
  ACL_ENTER("aclrtFree");
  ACL_NEED_DEVICE("aclrtFree", dev);
  if (!devPtr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtFree: devPtr is NULL");
  State& s = S();
  AllocRef a;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    auto it = s.allocs.find(reinterpret_cast<uintptr_t>(devPtr));
    if (it == s.allocs.end()) {
      AllocRef inner = find_alloc_locked(devPtr);
      if (inner)
        return fail(ACL_ERROR_INVALID_PARAM,
                    "aclrtFree: %p is inside the allocation at %p (device %d), not its start",
                    devPtr, reinterpret_cast<void*>(inner->base), inner->device);
      return fail(ACL_ERROR_INVALID_PARAM,
                  "aclrtFree: %p is not a live device allocation (double free or host memory)",
                  devPtr);
    }
    a = it->second;
    if (a->device != dev)
      return fail(ACL_ERROR_INVALID_PARAM,
                  "aclrtFree: %p belongs to device %d but device %d is current", devPtr, a->device,
                  dev);
    s.allocs.erase(it);
    Device& d = s.devices[static_cast<size_t>(dev)];
    d.used -= a->accounted;
    d.live -= 1;
    a->freed.store(true);
  }
  if (a->pending.load() > 0) {
    char buf[512];
    snprintf(buf, sizeof buf,
             "aclrtFree(%p) on device %d while %d queued work item(s) still use it: the memory "
             "must outlive the work (record an event / synchronize the stream first)",
             devPtr, dev, a->pending.load());
    violation(buf);
  }
  return ACL_SUCCESS;
}

aclError aclrtMallocHost(void** hostPtr, size_t size) {
  ACL_ENTER("aclrtMallocHost");
  ACL_NEED_DEVICE("aclrtMallocHost", dev);  // pinned memory is mapped through a device context
  (void)dev;
  if (!hostPtr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: hostPtr is NULL");
  if (size == 0) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: size is 0");
  void* p = nullptr;
  if (posix_memalign(&p, 64, size) != 0)
    return fail(ACL_ERROR_BAD_ALLOC, "aclrtMallocHost: %zu bytes failed", size);
  auto a = std::make_shared<Allocation>();
  a->base = reinterpret_cast<uintptr_t>(p);
  a->bytes = a->accounted = size;
  std::lock_guard<std::mutex> lk(S().mu);
  S().host_allocs[a->base] = a;
  *hostPtr = p;
  return ACL_SUCCESS;
}

aclError aclrtFreeHost(void* hostPtr) {
  ACL_ENTER("aclrtFreeHost");
  AllocRef a;
  {
    std::lock_guard<std::mutex> lk(S().mu);
    auto it = S().host_allocs.find(reinterpret_cast<uintptr_t>(hostPtr));
    if (it == S().host_allocs.end())
      return fail(ACL_ERROR_INVALID_PARAM, "aclrtFreeHost: %p is not an aclrtMallocHost block",
                  hostPtr);
    a = it->second;
    S().host_allocs.erase(it);
    a->freed.store(true);
  }
  // The block itself goes when the last queued copy naming it is done.
  if (a->pending.load() > 0) {
    char buf[512];
    snprintf(buf, sizeof buf,
             "aclrtFreeHost(%p) while %d queued asynchronous copy(ies) still use it: pinned "
             "memory must outlive the copy (record an event / synchronize the stream first)",
             hostPtr, a->pending.load());
    violation(buf);
  }
  return ACL_SUCCESS;
}

aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t* free, size_t* total) {
  ACL_ENTER("aclrtGetMemInfo");
  ACL_NEED_DEVICE("aclrtGetMemInfo", dev);
  if (!free || !total) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo: NULL output");
  if (attr < ACL_DDR_MEM || attr > ACL_HBM_MEM_P2P_NORMAL)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo: attr %d is not an aclrtMemAttr",
                static_cast<int>(attr));
  bool hbm = attr == ACL_HBM_MEM || attr == ACL_HBM_MEM_HUGE || attr == ACL_HBM_MEM_NORMAL ||
             attr == ACL_HBM_MEM_P2P_HUGE || attr == ACL_HBM_MEM_P2P_NORMAL;
  std::lock_guard<std::mutex> lk(S().mu);
  const Device& d = S().devices[static_cast<size_t>(dev)];
  // The emulated NPU (a 910B) has HBM only.
  *total = hbm ? d.total : 0;
  *free = hbm ? d.total - d.used : 0;
  return ACL_SUCCESS;
}

aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count,
                     aclrtMemcpyKind kind) {
  ACL_ENTER("aclrtMemcpy");
  ACL_NEED_DEVICE("aclrtMemcpy", dev);
  Side d, s;
  aclError e = check_copy("aclrtMemcpy", dst, destMax, src, count, kind, dev, false, &d, &s);
  if (e != ACL_SUCCESS) return e;
  // Synchronous with respect to the host only: queued stream work is not waited for.
  if (count) std::memmove(dst, src, count);
  return ACL_SUCCESS;
}

aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src, size_t count,
                          aclrtMemcpyKind kind, aclrtStream stream) {
  ACL_ENTER("aclrtMemcpyAsync");
  ACL_NEED_DEVICE("aclrtMemcpyAsync", dev);
  ACL_NEED_STREAM("aclrtMemcpyAsync", st, stream);
  if (st->device != dev)
    return fail(ACL_ERROR_RT_STREAM_CONTEXT,
                "aclrtMemcpyAsync: stream %p belongs to device %d but device %d is current", stream,
                st->device, dev);
  Side d, s;
  aclError e = check_copy("aclrtMemcpyAsync", dst, destMax, src, count, kind, dev, true, &d, &s);
  if (e != ACL_SUCCESS) return e;
  Item it;
  it.name = "aclrtMemcpyAsync";
  it.run = [dst, src, count](char*, size_t) {
    if (count) std::memmove(dst, src, count);
    return ACL_SUCCESS;
  };
  if (d.alloc) it.allocs.push_back(d.alloc);
  if (s.alloc) it.allocs.push_back(s.alloc);
  enqueue(st, std::move(it));
  return ACL_SUCCESS;
}

aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value, size_t count) {
  ACL_ENTER("aclrtMemset");
  ACL_NEED_DEVICE("aclrtMemset", dev);
  Side d;
  aclError e = check_memset("aclrtMemset", devPtr, maxCount, count, dev, &d);
  if (e != ACL_SUCCESS) return e;
  if (count) std::memset(devPtr, value, count);
  return ACL_SUCCESS;
}

aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value, size_t count,
                          aclrtStream stream) {
  ACL_ENTER("aclrtMemsetAsync");
  ACL_NEED_DEVICE("aclrtMemsetAsync", dev);
  ACL_NEED_STREAM("aclrtMemsetAsync", st, stream);
  if (st->device != dev)
    return fail(ACL_ERROR_RT_STREAM_CONTEXT,
                "aclrtMemsetAsync: stream %p belongs to device %d but device %d is current", stream,
                st->device, dev);
  Side d;
  aclError e = check_memset("aclrtMemsetAsync", devPtr, maxCount, count, dev, &d);
  if (e != ACL_SUCCESS) return e;
  Item it;
  it.name = "aclrtMemsetAsync";
  it.run = [devPtr, value, count](char*, size_t) {
    if (count) std::memset(devPtr, value, count);
    return ACL_SUCCESS;
  };
  it.allocs.push_back(d.alloc);
  enqueue(st, std::move(it));
  return ACL_SUCCESS;
}

// ---------------------------------------------------------------- streams

aclError aclrtCreateStreamWithConfig(aclrtStream* stream, uint32_t priority, uint32_t flag) {
  ACL_ENTER("aclrtCreateStreamWithConfig");
  ACL_NEED_DEVICE("aclrtCreateStreamWithConfig", dev);
  if (!stream) return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateStreamWithConfig: stream is NULL");
  if (priority > 7)
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtCreateStreamWithConfig: priority %u outside [0 (greatest), 7]", priority);
  if (flag & ~(ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC))
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateStreamWithConfig: unknown flag 0x%x", flag);
  auto st = std::make_shared<Stream>();
  st->device = dev;
  st->priority = static_cast<int32_t>(priority);
  st->start();
  std::lock_guard<std::mutex> lk(S().mu);
  S().streams[st.get()] = st;
  *stream = st.get();
  return ACL_SUCCESS;
}

aclError aclrtCreateStream(aclrtStream* stream) {
  ACL_ENTER("aclrtCreateStream");
  ACL_NEED_DEVICE("aclrtCreateStream", dev);
  if (!stream) return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateStream: stream is NULL");
  auto st = std::make_shared<Stream>();
  st->device = dev;
  st->start();
  std::lock_guard<std::mutex> lk(S().mu);
  S().streams[st.get()] = st;
  *stream = st.get();
  return ACL_SUCCESS;
}

aclError aclrtDestroyStream(aclrtStream stream) {
  ACL_ENTER("aclrtDestroyStream");
  if (stream == nullptr)
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtDestroyStream: the default stream is not destroyable");
  StreamRef st;
  {
    std::lock_guard<std::mutex> lk(S().mu);
    auto it = S().streams.find(stream);
    if (it == S().streams.end())
      return fail(ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream: %p is not a live stream", stream);
    st = it->second;
    S().streams.erase(it);
  }
  // Queued work still runs to completion first.
  std::string ignored;
  st->drain(&ignored);
  st->shutdown();
  return ACL_SUCCESS;
}

aclError aclrtSynchronizeStream(aclrtStream stream) {
  ACL_ENTER("aclrtSynchronizeStream");
  ACL_NEED_STREAM("aclrtSynchronizeStream", st, stream);
  return sync_stream("aclrtSynchronizeStream", st);
}

aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus* status) {
  ACL_ENTER("aclrtStreamQuery");
  if (!status) return fail(ACL_ERROR_INVALID_PARAM, "aclrtStreamQuery: status is NULL");
  ACL_NEED_STREAM("aclrtStreamQuery", st, stream);
  *status = st->idle() ? ACL_STREAM_STATUS_COMPLETE : ACL_STREAM_STATUS_NOT_READY;
  return ACL_SUCCESS;
}

aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
  ACL_ENTER("aclrtStreamWaitEvent");
  ACL_NEED_STREAM("aclrtStreamWaitEvent", st, stream);
  EventRef ev = lookup_event(event);
  if (!ev)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtStreamWaitEvent: %p is not a live event", event);
  uint64_t gen;
  {
    std::lock_guard<std::mutex> lk(ev->mu);
    gen = ev->armed ? ev->recorded : 0;
  }
  if (gen == 0) return ACL_SUCCESS;  // not recorded: nothing to wait for
  Item it;
  it.name = "aclrtStreamWaitEvent";
  it.run = [ev, gen](char*, size_t) {
    std::unique_lock<std::mutex> lk(ev->mu);
    ev->cv.wait(lk, [&] { return ev->completed >= gen; });
    return ACL_SUCCESS;
  };
  enqueue(st, std::move(it));
  return ACL_SUCCESS;
}

// ---------------------------------------------------------------- events

aclError aclrtCreateEventWithFlag(aclrtEvent* event, uint32_t flag) {
  ACL_ENTER("aclrtCreateEventWithFlag");
  if (!event) return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateEventWithFlag: event is NULL");
  if (flag & ~(ACL_EVENT_SYNC | ACL_EVENT_CAPTURE_STREAM_PROGRESS | ACL_EVENT_TIME_LINE))
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateEventWithFlag: unknown flag 0x%x", flag);
  auto ev = std::make_shared<Event>();
  ev->flags = flag;
  ev->timing = (flag & ACL_EVENT_TIME_LINE) != 0;
  std::lock_guard<std::mutex> lk(S().mu);
  S().events[ev.get()] = ev;
  *event = ev.get();
  return ACL_SUCCESS;
}

aclError aclrtCreateEvent(aclrtEvent* event) {
  ACL_ENTER("aclrtCreateEvent");
  if (!event) return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateEvent: event is NULL");
  auto ev = std::make_shared<Event>();
  ev->timing = true;  // the default event carries a timestamp
  std::lock_guard<std::mutex> lk(S().mu);
  S().events[ev.get()] = ev;
  *event = ev.get();
  return ACL_SUCCESS;
}

aclError aclrtDestroyEvent(aclrtEvent event) {
  ACL_ENTER("aclrtDestroyEvent");
  std::lock_guard<std::mutex> lk(S().mu);
  // Queued records / waits hold their own reference, so destroying early is safe.
  if (S().events.erase(event) == 0)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtDestroyEvent: %p is not a live event", event);
  return ACL_SUCCESS;
}

aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
  ACL_ENTER("aclrtRecordEvent");
  EventRef ev = lookup_event(event);
  if (!ev) return fail(ACL_ERROR_INVALID_PARAM, "aclrtRecordEvent: %p is not a live event", event);
  ACL_NEED_STREAM("aclrtRecordEvent", st, stream);
  uint64_t gen;
  {
    std::lock_guard<std::mutex> lk(ev->mu);
    gen = ++ev->recorded;
    ev->armed = true;
  }
  Stream* raw = st.get();
  Item it;
  it.name = "aclrtRecordEvent";
  it.run = [ev, gen, raw](char*, size_t) {
    aclError pending;
    std::string msg;
    {
      std::lock_guard<std::mutex> lk(raw->mu);
      pending = raw->error;
      msg = raw->error_msg;
    }
    std::lock_guard<std::mutex> lk(ev->mu);
    if (gen > ev->completed) {
      ev->completed = gen;
      ev->stamp_ns = now_ns();
      ev->error = pending;
      ev->error_msg = msg;
    }
    ev->cv.notify_all();
    return ACL_SUCCESS;
  };
  enqueue(st, std::move(it));
  return ACL_SUCCESS;
}

aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream) {
  ACL_ENTER("aclrtResetEvent");
  EventRef ev = lookup_event(event);
  if (!ev) return fail(ACL_ERROR_INVALID_PARAM, "aclrtResetEvent: %p is not a live event", event);
  ACL_NEED_STREAM("aclrtResetEvent", st, stream);
  std::lock_guard<std::mutex> lk(ev->mu);
  ev->armed = false;
  ev->error = ACL_SUCCESS;
  ev->cv.notify_all();
  return ACL_SUCCESS;
}

namespace {
bool event_complete(const EventRef& ev) {
  std::lock_guard<std::mutex> lk(ev->mu);
  return ev->armed && ev->completed >= ev->recorded;
}
}  // namespace

aclError aclrtQueryEvent(aclrtEvent event, aclrtEventStatus* status) {
  ACL_ENTER("aclrtQueryEvent");
  if (!status) return fail(ACL_ERROR_INVALID_PARAM, "aclrtQueryEvent: status is NULL");
  EventRef ev = lookup_event(event);
  if (!ev) return fail(ACL_ERROR_INVALID_PARAM, "aclrtQueryEvent: %p is not a live event", event);
  *status = event_complete(ev) ? ACL_EVENT_STATUS_COMPLETE : ACL_EVENT_STATUS_NOT_READY;
  return ACL_SUCCESS;
}

aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus* status) {
  ACL_ENTER("aclrtQueryEventStatus");
  if (!status) return fail(ACL_ERROR_INVALID_PARAM, "aclrtQueryEventStatus: status is NULL");
  EventRef ev = lookup_event(event);
  if (!ev)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtQueryEventStatus: %p is not a live event", event);
  // A never-recorded event has not been recorded-complete: NOT_READY (0).
  *status =
      event_complete(ev) ? ACL_EVENT_RECORDED_STATUS_COMPLETE : ACL_EVENT_RECORDED_STATUS_NOT_READY;
  return ACL_SUCCESS;
}

aclError aclrtSynchronizeEvent(aclrtEvent event) {
  ACL_ENTER("aclrtSynchronizeEvent");
  EventRef ev = lookup_event(event);
  if (!ev)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtSynchronizeEvent: %p is not a live event", event);
  std::unique_lock<std::mutex> lk(ev->mu);
  if (!ev->armed) return ACL_SUCCESS;
  uint64_t gen = ev->recorded;
  ev->cv.wait(lk, [&] { return ev->completed >= gen; });
  if (ev->error != ACL_SUCCESS) return surface("aclrtSynchronizeEvent", ev->error, ev->error_msg);
  return ACL_SUCCESS;
}

aclError aclrtEventElapsedTime(float* ms, aclrtEvent startEvent, aclrtEvent endEvent) {
  ACL_ENTER("aclrtEventElapsedTime");
  if (!ms) return fail(ACL_ERROR_INVALID_PARAM, "aclrtEventElapsedTime: ms is NULL");
  EventRef a = lookup_event(startEvent), b = lookup_event(endEvent);
  if (!a || !b)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtEventElapsedTime: %p is not a live event",
                a ? endEvent : startEvent);
  if (!a->timing || !b->timing)
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtEventElapsedTime: both events need timestamps (aclrtCreateEvent or "
                "ACL_EVENT_TIME_LINE)");
  if (!event_complete(a) || !event_complete(b))
    return fail(ACL_ERROR_RT_EVENT_NOT_COMPLETE,
                "aclrtEventElapsedTime: %s event not recorded or not yet complete",
                event_complete(a) ? "end" : "start");
  uint64_t t0, t1;
  {
    std::lock_guard<std::mutex> lk(a->mu);
    t0 = a->stamp_ns;
  }
  {
    std::lock_guard<std::mutex> lk(b->mu);
    t1 = b->stamp_ns;
  }
  *ms = static_cast<float>((static_cast<double>(t1) - static_cast<double>(t0)) / 1e6);
  return ACL_SUCCESS;
}

// ---------------------------------------------------------------- host callbacks

aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream) {
  ACL_ENTER("aclrtSubscribeReport");
  ACL_NEED_STREAM("aclrtSubscribeReport", st, stream);
  std::lock_guard<std::mutex> lk(S().mu);
  if (st->subscribed)
    return fail(ACL_ERROR_RT_STREAM_SUBSCRIBE,
                "aclrtSubscribeReport: stream %p already has a subscribed thread", stream);
  ReporterRef& r = S().reporters[threadId];
  if (!r) r = std::make_shared<Reporter>();
  r->streams += 1;
  st->subscriber = threadId;
  st->subscribed = true;
  return ACL_SUCCESS;
}

aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream) {
  ACL_ENTER("aclrtUnSubscribeReport");
  ACL_NEED_STREAM("aclrtUnSubscribeReport", st, stream);
  std::lock_guard<std::mutex> lk(S().mu);
  if (!st->subscribed || st->subscriber != threadId)
    return fail(ACL_ERROR_RT_STREAM_SUBSCRIBE,
                "aclrtUnSubscribeReport: thread %llu is not subscribed to stream %p",
                static_cast<unsigned long long>(threadId), stream);
  st->subscribed = false;
  auto it = S().reporters.find(threadId);
  if (it != S().reporters.end() && --it->second->streams == 0) S().reporters.erase(it);
  return ACL_SUCCESS;
}

aclError aclrtLaunchCallback(aclrtCallback fn, void* userData, aclrtCallbackBlockType blockType,
                             aclrtStream stream) {
  ACL_ENTER("aclrtLaunchCallback");
  if (!fn) return fail(ACL_ERROR_INVALID_PARAM, "aclrtLaunchCallback: fn is NULL");
  if (blockType != ACL_CALLBACK_NO_BLOCK && blockType != ACL_CALLBACK_BLOCK)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtLaunchCallback: blockType %d unknown",
                static_cast<int>(blockType));
  ACL_NEED_STREAM("aclrtLaunchCallback", st, stream);
  ReporterRef r;
  {
    std::lock_guard<std::mutex> lk(S().mu);
    if (st->subscribed) r = S().reporters[st->subscriber];
  }
  if (!r)
    return fail(ACL_ERROR_RT_STREAM_NO_CB_REG,
                "aclrtLaunchCallback: no thread subscribed to stream %p (aclrtSubscribeReport)",
                stream);
  bool block = blockType == ACL_CALLBACK_BLOCK;
  Item it;
  it.name = "aclrtLaunchCallback";
  it.run = [r, fn, userData, block](char*, size_t) {
    auto rep = std::make_shared<Report>();
    rep->fn = fn;
    rep->data = userData;
    std::unique_lock<std::mutex> lk(r->mu);
    r->queue.push_back(rep);
    r->cv.notify_all();
    // BLOCK: later work on this stream waits for the host to have run the callback.
    if (block) r->cv.wait(lk, [&] { return rep->done; });
    return ACL_SUCCESS;
  };
  enqueue(st, std::move(it));
  return ACL_SUCCESS;
}

aclError aclrtProcessReport(int32_t timeout) {
  ACL_ENTER("aclrtProcessReport");
  if (timeout < -1)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtProcessReport: timeout %d (ms, -1 = forever)",
                timeout);
  uint64_t self = static_cast<uint64_t>(pthread_self());
  ReporterRef r;
  {
    std::lock_guard<std::mutex> lk(S().mu);
    auto it = S().reporters.find(self);
    if (it != S().reporters.end()) r = it->second;
  }
  if (!r)
    return fail(ACL_ERROR_RT_THREAD_SUBSCRIBE,
                "aclrtProcessReport: the calling thread is subscribed to no stream");
  std::shared_ptr<Report> rep;
  {
    std::unique_lock<std::mutex> lk(r->mu);
    auto ready = [&] { return !r->queue.empty(); };
    if (timeout < 0) {
      r->cv.wait(lk, ready);
    } else if (!r->cv.wait_for(lk, std::chrono::milliseconds(timeout), ready)) {
      return fail(ACL_ERROR_RT_REPORT_TIMEOUT, "aclrtProcessReport: no callback within %d ms",
                  timeout);
    }
    rep = r->queue.front();
    r->queue.pop_front();
  }
  rep->fn(rep->data);
  std::lock_guard<std::mutex> lk(r->mu);
  rep->done = true;
  r->cv.notify_all();
  return ACL_SUCCESS;
}

// ---------------------------------------------------------------- emulator internals

int aclEmuInternalInitialized(void) { return S().initialized ? 1 : 0; }

int32_t aclEmuInternalCurrentDevice(void) { return t_device; }

void* aclEmuInternalResolve(int32_t device, const void* ptr, size_t bytes) {
  std::lock_guard<std::mutex> lk(S().mu);
  AllocRef a = find_range_locked(ptr, bytes);
  if (!a || a->device != device) return nullptr;
  return const_cast<void*>(ptr);
}

int32_t aclEmuInternalPointerDevice(const void* ptr, size_t bytes) {
  std::lock_guard<std::mutex> lk(S().mu);
  AllocRef a = find_range_locked(ptr, bytes);
  return a ? a->device : -1;
}

int32_t aclEmuInternalStreamDevice(aclrtStream stream) {
  StreamRef st = lookup_stream(stream);
  return st ? st->device : -1;
}

aclError aclEmuInternalEnqueue(aclrtStream stream, const char* name, aclEmuWorkFn fn, void* arg,
                               aclEmuCleanupFn cleanup, const aclEmuRange* ranges, size_t nRanges) {
  const char* label = name ? name : "work";
  auto drop = [&] {
    if (cleanup) cleanup(arg);
  };
  StreamRef st = lookup_stream(stream);
  if (!st) {
    drop();
    return fail(ACL_ERROR_INVALID_PARAM, "%s: stream %p is not a live stream", label, stream);
  }
  Item it;
  it.name = label;
  {
    std::lock_guard<std::mutex> lk(S().mu);
    for (size_t i = 0; i < nRanges; ++i) {
      AllocRef a = find_range_locked(ranges[i].ptr, ranges[i].bytes);
      if (!a || a->device != st->device) {
        int32_t owner = a ? a->device : -1;
        drop();
        return fail(ACL_ERROR_INVALID_PARAM,
                    "%s: device memory [%p, +%zu) is not inside one live allocation of device "
                    "%d (the stream's device; it belongs to %s%d)",
                    label, ranges[i].ptr, ranges[i].bytes, st->device,
                    owner < 0 ? "no device, " : "device ", owner);
      }
      if (std::find(it.allocs.begin(), it.allocs.end(), a) == it.allocs.end())
        it.allocs.push_back(a);
    }
  }
  it.run = [fn, arg](char* msg, size_t len) { return fn ? fn(arg, msg, len) : ACL_SUCCESS; };
  it.cleanup = [cleanup, arg] {
    if (cleanup) cleanup(arg);
  };
  enqueue(st, std::move(it));
  return ACL_SUCCESS;
}

int aclEmuInternalEnter(const char* name) { return enter(name ? name : "?"); }

void aclEmuInternalSetErrMsg(const char* msg) { set_err(msg ? msg : ""); }

void aclEmuInternalViolation(const char* msg) { violation(msg ? msg : "(no message)"); }

// ---------------------------------------------------------------- ascend_emulator.h

int aclEmuInjectFault(const char* name, int status, int count) {
  if (!name || count == 0) return -1;
  State& s = S();
  std::lock_guard<std::mutex> lk(s.fmu);
  s.faults[name] = Fault{status, count};
  return 0;
}

uint64_t aclEmuCallCount(const char* name) {
  if (!name) return 0;
  State& s = S();
  std::lock_guard<std::mutex> lk(s.fmu);
  auto it = s.calls.find(name);
  return it == s.calls.end() ? 0 : it->second;
}

uint64_t aclEmuViolationCount(void) {
  State& s = S();
  std::lock_guard<std::mutex> lk(s.fmu);
  return s.violations;
}

const char* aclEmuLastViolation(void) {
  State& s = S();
  std::lock_guard<std::mutex> lk(s.fmu);
  return s.last_violation.c_str();
}

void aclEmuReset(void) {
  State& s = S();
  std::lock_guard<std::mutex> lk(s.fmu);
  s.faults.clear();
  s.calls.clear();
  s.violations = 0;
  s.last_violation.clear();
}

uint64_t aclEmuLiveAllocations(int32_t deviceId) {
  std::lock_guard<std::mutex> lk(S().mu);
  return valid_device(deviceId) ? S().devices[static_cast<size_t>(deviceId)].live : 0;
}

uint64_t aclEmuLiveBytes(int32_t deviceId) {
  std::lock_guard<std::mutex> lk(S().mu);
  return valid_device(deviceId) ? S().devices[static_cast<size_t>(deviceId)].used : 0;
}

}  // extern "C"
