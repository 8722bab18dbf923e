// The torch-fl runtime table (include/torch_fl/runtime.h) over Enflame's
// topsrt. Compiled against the SDK header and runtime.h only, no torch.
//
// What the hardware requires (measured on Enflame cards; docs/gcu.md):
//  - device pointers are device-scoped: every call runs with the pointer's
//    owning card current (H2D: dst decides; D2H, D2D, memset, free: src/ptr);
//  - a D2D copy between two cards goes through topsMemcpyPeer(Async), never
//    topsMemcpy (which fails and moves nothing), with the current card one of
//    the two and, for the async form, a stream of the SOURCE card;
//  - every topsrt status is checked and becomes an error naming the call, the
//    card and the SDK's status string: a copy never reports success while
//    moving nothing.
#include <tops_runtime_api.h>
#include <torch_fl/kit/runtime_allocations.h>
#include <torch_fl/kit/runtime_copies.h>
#include <torch_fl/kit/runtime_default_streams.h>
#include <torch_fl/kit/runtime_errors.h>
#include <torch_fl/kit/runtime_host_functions.h>
#include <torch_fl/kit/runtime_stream_order.h>
#include <torch_fl/kit/runtime_table.h>
#include <torch_fl/runtime.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

struct tfl_stream_st {
  topsStream_t stream;
  int device;
};

struct tfl_event_st {
  topsEvent_t event;
  int device;
  uint32_t flags;
};

namespace {

using torch_fl::kit::fail;
using torch_fl::kit::memcpy_kind_name;
using torch_fl::kit::pointer_text;

tfl_status to_status(topsError_t e) {
  switch (e) {
    case topsSuccess:
      return TFL_OK;
    case topsErrorInvalidValue:
      return TFL_ERROR_INVALID_VALUE;
    case topsErrorOutOfMemory:
      return TFL_ERROR_OUT_OF_MEMORY;
    case topsErrorNotInitialized:
      return TFL_ERROR_NOT_INITIALIZED;
    case topsErrorInvalidDevicePointer:
      return TFL_ERROR_INVALID_POINTER;
    case topsErrorInvalidMemcpyDirection:
      return TFL_ERROR_INVALID_MEMCPY_KIND;
    case topsErrorNoDevice:
      return TFL_ERROR_INVALID_DEVICE;
    case topsErrorInvalidDevice:
      return TFL_ERROR_INVALID_DEVICE;
    case topsErrorNotReady:
      return TFL_ERROR_NOT_READY;
    case topsErrorNotSupported:
      return TFL_ERROR_NOT_SUPPORTED;
    case topsErrorInvalidHandle:
      return TFL_ERROR_INVALID_HANDLE;
    default:
      return TFL_ERROR_DEVICE;
  }
}

// Records "<call> on card N: <status string> (<detail>)" and maps the status.
tfl_status fail_tops(const char* call, int card, topsError_t e, const std::string& detail = "") {
  (void)topsGetLastError();  // clear the SDK's sticky copy: we report this one
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%s on GCU card %d failed: %s (topsError_t %d)%s%s", call, card,
                topsGetErrorString(e), static_cast<int>(e), detail.empty() ? "" : "; ",
                detail.c_str());
  return fail(to_status(e), buf);
}

int current_card() {
  int d = 0;
  return topsGetDevice(&d) == topsSuccess ? d : -1;
}

#define TOPS_CHECK(card, call, ...)                                            \
  do {                                                                         \
    const topsError_t _e = call;                                               \
    if (_e != topsSuccess) return fail_tops(#call, (card), _e, ##__VA_ARGS__); \
  } while (0)

// Makes `card` current for the scope (topsrt acts on the current card).
class CardScope {
 public:
  explicit CardScope(int card) : card_(card) {
    if (topsGetDevice(&prev_) != topsSuccess) prev_ = -1;
    if (prev_ != card) status_ = topsSetDevice(card);
  }
  ~CardScope() {
    if (prev_ >= 0 && prev_ != card_ && status_ == topsSuccess) (void)topsSetDevice(prev_);
  }
  topsError_t status() const { return status_; }

 private:
  int card_;
  int prev_ = -1;
  topsError_t status_ = topsSuccess;
};

#define ENTER_CARD(card)  \
  CardScope _scope(card); \
  if (_scope.status() != topsSuccess) return fail_tops("topsSetDevice", (card), _scope.status())

// ---- pointer ownership: every device and pinned allocation goes through this file ----
torch_fl::kit::AllocationRegistry g_allocations;

int owner_of(const void* p) { return g_allocations.owner_of(p); }

// ---- streams ----
int g_count = -1;
torch_fl::kit::DefaultStreams<tfl_stream_st> g_default;  // made with their card current

tfl_status default_stream(int card, tfl_stream_st** out) {
  if (!g_default.has_device(card))
    return fail(TFL_ERROR_INVALID_DEVICE, "topsrt runtime: no GCU card " + std::to_string(card));
  return g_default.get(card, out, [](int card, tfl_stream_st** made) {
    ENTER_CARD(card);
    topsStream_t s = nullptr;
    TOPS_CHECK(card, topsStreamCreateWithFlags(&s, topsStreamDefault));
    *made = new tfl_stream_st{s, card};
    return TFL_OK;
  });
}

// NULL -> the current card's default stream.
tfl_status resolve(tfl_stream s, tfl_stream_st** out) {
  if (s) {
    *out = s;
    return TFL_OK;
  }
  return default_stream(current_card(), out);
}

#define RESOLVE(var, s)         \
  tfl_stream_st* var = nullptr; \
  if (tfl_status _st = resolve((s), &var)) return _st

// ---- host functions: an event on the stream, watched by one thread ----
torch_fl::kit::HostFunctionThread* g_host_functions = new torch_fl::kit::HostFunctionThread();

// Which card a copy runs on (the one owning the pointer that decides) and a
// description of the mismatch when the kind does not fit the pointers.
tfl_status copy_card(void* dst, const void* src, tfl_memcpy_kind kind, int* card, int* other) {
  const int d = owner_of(dst), s = owner_of(src);
  torch_fl::kit::CopyRoute route;
  if (torch_fl::kit::copy_route(kind, d, s, &route)) {
    *card = route.device;
    *other = route.other;
    return TFL_OK;
  }
  return fail(TFL_ERROR_INVALID_MEMCPY_KIND,
              std::string("topsrt runtime: memcpy kind ") + memcpy_kind_name(kind) +
                  " does not match dst " + pointer_text(dst) +
                  (d >= 0 ? " (GCU card " + std::to_string(d) + ")" : " (host)") + " and src " +
                  pointer_text(src) +
                  (s >= 0 ? " (GCU card " + std::to_string(s) + ")" : " (host)"));
}

topsMemcpyKind tops_kind(tfl_memcpy_kind k) {
  return static_cast<topsMemcpyKind>(static_cast<int>(k));
}

// ======================= the table's functions =======================

tfl_status rt_init() {
  static std::mutex m;
  std::lock_guard<std::mutex> lock(m);
  if (g_count >= 0) return TFL_OK;
  int n = 0;
  const topsError_t e = topsGetDeviceCount(&n);
  if (e == topsErrorNoDevice) {
    n = 0;
  } else if (e != topsSuccess) {
    return fail_tops("topsGetDeviceCount", -1, e);
  }
  g_default.reset(n);
  g_count = n;
  return TFL_OK;
}

constexpr auto rt_status_name = torch_fl::kit::status_name;
constexpr auto rt_last_error = torch_fl::kit::last_error;

tfl_status rt_device_count(int* count) {
  if (!count) return fail(TFL_ERROR_INVALID_VALUE, "device_count: NULL out-parameter");
  if (tfl_status s = rt_init()) return s;
  *count = g_count;
  return TFL_OK;
}

tfl_status rt_get_device(int* device) {
  if (!device) return fail(TFL_ERROR_INVALID_VALUE, "get_device: NULL out-parameter");
  TOPS_CHECK(-1, topsGetDevice(device));
  return TFL_OK;
}

tfl_status rt_set_device(int device) {
  TOPS_CHECK(device, topsSetDevice(device));
  return TFL_OK;
}

tfl_status rt_device_synchronize() {
  const int card = current_card();
  TOPS_CHECK(card, topsDeviceSynchronize());
  return TFL_OK;
}

tfl_status rt_mem_get_info(size_t* free_bytes, size_t* total_bytes) {
  const int card = current_card();
  TOPS_CHECK(card, topsMemGetInfo(free_bytes, total_bytes));
  return TFL_OK;
}

tfl_status rt_device_name(int device, char* buf, size_t len) {
  if (!buf || len == 0) return fail(TFL_ERROR_INVALID_VALUE, "device_name: empty buffer");
  if (device < 0 || device >= g_count)
    return fail(TFL_ERROR_INVALID_DEVICE, "topsrt runtime: no GCU card " + std::to_string(device));
  std::snprintf(buf, len, "Enflame GCU %d (topsrt)", device);
  return TFL_OK;
}

tfl_status rt_malloc(void** ptr, size_t size) {
  if (!ptr) return fail(TFL_ERROR_INVALID_VALUE, "malloc: NULL out-parameter");
  if (size == 0) {
    *ptr = nullptr;
    return TFL_OK;
  }
  const int card = current_card();
  void* p = nullptr;
  TOPS_CHECK(card, topsMalloc(&p, size), std::to_string(size) + " bytes");
  g_allocations.add_device(p, size, card);
  *ptr = p;
  return TFL_OK;
}

tfl_status rt_free(void* ptr) {
  if (!ptr) return TFL_OK;
  torch_fl::kit::Allocation a;
  if (!g_allocations.device_start(ptr, &a)) {
    // Only an allocation's start is freed: topsFree of an inside pointer would leave the
    // allocation recorded (and the SDK's answer to it is not defined).
    return fail(TFL_ERROR_INVALID_POINTER,
                "topsrt runtime: free of " + pointer_text(ptr) +
                    (a.device >= 0 ? ", inside an allocation of GCU card " +
                                         std::to_string(a.device) + " but not its start"
                                   : ", which no GCU card allocated"));
  }
  {
    ENTER_CARD(a.device);  // device-scoped: free with the owner current
    TOPS_CHECK(a.device, topsFree(ptr));
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
  void* p = nullptr;
  TOPS_CHECK(-1, topsHostMalloc(&p, size, topsHostMallocDefault), std::to_string(size) + " bytes");
  g_allocations.add_host(p, size);
  *ptr = p;
  return TFL_OK;
}

tfl_status rt_host_free(void* ptr) {
  if (!ptr) return TFL_OK;
  if (!g_allocations.host_start(ptr)) {
    return fail(TFL_ERROR_INVALID_POINTER, "topsrt runtime: host_free of " + pointer_text(ptr) +
                                               ", which host_malloc did not return");
  }
  TOPS_CHECK(-1, topsHostFree(ptr));
  g_allocations.remove_host(ptr);
  return TFL_OK;
}

tfl_status rt_pointer_info(const void* ptr, tfl_pointer_kind* kind, int* device) {
  if (!kind || !device) return fail(TFL_ERROR_INVALID_VALUE, "pointer_info: NULL out-parameter");
  g_allocations.pointer_info(ptr, kind, device);
  return TFL_OK;
}

// Cross-card bytes, synchronously: topsMemcpyPeer with the source card current.
tfl_status peer_sync(void* dst, int dcard, const void* src, int scard, size_t n) {
  ENTER_CARD(scard);
  TOPS_CHECK(scard, topsMemcpyPeer(dst, dcard, src, scard, n),
             "GCU card " + std::to_string(scard) + " -> card " + std::to_string(dcard) + ", " +
                 std::to_string(n) + " bytes");
  return TFL_OK;
}

tfl_status rt_memcpy(void* dst, const void* src, size_t n, tfl_memcpy_kind kind) {
  if (n == 0) return TFL_OK;
  int card = -1, other = -1;
  if (tfl_status s = copy_card(dst, src, kind, &card, &other)) return s;
  if (kind == TFL_MEMCPY_HOST_TO_HOST) {
    std::memmove(dst, src, n);
    return TFL_OK;
  }
  if (kind == TFL_MEMCPY_DEVICE_TO_DEVICE && other != card)
    return peer_sync(dst, other, src, card, n);
  ENTER_CARD(card);
  // "after the current device's default stream work": order behind it first.
  tfl_stream_st* ds = nullptr;
  if (tfl_status s = default_stream(card, &ds)) return s;
  TOPS_CHECK(card, topsStreamSynchronize(ds->stream));
  TOPS_CHECK(card, topsMemcpy(dst, src, n, tops_kind(kind)),
             std::string(memcpy_kind_name(kind)) + ", " + std::to_string(n) + " bytes");
  return TFL_OK;
}

tfl_status rt_memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device,
                                size_t n, tfl_stream stream);

tfl_status rt_memcpy_async(void* dst, const void* src, size_t n, tfl_memcpy_kind kind,
                           tfl_stream stream) {
  if (n == 0) return TFL_OK;
  int card = -1, other = -1;
  if (tfl_status s = copy_card(dst, src, kind, &card, &other)) return s;
  if (kind == TFL_MEMCPY_HOST_TO_HOST) {
    RESOLVE(st, stream);
    ENTER_CARD(st->device);
    TOPS_CHECK(st->device, topsStreamSynchronize(st->stream));
    std::memmove(dst, src, n);
    return TFL_OK;
  }
  if (kind == TFL_MEMCPY_DEVICE_TO_DEVICE && other != card) {
    return rt_memcpy_peer_async(dst, other, src, card, n, stream);
  }
  RESOLVE(st, stream);
  if (st->device != card) {
    return fail(TFL_ERROR_INVALID_VALUE, std::string("topsrt runtime: memcpy_async ") +
                                             memcpy_kind_name(kind) + " on GCU card " +
                                             std::to_string(card) + " was given a stream of card " +
                                             std::to_string(st->device));
  }
  ENTER_CARD(card);
  TOPS_CHECK(card, topsMemcpyAsync(dst, src, n, tops_kind(kind), st->stream),
             std::string(memcpy_kind_name(kind)) + ", " + std::to_string(n) + " bytes");
  return TFL_OK;
}

// The peer event barrier's SDK steps (kit::stream_after).
struct TopsOrder {
  tfl_status record(tfl_stream_st* signal, topsEvent_t* ev) const {
    ENTER_CARD(signal->device);
    TOPS_CHECK(signal->device, topsEventCreateWithFlags(ev, topsEventDisableTiming));
    const topsError_t e = topsEventRecord(*ev, signal->stream);
    if (e != topsSuccess) {
      (void)topsEventDestroy(*ev);
      return fail_tops("topsEventRecord", signal->device, e);
    }
    return TFL_OK;
  }
  tfl_status wait(tfl_stream_st* waiter, topsEvent_t ev) const {
    ENTER_CARD(waiter->device);
    TOPS_CHECK(waiter->device, topsStreamWaitEvent(waiter->stream, ev, 0));
    return TFL_OK;
  }
  void destroy(tfl_stream_st* signal, topsEvent_t ev) const {
    CardScope back(signal->device);
    (void)topsEventDestroy(ev);
  }
};

// Makes `waiter` wait for the work queued so far on `signal` (both streams).
tfl_status stream_after(tfl_stream_st* waiter, tfl_stream_st* signal) {
  return torch_fl::kit::stream_after<topsEvent_t>(waiter, signal, TopsOrder{});
}

tfl_status rt_memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device,
                                size_t n, tfl_stream stream) {
  if (n == 0) return TFL_OK;
  const int d = owner_of(dst), s = owner_of(src);
  if (d != dst_device || s != src_device) {
    return fail(
        TFL_ERROR_INVALID_POINTER,
        "topsrt runtime: memcpy_peer_async dst " + pointer_text(dst) + " is " +
            (d >= 0 ? "on GCU card " + std::to_string(d) : std::string("not a device pointer")) +
            " (expected card " + std::to_string(dst_device) + "), src " + pointer_text(src) +
            " is " +
            (s >= 0 ? "on GCU card " + std::to_string(s) : std::string("not a device pointer")) +
            " (expected card " + std::to_string(src_device) + ")");
  }
  RESOLVE(st, stream);
  if (st->device == src_device) {
    // The SDK's rule: current card and stream both of the source card.
    ENTER_CARD(src_device);
    TOPS_CHECK(src_device, topsMemcpyPeerAsync(dst, dst_device, src, src_device, n, st->stream),
               "GCU card " + std::to_string(src_device) + " -> card " + std::to_string(dst_device) +
                   ", " + std::to_string(n) + " bytes");
    return TFL_OK;
  }
  // A stream of another card: run the copy on the source card's default
  // stream, ordered after `stream` and with `stream` ordered after it.
  tfl_stream_st* src_default = nullptr;
  if (tfl_status e = default_stream(src_device, &src_default)) return e;
  return torch_fl::kit::run_in_order_of(st, src_default, stream_after, [&](tfl_stream_st* runner) {
    ENTER_CARD(src_device);
    TOPS_CHECK(src_device, topsMemcpyPeerAsync(dst, dst_device, src, src_device, n, runner->stream),
               "GCU card " + std::to_string(src_device) + " -> card " + std::to_string(dst_device) +
                   ", " + std::to_string(n) + " bytes");
    return TFL_OK;
  });
}

tfl_status rt_memset_async(void* ptr, int value, size_t n, tfl_stream stream) {
  if (n == 0) return TFL_OK;
  const int card = owner_of(ptr);
  if (card < 0) {
    return fail(TFL_ERROR_INVALID_POINTER, "topsrt runtime: memset_async of " + pointer_text(ptr) +
                                               ", which no GCU card allocated");
  }
  RESOLVE(st, stream);
  if (st->device != card) {
    return fail(TFL_ERROR_INVALID_VALUE,
                "topsrt runtime: memset_async of a GCU card " + std::to_string(card) +
                    " pointer on a stream of card " + std::to_string(st->device));
  }
  ENTER_CARD(card);
  TOPS_CHECK(card, topsMemsetAsync(ptr, value, n, st->stream));
  return TFL_OK;
}

tfl_status rt_stream_create(tfl_stream* stream, int priority) {
  if (!stream) return fail(TFL_ERROR_INVALID_VALUE, "stream_create: NULL out-parameter");
  // topsrt has no stream priorities: every stream is created alike.
  const int card = current_card();
  topsStream_t s = nullptr;
  TOPS_CHECK(card, topsStreamCreateWithFlags(&s, topsStreamNonBlocking));
  *stream = new tfl_stream_st{s, card};
  return TFL_OK;
}

tfl_status rt_stream_destroy(tfl_stream stream) {
  if (!stream)
    return fail(TFL_ERROR_INVALID_HANDLE, "stream_destroy: the default stream is not destroyed");
  {
    ENTER_CARD(stream->device);
    TOPS_CHECK(stream->device, topsStreamDestroy(stream->stream));
  }
  delete stream;
  return TFL_OK;
}

tfl_status rt_stream_synchronize(tfl_stream stream) {
  RESOLVE(st, stream);
  ENTER_CARD(st->device);
  TOPS_CHECK(st->device, topsStreamSynchronize(st->stream));
  return TFL_OK;
}

tfl_status rt_stream_query(tfl_stream stream) {
  RESOLVE(st, stream);
  ENTER_CARD(st->device);
  const topsError_t e = topsStreamQuery(st->stream);
  if (e == topsErrorNotReady) return TFL_ERROR_NOT_READY;
  if (e != topsSuccess) return fail_tops("topsStreamQuery", st->device, e);
  return TFL_OK;
}

tfl_status rt_stream_wait_event(tfl_stream stream, tfl_event event) {
  if (!event) return fail(TFL_ERROR_INVALID_HANDLE, "stream_wait_event: NULL event");
  RESOLVE(st, stream);
  ENTER_CARD(st->device);
  TOPS_CHECK(st->device, topsStreamWaitEvent(st->stream, event->event, 0));
  return TFL_OK;
}

tfl_status rt_launch_host_func(tfl_stream stream, tfl_host_fn fn, void* user_data) {
  if (!fn) return fail(TFL_ERROR_INVALID_VALUE, "launch_host_func: NULL function");
  RESOLVE(st, stream);
  topsEvent_t ev = nullptr;
  {
    ENTER_CARD(st->device);
    TOPS_CHECK(st->device, topsEventCreateWithFlags(&ev, topsEventDisableTiming));
    const topsError_t e = topsEventRecord(ev, st->stream);
    if (e != topsSuccess) {
      (void)topsEventDestroy(ev);
      return fail_tops("topsEventRecord", st->device, e);
    }
  }
  const int card = st->device;
  g_host_functions->launch(
      [ev, card] {
        CardScope scope(card);
        (void)topsEventSynchronize(ev);
        (void)topsEventDestroy(ev);
      },
      fn, user_data);
  return TFL_OK;
}

tfl_status rt_event_create(tfl_event* event, uint32_t flags) {
  if (!event) return fail(TFL_ERROR_INVALID_VALUE, "event_create: NULL out-parameter");
  if (flags & ~static_cast<uint32_t>(TFL_EVENT_DISABLE_TIMING))
    return fail(TFL_ERROR_INVALID_VALUE, "event_create: unknown flags " + std::to_string(flags));
  const int card = current_card();
  topsEvent_t e = nullptr;
  TOPS_CHECK(
      card, topsEventCreateWithFlags(&e, (flags & TFL_EVENT_DISABLE_TIMING) ? topsEventDisableTiming
                                                                            : topsEventDefault));
  *event = new tfl_event_st{e, card, flags};
  return TFL_OK;
}

tfl_status rt_event_destroy(tfl_event event) {
  if (!event) return fail(TFL_ERROR_INVALID_HANDLE, "event_destroy: NULL event");
  {
    ENTER_CARD(event->device);
    TOPS_CHECK(event->device, topsEventDestroy(event->event));
  }
  delete event;
  return TFL_OK;
}

tfl_status rt_event_record(tfl_event event, tfl_stream stream) {
  if (!event) return fail(TFL_ERROR_INVALID_HANDLE, "event_record: NULL event");
  RESOLVE(st, stream);
  ENTER_CARD(st->device);
  TOPS_CHECK(st->device, topsEventRecord(event->event, st->stream));
  event->device = st->device;
  return TFL_OK;
}

tfl_status rt_event_synchronize(tfl_event event) {
  if (!event) return fail(TFL_ERROR_INVALID_HANDLE, "event_synchronize: NULL event");
  ENTER_CARD(event->device);
  TOPS_CHECK(event->device, topsEventSynchronize(event->event));
  return TFL_OK;
}

tfl_status rt_event_query(tfl_event event) {
  if (!event) return fail(TFL_ERROR_INVALID_HANDLE, "event_query: NULL event");
  ENTER_CARD(event->device);
  const topsError_t e = topsEventQuery(event->event);
  if (e == topsErrorNotReady) return TFL_ERROR_NOT_READY;
  if (e != topsSuccess) return fail_tops("topsEventQuery", event->device, e);
  return TFL_OK;
}

tfl_status rt_event_elapsed_ms(float* ms, tfl_event start, tfl_event end) {
  if (!ms || !start || !end)
    return fail(TFL_ERROR_INVALID_VALUE, "event_elapsed_ms: NULL argument");
  ENTER_CARD(end->device);
  const topsError_t e = topsEventElapsedTime(ms, start->event, end->event);
  if (e == topsErrorNotReady)
    return fail_tops("topsEventElapsedTime", end->device, e, "an event has not completed");
  if (e != topsSuccess) return fail_tops("topsEventElapsedTime", end->device, e);
  return TFL_OK;
}

// v1.2: the topsStream_t behind a runtime stream (NULL: `device`'s default stream).
tfl_status rt_native_stream(tfl_stream stream, int device, void** out) {
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

// v1.2: presence check without torch: number of cards, or a message why none.
tfl_status rt_probe(int* count, char* msg, size_t len) {
  if (count) *count = 0;
  if (msg && len) msg[0] = '\0';
  if (!count) return fail(TFL_ERROR_INVALID_VALUE, "probe: NULL out-parameter");
  int n = 0;
  const topsError_t e = topsGetDeviceCount(&n);
  if (e == topsSuccess) {
    *count = n;
    if (n == 0 && msg && len) std::snprintf(msg, len, "topsGetDeviceCount reports no GCU card");
    return TFL_OK;
  }
  if (msg && len) std::snprintf(msg, len, "topsGetDeviceCount failed: %s", topsGetErrorString(e));
  return to_status(e);
}

// v1.1 IPC: not wired to topsrt's IPC yet; flagos tensors cannot be sent to other processes.
constexpr std::nullptr_t rt_ipc_get_handle = nullptr;
constexpr std::nullptr_t rt_ipc_open_handle = nullptr;
constexpr std::nullptr_t rt_ipc_close_handle = nullptr;

// v1.3 device graphs: the TopsRider SDK this vendor targets documents no stream-capture API, so
// the seat stays empty and torch.flagos graphs raise naming the runtime (docs/gcu.md).
constexpr std::nullptr_t rt_graph_capture_begin = nullptr;
constexpr std::nullptr_t rt_graph_capture_end = nullptr;
constexpr std::nullptr_t rt_graph_instantiate = nullptr;
constexpr std::nullptr_t rt_graph_launch = nullptr;
constexpr std::nullptr_t rt_graph_destroy = nullptr;
constexpr std::nullptr_t rt_stream_capture_status = nullptr;

// No host-addressable memory (GCU memory is device-scoped); topsaten and Triton kernels on one
// stream are not ordered by the hardware.
TFL_KIT_RUNTIME_TABLE(kTable, "topsrt",
                      TFL_CAP_PEER_COPY | TFL_CAP_EVENT_TIMING | TFL_CAP_UNORDERED_PRODUCERS |
                          TFL_CAP_PINNED_HOST_MEMORY);

}  // namespace

TFL_KIT_RUNTIME_ENTRY(kTable)
