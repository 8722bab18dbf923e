// The whole runtime table (runtime.h) over an SDK whose runtime API has CUDA's
// shape: a current device per thread, device-scoped pointers, streams and
// events as pointer handles, Malloc/Free/MemcpyAsync/MemcpyPeerAsync/
// StreamWaitEvent/EventElapsedTime with CUDA's arguments (Enflame's topsrt,
// Moore Threads' MUSA runtime, HIP). A vendor writes a dialect: its handle and
// error types, a few constants, and each SDK call as a static function beside
// the name its messages give. Plain C++ and runtime.h: no torch.
//
// What the runtime guarantees on any such SDK (what device-scoped hardware
// needs; docs/runtime-abi.md):
//  - every call runs with the pointer's owning device current (H2D: dst
//    decides; D2H, D2D, memset, free: src/ptr), restored afterwards;
//  - a D2D copy between two devices goes through the SDK's peer copy with the
//    source device current and, for the async form, a stream of the source
//    device (another stream is ordered around a run on the source's default);
//  - every SDK status is checked and becomes an error naming the call, the
//    device and the SDK's status string: a copy never reports success while
//    moving nothing; only an allocation's start is freed;
//  - host functions run from one watcher thread, in launch order, once an
//    event recorded on the stream completed (or through the SDK's stream
//    callback, for a dialect declaring kStreamCallbacks).
//
// The dialect (a struct of static members; see packages/torch_fl_gcu's):
//   using Error, Stream, Event (Stream and Event pointer handles), MemcpyKind;
//   Error kSuccess, kNotReady, kNoDevice;
//   const char* kRuntime ("topsrt": the table's name, messages' prefix),
//     kDevice ("GCU card": how messages name one device), kErrorType
//     ("topsError_t"), kDeviceName (printf format of device_name, one %d);
//   uint64_t kCapabilities (TFL_CAP_* bits);
//   tfl_status to_status(Error); const char* error_string(Error);
//   void clear_error() (reset the SDK's sticky last error);
//   and, each with a `<call>_name` beside it (the SDK function's name):
//   get_device_count(int*), get_device(int*), set_device(int),
//   device_synchronize(), mem_get_info(size_t*, size_t*), malloc(void**, size_t),
//   free(void*), host_malloc(void**, size_t), host_free(void*),
//   memcpy(void*, const void*, size_t, MemcpyKind),
//   memcpy_async(void*, const void*, size_t, MemcpyKind, Stream),
//   memcpy_peer(void*, int, const void*, int, size_t),
//   memcpy_peer_async(void*, int, const void*, int, size_t, Stream),
//   memset_async(void*, int, size_t, Stream), stream_create(Stream*, bool non_blocking,
//   int priority), stream_destroy(Stream), stream_synchronize(Stream), stream_query(Stream),
//   stream_wait_event(Stream, Event), event_create(Event*, bool timing), event_destroy(Event),
//   event_record(Event, Stream), event_synchronize(Event), event_query(Event),
//   event_elapsed_time(float*, Event, Event).
// A dialect whose SDK has CUDA's stream capture declares it too (kGraphs; cuda_style_graphs.h
// lists what): the table then records device graphs. An SDK that differs from CUDA's rules in a
// few places (CANN's aclrt) declares the optional members of cuda_style_hooks.h.
// TFL_KIT_SDK_CALL(field, fn) writes a call that forwards to fn as it is.
// A call made of several SDK calls may name the one that failed: its `<call>_name` is then a
// thread_local variable the function sets.
#pragma once

#include <torch_fl/kit/cuda_style_hooks.h>
#include <torch_fl/kit/runtime_allocations.h>
#include <torch_fl/kit/runtime_copies.h>
#include <torch_fl/kit/runtime_default_streams.h>
#include <torch_fl/kit/runtime_errors.h>
#include <torch_fl/kit/runtime_host_functions.h>
#include <torch_fl/kit/runtime_stream_order.h>
#include <torch_fl/kit/runtime_table.h>
#include <torch_fl/runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <type_traits>

// One runtime per library: the SDK handles behind runtime.h's opaque types.
struct tfl_stream_st {
  void* stream;
  int device;
};

struct tfl_event_st {
  void* event;
  int device;
  uint32_t flags;
  bool recorded = false;  // kTracksEvents: the runtime's view of it (guarded by mu)
  std::mutex mu;
};

// After the handles it uses.
#include <torch_fl/kit/cuda_style_graphs.h>

// In a dialect: `field` calls the SDK's `fn` with the arguments as given, and
// `field_name` is "fn".
#define TFL_KIT_SDK_CALL(field, fn)                \
  static constexpr const char* field##_name = #fn; \
  template <class... A>                            \
  static Error field(A... a) {                     \
    return fn(a...);                               \
  }

namespace torch_fl::kit {

template <class Sdk>
class CudaStyleRuntime {
  using Error = typename Sdk::Error;
  using Stream = typename Sdk::Stream;
  using Event = typename Sdk::Event;
  static_assert(std::is_pointer_v<Stream> && std::is_pointer_v<Event>,
                "a CUDA-style SDK's streams and events are pointer handles");
  // Device graphs where the dialect declares the SDK's stream capture (else empty fields).
  using Graphs = CudaStyleGraphs<Sdk, CudaStyleRuntime>;
  friend Graphs;

 public:
  // The table, for TFL_KIT_RUNTIME_ENTRY.
  static const tfl_runtime_v1& table() {
    static const tfl_runtime_v1 t = {TFL_RUNTIME_ABI_VERSION, sizeof(tfl_runtime_v1), Sdk::kRuntime,
                                     Sdk::kCapabilities | Graphs::kCapabilities,
                                     TFL_RUNTIME_V1_FUNCTIONS(TFL_KIT_TABLE_FIELD)};
    return t;
  }

 private:
  static Stream sdk(const tfl_stream_st* s) { return static_cast<Stream>(s->stream); }
  static Event sdk(const tfl_event_st* e) { return static_cast<Event>(e->event); }
  static std::string device_text(int device) {
    return std::string(Sdk::kDevice) + " " + std::to_string(device);
  }
  static std::string owner_text(int owner) {
    return owner >= 0 ? " (" + device_text(owner) + ")" : " (host)";
  }

  // Records "<call>(...) on <device> N failed: <status string> (<type> <n>)[; detail]" (or the
  // dialect's failure_text).
  static tfl_status fail_sdk(const char* call, int device, Error e,
                             const std::string& detail = "") {
    std::string msg;
    if constexpr (has_failure_text<Sdk>::value) {
      msg = Sdk::failure_text(call, device, e, detail);
    } else {
      Sdk::clear_error();  // the SDK's sticky copy: this one is reported
      char buf[512];
      std::snprintf(buf, sizeof(buf), "%s(...) on %s %d failed: %s (%s %d)%s%s", call, Sdk::kDevice,
                    device, Sdk::error_string(e), Sdk::kErrorType, static_cast<int>(e),
                    detail.empty() ? "" : "; ", detail.c_str());
      msg = buf;
    }
    const tfl_status status = Sdk::to_status(e);
    if (status == TFL_ERROR_CAPTURE) msg += Graphs::invalidated_by(msg);
    return fail(status, std::move(msg));
  }

  // The calling thread's device; a failure is reported.
  static tfl_status current(int* device) {
    int d = -1;
    const Error e = Sdk::get_device(&d);
    if (e != Sdk::kSuccess) return fail_sdk(Sdk::get_device_name, -1, e);
    *device = d;
    return TFL_OK;
  }

  static tfl_status no_device(int device) {
    return fail(TFL_ERROR_INVALID_DEVICE,
                std::string(Sdk::kRuntime) + " runtime: no " + device_text(device));
  }

  // Makes `device` current for the scope (the SDK acts on the current device).
  class DeviceScope {
   public:
    explicit DeviceScope(int device) : device_(device) {
      if (Sdk::get_device(&prev_) != Sdk::kSuccess) prev_ = -1;
      if (prev_ != device) status_ = Sdk::set_device(device);
    }
    ~DeviceScope() {
      if (prev_ >= 0 && prev_ != device_ && status_ == Sdk::kSuccess) (void)Sdk::set_device(prev_);
    }
    Error status() const { return status_; }
    DeviceScope(const DeviceScope&) = delete;
    DeviceScope& operator=(const DeviceScope&) = delete;

   private:
    int device_;
    int prev_ = -1;
    Error status_ = Sdk::kSuccess;
  };

#define TFL_KIT_ENTER(device)           \
  DeviceScope _scope(device);           \
  if (_scope.status() != Sdk::kSuccess) \
  return fail_sdk(Sdk::set_device_name, (device), _scope.status())
#define TFL_KIT_CHECK(device, call, args, ...)                                               \
  do {                                                                                       \
    const Error _e = Sdk::call args;                                                         \
    if (_e != Sdk::kSuccess) return fail_sdk(Sdk::call##_name, (device), _e, ##__VA_ARGS__); \
  } while (0)

#define TFL_KIT_READY() \
  if (tfl_status _ready = ready()) return _ready
#define TFL_KIT_CURRENT(var) \
  int var = -1;              \
  if (tfl_status _current = current(&var)) return _current

  static std::string bytes_text(size_t n) { return std::to_string(n) + " bytes"; }
  static std::string peer_text(int src, int dst, size_t n) {
    return device_text(src) + " -> " + device_text(dst) + ", " + bytes_text(n);
  }

  // ---- state: every device and pinned allocation goes through this runtime ----
  static inline AllocationRegistry allocations_;
  static inline std::mutex init_mutex_;
  static inline std::atomic<bool> initialised_{false};
  static inline int count_ = -1;
  static inline DefaultStreams<tfl_stream_st> default_;  // made with their device current
  // Leaked: the watcher thread outlives static destructors.
  static inline HostFunctionThread* host_functions_ = new HostFunctionThread();

  static int owner_of(const void* p) { return allocations_.owner_of(p); }

  // A dialect with init(): the SDK initialised before any call.
  static tfl_status ready() {
    if constexpr (has_init<Sdk>::value) return rt_init();
    return TFL_OK;
  }

  // kChecksArguments: [p, p + n) stays inside p's device allocation, if it is in one.
  static tfl_status check_range(const char* what, const void* p, size_t n) {
    if constexpr (has_kChecksArguments<Sdk>::value) {
      Allocation a;
      if (allocations_.device_allocation(p, &a) && a.offset(p) + n > a.size) {
        return fail(TFL_ERROR_INVALID_VALUE,
                    std::string(Sdk::kRuntime) + " runtime: " + what + " " + pointer_text(p) +
                        ": " + bytes_text(n) + " at offset " + std::to_string(a.offset(p)) +
                        " overrun its allocation of " + bytes_text(a.size) + " on " +
                        device_text(a.device));
      }
    }
    return TFL_OK;
  }

  static tfl_status default_stream(int device, tfl_stream_st** out) {
    if (!default_.has_device(device)) return no_device(device);
    return default_.get(device, out, [](int device, tfl_stream_st** made) {
      TFL_KIT_ENTER(device);
      Stream s = nullptr;
      TFL_KIT_CHECK(device, stream_create, (&s, false, 0));
      *made = new tfl_stream_st{s, device};
      return TFL_OK;
    });
  }

  // NULL -> the current device's default stream.
  static tfl_status resolve(tfl_stream s, tfl_stream_st** out) {
    if (s) {
      *out = s;
      return TFL_OK;
    }
    TFL_KIT_CURRENT(device);
    return default_stream(device, out);
  }

  // Which device a copy runs on (the one owning the pointer that decides) and
  // the refusal when the kind does not fit the pointers.
  static tfl_status copy_device(void* dst, const void* src, size_t n, tfl_memcpy_kind kind,
                                int* device, int* other) {
    if constexpr (has_kChecksArguments<Sdk>::value) {
      if (kind < TFL_MEMCPY_HOST_TO_HOST || kind > TFL_MEMCPY_DEVICE_TO_DEVICE) {
        return fail(TFL_ERROR_INVALID_VALUE, std::string(Sdk::kRuntime) +
                                                 " runtime: unknown memcpy kind " +
                                                 std::to_string(static_cast<int>(kind)));
      }
    }
    const int d = owner_of(dst), s = owner_of(src);
    CopyRoute route;
    if (copy_route(kind, d, s, &route)) {
      *device = route.device;
      *other = route.other;
      if (tfl_status st = check_range("memcpy dst", dst, n)) return st;
      return check_range("memcpy src", src, n);
    }
    return fail(TFL_ERROR_INVALID_MEMCPY_KIND,
                std::string(Sdk::kRuntime) + " runtime: memcpy kind " + memcpy_kind_name(kind) +
                    " does not match dst " + pointer_text(dst) + owner_text(d) + " and src " +
                    pointer_text(src) + owner_text(s));
  }

  // runtime.h's kinds are CUDA's values.
  static typename Sdk::MemcpyKind sdk_kind(tfl_memcpy_kind k) {
    return static_cast<typename Sdk::MemcpyKind>(static_cast<int>(k));
  }

  // ======================= the table's functions =======================

  static tfl_status rt_init() {
    if (initialised_.load(std::memory_order_acquire)) return TFL_OK;
    std::lock_guard<std::mutex> lock(init_mutex_);
    if (count_ >= 0) return TFL_OK;
    if constexpr (has_init<Sdk>::value) {
      const Error e = Sdk::init();
      if (e != Sdk::kSuccess) return fail_sdk(Sdk::init_name, -1, e);
    }
    int n = 0;
    const Error e = Sdk::get_device_count(&n);
    if (e == Sdk::kNoDevice) {
      n = 0;
    } else if (e != Sdk::kSuccess) {
      return fail_sdk(Sdk::get_device_count_name, -1, e);
    }
    default_.reset(n);
    count_ = n;
    initialised_.store(true, std::memory_order_release);
    return TFL_OK;
  }

  static constexpr auto rt_status_name = torch_fl::kit::status_name;
  static constexpr auto rt_last_error = torch_fl::kit::last_error;

  static tfl_status rt_device_count(int* count) {
    if (!count) return fail(TFL_ERROR_INVALID_VALUE, "device_count: NULL out-parameter");
    if (tfl_status s = rt_init()) return s;
    *count = count_;
    return TFL_OK;
  }

  static tfl_status rt_get_device(int* device) {
    if (!device) return fail(TFL_ERROR_INVALID_VALUE, "get_device: NULL out-parameter");
    TFL_KIT_READY();
    TFL_KIT_CHECK(-1, get_device, (device));
    return TFL_OK;
  }

  static tfl_status rt_set_device(int device) {
    TFL_KIT_READY();
    if constexpr (has_kChecksArguments<Sdk>::value) {
      if (tfl_status s = rt_init()) return s;
      if (device < 0 || device >= count_) return no_device(device);
    }
    TFL_KIT_CHECK(device, set_device, (device));
    return TFL_OK;
  }

  static tfl_status rt_device_synchronize() {
    TFL_KIT_READY();
    TFL_KIT_CURRENT(device);
    TFL_KIT_CHECK(device, device_synchronize, ());
    return TFL_OK;
  }

  static tfl_status rt_mem_get_info(size_t* free_bytes, size_t* total_bytes) {
    if constexpr (has_kChecksArguments<Sdk>::value) {
      if (!free_bytes || !total_bytes) {
        return fail(TFL_ERROR_INVALID_VALUE, "mem_get_info: NULL out-parameter");
      }
    }
    TFL_KIT_READY();
    TFL_KIT_CURRENT(device);
    TFL_KIT_CHECK(device, mem_get_info, (free_bytes, total_bytes));
    return TFL_OK;
  }

  static tfl_status rt_device_name(int device, char* buf, size_t len) {
    if (!buf || len == 0) return fail(TFL_ERROR_INVALID_VALUE, "device_name: empty buffer");
    TFL_KIT_READY();
    if (device < 0 || device >= count_) return no_device(device);
    if constexpr (has_device_name<Sdk>::value) {
      Sdk::device_name(device, buf, len);
    } else {
      std::snprintf(buf, len, Sdk::kDeviceName, device);
    }
    return TFL_OK;
  }

  static tfl_status rt_malloc(void** ptr, size_t size) {
    if (!ptr) return fail(TFL_ERROR_INVALID_VALUE, "malloc: NULL out-parameter");
    if (size == 0) {
      *ptr = nullptr;
      return TFL_OK;
    }
    TFL_KIT_READY();
    TFL_KIT_CURRENT(device);
    void* p = nullptr;
    typename Graphs::Relaxed relaxed;  // allocation stays allowed while capturing
    TFL_KIT_CHECK(device, malloc, (&p, size), bytes_text(size));
    allocations_.add_device(p, size, device);
    *ptr = p;
    return TFL_OK;
  }

  static tfl_status rt_free(void* ptr) {
    if (!ptr) return TFL_OK;
    TFL_KIT_READY();
    Allocation a;
    if (!allocations_.device_start(ptr, &a)) {
      // Only an allocation's start is freed: freeing an inside pointer would
      // leave the allocation recorded (and the SDK's answer is not defined).
      return fail(TFL_ERROR_INVALID_POINTER,
                  std::string(Sdk::kRuntime) + " runtime: free of " + pointer_text(ptr) +
                      (a.device >= 0 ? ", inside an allocation of " + device_text(a.device) +
                                           " but not its start"
                                     : ", which no " + std::string(Sdk::kDevice) + " allocated"));
    }
    {
      TFL_KIT_ENTER(a.device);  // device-scoped: freed with its owner current
      typename Graphs::Relaxed relaxed;
      TFL_KIT_CHECK(a.device, free, (ptr));
    }
    allocations_.remove_device(ptr);
    return TFL_OK;
  }

  static tfl_status rt_host_malloc(void** ptr, size_t size) {
    if (!ptr) return fail(TFL_ERROR_INVALID_VALUE, "host_malloc: NULL out-parameter");
    if (size == 0) {
      *ptr = nullptr;
      return TFL_OK;
    }
    TFL_KIT_READY();
    void* p = nullptr;
    TFL_KIT_CHECK(-1, host_malloc, (&p, size), bytes_text(size));
    allocations_.add_host(p, size);
    *ptr = p;
    return TFL_OK;
  }

  static tfl_status rt_host_free(void* ptr) {
    if (!ptr) return TFL_OK;
    TFL_KIT_READY();
    if (!allocations_.host_start(ptr)) {
      return fail(TFL_ERROR_INVALID_POINTER, std::string(Sdk::kRuntime) +
                                                 " runtime: host_free of " + pointer_text(ptr) +
                                                 ", which host_malloc did not return");
    }
    typename Graphs::Relaxed relaxed;  // not among the calls the ABI forbids while capturing
    TFL_KIT_CHECK(-1, host_free, (ptr));
    allocations_.remove_host(ptr);
    return TFL_OK;
  }

  static tfl_status rt_pointer_info(const void* ptr, tfl_pointer_kind* kind, int* device) {
    if (!kind || !device) return fail(TFL_ERROR_INVALID_VALUE, "pointer_info: NULL out-parameter");
    allocations_.pointer_info(ptr, kind, device);
    return TFL_OK;
  }

  // Drains `device`'s default stream (what a synchronous copy is ordered after).
  static tfl_status drain_default(int device) {
    tfl_stream_st* ds = nullptr;
    if (tfl_status s = default_stream(device, &ds)) return s;
    TFL_KIT_ENTER(device);
    TFL_KIT_CHECK(device, stream_synchronize, (sdk(ds)));
    return TFL_OK;
  }

  // Cross-device bytes, synchronously: the peer copy with the source current.
  static tfl_status peer_sync(void* dst, int ddev, const void* src, int sdev, size_t n) {
    if constexpr (has_kUnorderedSyncCopies<Sdk>::value) {
      for (int d : {sdev, ddev}) {
        if (tfl_status s = drain_default(d)) return s;
      }
    }
    TFL_KIT_ENTER(sdev);
    TFL_KIT_CHECK(sdev, memcpy_peer, (dst, ddev, src, sdev, n), peer_text(sdev, ddev, n));
    return TFL_OK;
  }

  static tfl_status rt_memcpy(void* dst, const void* src, size_t n, tfl_memcpy_kind kind) {
    if (n == 0) return TFL_OK;
    TFL_KIT_READY();
    int device = -1, other = -1;
    if (tfl_status s = copy_device(dst, src, n, kind, &device, &other)) return s;
    if (kind == TFL_MEMCPY_HOST_TO_HOST) {
      std::memmove(dst, src, n);
      return TFL_OK;
    }
    if (kind == TFL_MEMCPY_DEVICE_TO_DEVICE && other != device) {
      return peer_sync(dst, other, src, device, n);
    }
    TFL_KIT_ENTER(device);
    // "after the current device's default stream work": ordered behind it first.
    if (tfl_status s = drain_default(device)) return s;
    TFL_KIT_CHECK(device, memcpy, (dst, src, n, sdk_kind(kind)),
                  std::string(memcpy_kind_name(kind)) + ", " + bytes_text(n));
    return TFL_OK;
  }

  static tfl_status rt_memcpy_async(void* dst, const void* src, size_t n, tfl_memcpy_kind kind,
                                    tfl_stream stream) {
    if (n == 0) return TFL_OK;
    TFL_KIT_READY();
    int device = -1, other = -1;
    if (tfl_status s = copy_device(dst, src, n, kind, &device, &other)) return s;
    if (kind == TFL_MEMCPY_HOST_TO_HOST) {
      tfl_stream_st* st = nullptr;
      if (tfl_status s = resolve(stream, &st)) return s;
      TFL_KIT_ENTER(st->device);
      TFL_KIT_CHECK(st->device, stream_synchronize, (sdk(st)));
      std::memmove(dst, src, n);
      return TFL_OK;
    }
    if (kind == TFL_MEMCPY_DEVICE_TO_DEVICE && other != device) {
      return rt_memcpy_peer_async(dst, other, src, device, n, stream);
    }
    tfl_stream_st* st = nullptr;
    if (tfl_status s = resolve(stream, &st)) return s;
    if (st->device != device) {
      return fail(TFL_ERROR_INVALID_VALUE, std::string(Sdk::kRuntime) + " runtime: memcpy_async " +
                                               memcpy_kind_name(kind) + " on " +
                                               device_text(device) + " was given a stream of " +
                                               device_text(st->device));
    }
    TFL_KIT_ENTER(device);
    const std::string what = std::string(memcpy_kind_name(kind)) + ", " + bytes_text(n);
    if constexpr (has_kPinnedAsyncCopies<Sdk>::value) {
      const void* host = kind == TFL_MEMCPY_HOST_TO_DEVICE   ? src
                         : kind == TFL_MEMCPY_DEVICE_TO_HOST ? static_cast<const void*>(dst)
                                                             : nullptr;
      if (host && !allocations_.host_range(host, n)) {
        // The bytes move now, after the stream's earlier work (what stream order asks of them).
        // A capturing stream refuses the wait, so such a copy is never recorded.
        TFL_KIT_CHECK(device, stream_synchronize, (sdk(st)),
                      what + ", pageable host memory: copied after the stream's work");
        TFL_KIT_CHECK(device, memcpy, (dst, src, n, sdk_kind(kind)),
                      what + ", pageable host memory");
        return TFL_OK;
      }
    }
    TFL_KIT_CHECK(device, memcpy_async, (dst, src, n, sdk_kind(kind), sdk(st)), what);
    return TFL_OK;
  }
  // The peer event barrier's SDK steps (stream_after).
  struct Order {
    tfl_status record(tfl_stream_st* signal, Event* ev) const {
      TFL_KIT_ENTER(signal->device);
      TFL_KIT_CHECK(signal->device, event_create, (ev, false));
      const Error e = Sdk::event_record(*ev, sdk(signal));
      if (e != Sdk::kSuccess) {
        (void)Sdk::event_destroy(*ev);
        return fail_sdk(Sdk::event_record_name, signal->device, e);
      }
      return TFL_OK;
    }
    tfl_status wait(tfl_stream_st* waiter, Event ev) const {
      TFL_KIT_ENTER(waiter->device);
      TFL_KIT_CHECK(waiter->device, stream_wait_event, (sdk(waiter), ev));
      return TFL_OK;
    }
    void destroy(tfl_stream_st* signal, Event ev) const {
      DeviceScope back(signal->device);
      (void)Sdk::event_destroy(ev);
    }
  };

  // Makes `waiter` wait for the work queued so far on `signal` (both streams).
  static tfl_status stream_after(tfl_stream_st* waiter, tfl_stream_st* signal) {
    return torch_fl::kit::stream_after<Event>(waiter, signal, Order{});
  }

  static tfl_status rt_memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device,
                                         size_t n, tfl_stream stream) {
    if (n == 0) return TFL_OK;
    TFL_KIT_READY();
    const int d = owner_of(dst), s = owner_of(src);
    if (d != dst_device || s != src_device) {
      const auto where = [](int owner) {
        return owner >= 0 ? "on " + device_text(owner) : std::string("not a device pointer");
      };
      return fail(TFL_ERROR_INVALID_POINTER,
                  std::string(Sdk::kRuntime) + " runtime: memcpy_peer_async dst " +
                      pointer_text(dst) + " is " + where(d) + " (expected " +
                      device_text(dst_device) + "), src " + pointer_text(src) + " is " + where(s) +
                      " (expected " + device_text(src_device) + ")");
    }
    if (tfl_status e = check_range("memcpy_peer_async dst", dst, n)) return e;
    if (tfl_status e = check_range("memcpy_peer_async src", src, n)) return e;
    tfl_stream_st* st = nullptr;
    if (tfl_status e = resolve(stream, &st)) return e;
    if (st->device == src_device) {
      // The SDK's rule: current device and stream both of the source.
      TFL_KIT_ENTER(src_device);
      TFL_KIT_CHECK(src_device, memcpy_peer_async, (dst, dst_device, src, src_device, n, sdk(st)),
                    peer_text(src_device, dst_device, n));
      return TFL_OK;
    }
    // A stream of another device: the copy runs on the source's default
    // stream, ordered after `stream` and with `stream` ordered after it.
    tfl_stream_st* src_default = nullptr;
    if (tfl_status e = default_stream(src_device, &src_default)) return e;
    return run_in_order_of(st, src_default, stream_after, [&](tfl_stream_st* runner) {
      TFL_KIT_ENTER(src_device);
      TFL_KIT_CHECK(src_device, memcpy_peer_async,
                    (dst, dst_device, src, src_device, n, sdk(runner)),
                    peer_text(src_device, dst_device, n));
      return TFL_OK;
    });
  }

  static tfl_status rt_memset_async(void* ptr, int value, size_t n, tfl_stream stream) {
    if (n == 0) return TFL_OK;
    TFL_KIT_READY();
    const int device = owner_of(ptr);
    if (device < 0) {
      return fail(TFL_ERROR_INVALID_POINTER, std::string(Sdk::kRuntime) +
                                                 " runtime: memset_async of " + pointer_text(ptr) +
                                                 ", which no " + Sdk::kDevice + " allocated");
    }
    if (tfl_status s = check_range("memset_async", ptr, n)) return s;
    tfl_stream_st* st = nullptr;
    if (tfl_status s = resolve(stream, &st)) return s;
    if (st->device != device) {
      return fail(TFL_ERROR_INVALID_VALUE,
                  std::string(Sdk::kRuntime) + " runtime: memset_async of a " +
                      device_text(device) + " pointer on a stream of " + device_text(st->device));
    }
    TFL_KIT_ENTER(device);
    TFL_KIT_CHECK(device, memset_async, (ptr, value, n, sdk(st)));
    return TFL_OK;
  }

  static tfl_status rt_stream_create(tfl_stream* stream, int priority) {
    if (!stream) return fail(TFL_ERROR_INVALID_VALUE, "stream_create: NULL out-parameter");
    TFL_KIT_READY();
    TFL_KIT_CURRENT(device);
    Stream s = nullptr;
    TFL_KIT_CHECK(device, stream_create, (&s, true, priority));
    *stream = new tfl_stream_st{s, device};
    return TFL_OK;
  }

  static tfl_status rt_stream_destroy(tfl_stream stream) {
    if (!stream) {
      return fail(TFL_ERROR_INVALID_HANDLE, "stream_destroy: the default stream is not destroyed");
    }
    TFL_KIT_READY();
    {
      TFL_KIT_ENTER(stream->device);
      if constexpr (has_kDrainBeforeStreamDestroy<Sdk>::value) {
        TFL_KIT_CHECK(stream->device, stream_synchronize, (sdk(stream)));
      }
      TFL_KIT_CHECK(stream->device, stream_destroy, (sdk(stream)));
    }
    delete stream;
    return TFL_OK;
  }

  static tfl_status rt_stream_synchronize(tfl_stream stream) {
    TFL_KIT_READY();
    tfl_stream_st* st = nullptr;
    if (tfl_status s = resolve(stream, &st)) return s;
    TFL_KIT_ENTER(st->device);
    TFL_KIT_CHECK(st->device, stream_synchronize, (sdk(st)));
    return TFL_OK;
  }

  static tfl_status rt_stream_query(tfl_stream stream) {
    TFL_KIT_READY();
    tfl_stream_st* st = nullptr;
    if (tfl_status s = resolve(stream, &st)) return s;
    TFL_KIT_ENTER(st->device);
    const Error e = Sdk::stream_query(sdk(st));
    if (e == Sdk::kNotReady) return TFL_ERROR_NOT_READY;
    if (e != Sdk::kSuccess) return fail_sdk(Sdk::stream_query_name, st->device, e);
    return TFL_OK;
  }

  static tfl_status rt_stream_wait_event(tfl_stream stream, tfl_event event) {
    if (!event) return fail(TFL_ERROR_INVALID_HANDLE, "stream_wait_event: NULL event");
    TFL_KIT_READY();
    tfl_stream_st* st = nullptr;
    if (tfl_status s = resolve(stream, &st)) return s;
    std::unique_lock<std::mutex> lock(event->mu, std::defer_lock);
    if constexpr (has_kTracksEvents<Sdk>::value) {
      lock.lock();
      if (!event->recorded) return TFL_OK;  // nothing to wait for
    }
    TFL_KIT_ENTER(st->device);
    TFL_KIT_CHECK(st->device, stream_wait_event, (sdk(st), sdk(event)));
    return TFL_OK;
  }

  // An event recorded on the stream, waited for by the watcher thread (kStreamCallbacks: the
  // SDK's stream callback).
  static tfl_status rt_launch_host_func(tfl_stream stream, tfl_host_fn fn, void* user_data) {
    if (!fn) return fail(TFL_ERROR_INVALID_VALUE, "launch_host_func: NULL function");
    TFL_KIT_READY();
    tfl_stream_st* st = nullptr;
    if (tfl_status s = resolve(stream, &st)) return s;
    if constexpr (has_kStreamCallbacks<Sdk>::value) {
      TFL_KIT_ENTER(st->device);
      TFL_KIT_CHECK(st->device, launch_host_func, (sdk(st), fn, user_data));
      return TFL_OK;
    } else if constexpr (has_graphs<Sdk>::value) {
      bool captured = false;
      if (tfl_status s = Graphs::capturing(st, &captured)) return s;
      if (captured) return Graphs::capture_host_func(st, fn, user_data);
    }
    Event ev = nullptr;
    if (tfl_status s = Order{}.record(st, &ev)) return s;
    const int device = st->device;
    host_functions_->launch(
        [ev, device] {
          DeviceScope scope(device);
          (void)Sdk::event_synchronize(ev);
          (void)Sdk::event_destroy(ev);
        },
        fn, user_data);
    return TFL_OK;
  }

  static tfl_status rt_event_create(tfl_event* event, uint32_t flags) {
    if (!event) return fail(TFL_ERROR_INVALID_VALUE, "event_create: NULL out-parameter");
    if (flags & ~static_cast<uint32_t>(TFL_EVENT_DISABLE_TIMING)) {
      return fail(TFL_ERROR_INVALID_VALUE, "event_create: unknown flags " + std::to_string(flags));
    }
    TFL_KIT_READY();
    TFL_KIT_CURRENT(device);
    Event e = nullptr;
    TFL_KIT_CHECK(device, event_create, (&e, (flags & TFL_EVENT_DISABLE_TIMING) == 0));
    *event = new tfl_event_st{e, device, flags, false, {}};
    return TFL_OK;
  }

  static tfl_status rt_event_destroy(tfl_event event) {
    if (!event) return fail(TFL_ERROR_INVALID_HANDLE, "event_destroy: NULL event");
    TFL_KIT_READY();
    {
      TFL_KIT_ENTER(event->device);
      TFL_KIT_CHECK(event->device, event_destroy, (sdk(event)));
    }
    delete event;
    return TFL_OK;
  }

  static tfl_status rt_event_record(tfl_event event, tfl_stream stream) {
    if (!event) return fail(TFL_ERROR_INVALID_HANDLE, "event_record: NULL event");
    TFL_KIT_READY();
    tfl_stream_st* st = nullptr;
    if (tfl_status s = resolve(stream, &st)) return s;
    std::lock_guard<std::mutex> lock(event->mu);
    if constexpr (has_kTracksEvents<Sdk>::value) {
      if (event->device != st->device) {
        // The SDK keeps an event in its device's context: re-created on the stream's device (a
        // record replaces whatever the event held anyway).
        Event fresh = nullptr;
        {
          TFL_KIT_ENTER(st->device);
          TFL_KIT_CHECK(st->device, event_create,
                        (&fresh, (event->flags & TFL_EVENT_DISABLE_TIMING) == 0));
        }
        {
          DeviceScope old(event->device);
          (void)Sdk::event_destroy(sdk(event));
        }
        event->event = fresh;
        event->device = st->device;
        event->recorded = false;
      }
    }
    TFL_KIT_ENTER(st->device);
    TFL_KIT_CHECK(st->device, event_record, (sdk(event), sdk(st)));
    event->device = st->device;
    event->recorded = true;
    return TFL_OK;
  }

  static tfl_status rt_event_synchronize(tfl_event event) {
    if (!event) return fail(TFL_ERROR_INVALID_HANDLE, "event_synchronize: NULL event");
    TFL_KIT_READY();
    std::unique_lock<std::mutex> lock(event->mu, std::defer_lock);
    if constexpr (has_kTracksEvents<Sdk>::value) {
      lock.lock();
      if (!event->recorded) return TFL_OK;  // nothing pending, as with CUDA
    }
    TFL_KIT_ENTER(event->device);
    TFL_KIT_CHECK(event->device, event_synchronize, (sdk(event)));
    return TFL_OK;
  }

  static tfl_status rt_event_query(tfl_event event) {
    if (!event) return fail(TFL_ERROR_INVALID_HANDLE, "event_query: NULL event");
    TFL_KIT_READY();
    std::unique_lock<std::mutex> lock(event->mu, std::defer_lock);
    if constexpr (has_kTracksEvents<Sdk>::value) {
      lock.lock();
      if (!event->recorded) return TFL_OK;  // nothing pending, as with CUDA
    }
    TFL_KIT_ENTER(event->device);
    const Error e = Sdk::event_query(sdk(event));
    if (e == Sdk::kNotReady) return TFL_ERROR_NOT_READY;
    if (e != Sdk::kSuccess) return fail_sdk(Sdk::event_query_name, event->device, e);
    return TFL_OK;
  }

  static tfl_status rt_event_elapsed_ms(float* ms, tfl_event start, tfl_event end) {
    if (!ms || !start || !end) {
      return fail(TFL_ERROR_INVALID_VALUE, "event_elapsed_ms: NULL argument");
    }
    TFL_KIT_READY();
    std::unique_lock<std::mutex> l1(start->mu, std::defer_lock);
    std::unique_lock<std::mutex> l2(end->mu, std::defer_lock);
    if constexpr (has_kTracksEvents<Sdk>::value) {
      if ((start->flags | end->flags) & TFL_EVENT_DISABLE_TIMING) {
        return fail(TFL_ERROR_INVALID_VALUE,
                    "event_elapsed_ms: an event was created without timing");
      }
      if (start == end) {
        l1.lock();
      } else {
        std::lock(l1, l2);
      }
      if (!start->recorded || !end->recorded) {
        return fail(TFL_ERROR_INVALID_VALUE, "event_elapsed_ms: an event was never recorded");
      }
      for (tfl_event_st* ev : {start, end}) {
        TFL_KIT_ENTER(ev->device);
        const Error q = Sdk::event_query(sdk(ev));
        if (q == Sdk::kNotReady) {
          return fail(TFL_ERROR_NOT_READY, "event_elapsed_ms: an event has not completed yet");
        }
        if (q != Sdk::kSuccess) return fail_sdk(Sdk::event_query_name, ev->device, q);
      }
    }
    TFL_KIT_ENTER(end->device);
    const Error e = Sdk::event_elapsed_time(ms, sdk(start), sdk(end));
    if (e == Sdk::kNotReady) {
      return fail_sdk(Sdk::event_elapsed_time_name, end->device, e, "an event has not completed");
    }
    if (e != Sdk::kSuccess) return fail_sdk(Sdk::event_elapsed_time_name, end->device, e);
    return TFL_OK;
  }

  // v1.1 IPC: not wired to a CUDA-style SDK's IPC; flagos tensors are not sent to
  // other processes (torch.multiprocessing says so, naming the device).
  static constexpr std::nullptr_t rt_ipc_get_handle = nullptr;
  static constexpr std::nullptr_t rt_ipc_open_handle = nullptr;
  static constexpr std::nullptr_t rt_ipc_close_handle = nullptr;

  // v1.2: the SDK stream behind a runtime stream (NULL: `device`'s default stream).
  static tfl_status rt_native_stream(tfl_stream stream, int device, void** out) {
    if (!out) return fail(TFL_ERROR_INVALID_VALUE, "native_stream: NULL out-parameter");
    if (stream) {
      *out = stream->stream;
      return TFL_OK;
    }
    if (tfl_status s = rt_init()) return s;
    tfl_stream_st* st = nullptr;
    if (tfl_status s = default_stream(device, &st)) return s;
    *out = st->stream;
    return TFL_OK;
  }

  // v1.2: presence check without torch: the number of devices, or why none.
  static tfl_status rt_probe(int* count, char* msg, size_t len) {
    if (count) *count = 0;
    if (msg && len) msg[0] = '\0';
    if (!count) return fail(TFL_ERROR_INVALID_VALUE, "probe: NULL out-parameter");
    if constexpr (has_init<Sdk>::value) {
      // The SDK's initialisation first: the count, or why there is none.
      if (tfl_status s = rt_init()) {
        if (msg && len) std::snprintf(msg, len, "%s", last_error());
        return s;
      }
      *count = count_;
      if (count_ == 0 && msg && len) {
        std::snprintf(msg, len, "%s reports no %s", Sdk::get_device_count_name, Sdk::kDevice);
      }
      return TFL_OK;
    }
    int n = 0;
    const Error e = Sdk::get_device_count(&n);
    if (e == Sdk::kSuccess) {
      *count = n;
      if (n == 0 && msg && len) {
        std::snprintf(msg, len, "%s reports no %s", Sdk::get_device_count_name, Sdk::kDevice);
      }
      return TFL_OK;
    }
    if (msg && len) {
      std::snprintf(msg, len, "%s failed: %s", Sdk::get_device_count_name, Sdk::error_string(e));
    }
    return Sdk::to_status(e);
  }

  // v1.3 device graphs (cuda_style_graphs.h) where the dialect declares the SDK's stream
  // capture; else empty, and torch.flagos graphs raise naming the runtime.
  static constexpr auto rt_graph_capture_begin = Graphs::capture_begin;
  static constexpr auto rt_graph_capture_end = Graphs::capture_end;
  static constexpr auto rt_graph_instantiate = Graphs::instantiate;
  static constexpr auto rt_graph_launch = Graphs::launch;
  static constexpr auto rt_graph_destroy = Graphs::destroy;
  static constexpr auto rt_stream_capture_status = Graphs::capture_status;

#undef TFL_KIT_ENTER
#undef TFL_KIT_CHECK
#undef TFL_KIT_READY
#undef TFL_KIT_CURRENT

 public:
  // For a dialect whose SDK starts a forked child uninitialised (from its pthread_atfork child
  // handler): the child forgets the parent's devices, streams, allocations, graphs and host
  // function thread and initialises afresh on first use. Locks a thread that did not fork may
  // hold are re-made, not waited for; the parent's objects are abandoned, never destroyed.
  static void forget_after_fork() {
    new (&init_mutex_) std::mutex();
    count_ = -1;
    initialised_.store(false);
    new (&default_) DefaultStreams<tfl_stream_st>();
    new (&allocations_) AllocationRegistry();
    host_functions_ = new HostFunctionThread();
    Graphs::forget_after_fork();
    thread_error().clear();
  }
};

}  // namespace torch_fl::kit
