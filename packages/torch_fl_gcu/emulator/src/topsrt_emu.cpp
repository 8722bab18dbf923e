// libtopsrt.so of the torch-fl TopsRider emulator: cards in host memory that
// enforce the contract measured on Enflame hardware (docs/gcu.md, "The
// runtime over topsrt"):
//  - device pointers are device-scoped: a pointer resolves only while its card
//    is current (free/memcpy/memset run with the owner current; H2D: dst
//    decides, D2H and D2D: src decides). Addresses are NOT host addressable:
//    they live in an unmapped virtual range, so host code that dereferences
//    one crashes as it would on the card.
//  - topsMemcpy(DeviceToDevice) between two cards fails and leaves the
//    destination untouched, under every current card;
//  - topsMemcpyPeer needs the current card to be one of the two;
//    topsMemcpyPeerAsync also needs the stream to belong to the source card
//    (the hardware hangs; the emulator reports an error so tests catch it);
//  - default streams are per card, created lazily while the card is current;
//  - work of a second producer (topsEmuLaunchForeign, a Triton kernel) queued
//    on a stream is not waited for by the SDK's own work submitted behind it.
// SDK work itself runs synchronously at submission (a valid schedule of an
// in-order stream), which keeps the emulator deterministic.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "emu_internal.h"
#include "tops_emulator.h"
#include "tops_runtime_api.h"

#define EMU_API extern "C" __attribute__((visibility("default")))

struct itopsStream_t {
  int device = 0;
  bool is_default = false;
  // Foreign (Triton) work not yet drained, oldest first.
  struct Item {
    uint64_t seq;
    void* dst;
    std::vector<char> bytes;
  };
  std::deque<Item> pending;
  uint64_t next_seq = 1;
  uint64_t done_seq = 0;  // every item with seq <= done_seq has run
};

struct itopsEvent_t {
  unsigned flags = 0;
  bool recorded = false;
  itopsStream_t* stream = nullptr;
  uint64_t wait_seq = 0;  // foreign work of `stream` the event is behind
  std::chrono::steady_clock::time_point when{};
};

namespace {

constexpr uintptr_t kBase = 0x200000000000ull;     // 32 TiB: outside glibc's heap and mmap areas
constexpr uintptr_t kCardSpan = 0x10000000000ull;  // 1 TiB of address space per card

struct Allocation {
  size_t size;
  std::unique_ptr<char[]> host;
};

struct Card {
  size_t capacity = 0;
  size_t used = 0;
  uintptr_t next = 0;
  std::map<uintptr_t, Allocation> allocations;  // by start address
  itopsStream_t* default_stream = nullptr;
};

std::recursive_mutex g_mutex;
int g_count = -1;
std::vector<Card>* g_cards = nullptr;
std::set<itopsStream_t*>* g_streams = nullptr;
std::set<itopsEvent_t*>* g_events = nullptr;
std::set<void*>* g_host = nullptr;
std::unordered_map<std::string, uint64_t>* g_calls = nullptr;
std::unordered_map<std::string, std::pair<int, int>>* g_faults = nullptr;  // name -> (nth, status)
thread_local int t_device = 0;
thread_local topsError_t t_last = topsSuccess;

void init_locked() {
  if (g_count >= 0) return;
  const char* n = std::getenv("TOPS_EMU_DEVICE_COUNT");
  const char* mb = std::getenv("TOPS_EMU_MEMORY_MB");
  g_count = n ? std::max(0, std::atoi(n)) : 2;
  const size_t cap = (mb ? static_cast<size_t>(std::atoll(mb)) : 4096) << 20;
  g_cards = new std::vector<Card>(g_count);
  for (int i = 0; i < g_count; ++i) {
    (*g_cards)[i].capacity = cap;
    (*g_cards)[i].next = kBase + kCardSpan * static_cast<uintptr_t>(i);
  }
  g_streams = new std::set<itopsStream_t*>();
  g_events = new std::set<itopsEvent_t*>();
  g_host = new std::set<void*>();
  g_calls = new std::unordered_map<std::string, uint64_t>();
  g_faults = new std::unordered_map<std::string, std::pair<int, int>>();
}

using Lock = std::lock_guard<std::recursive_mutex>;

topsError_t fail(topsError_t e) {
  t_last = e;
  return e;
}

int enter_locked(const char* name) {
  init_locked();
  ++(*g_calls)[name];
  auto it = g_faults->find(name);
  if (it == g_faults->end()) return 0;
  if (--it->second.first > 0) return 0;
  const int status = it->second.second;
  g_faults->erase(it);
  return status;
}

// Every API function starts with this: lock, count, injected fault.
#define ENTER(name)    \
  Lock _lock(g_mutex); \
  if (int _inj = enter_locked(name)) return fail(static_cast<topsError_t>(_inj))

// The allocation of `card` containing [p, p + n), or nullptr.
char* resolve_on(int card, const void* p, size_t n) {
  if (card < 0 || card >= g_count || p == nullptr) return nullptr;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto& allocs = (*g_cards)[card].allocations;
  auto it = allocs.upper_bound(a);
  if (it == allocs.begin()) return nullptr;
  --it;
  if (a + n > it->first + it->second.size || a < it->first) return nullptr;
  return it->second.host.get() + (a - it->first);
}

// Which card's address range p falls in (whether or not it is allocated): -1 for none.
int card_of_range(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (a < kBase) return -1;
  const uintptr_t i = (a - kBase) / kCardSpan;
  return i < static_cast<uintptr_t>(g_count) ? static_cast<int>(i) : -1;
}

// The card owning a live allocation that contains p, or -1.
int owner_of(const void* p) {
  const int c = card_of_range(p);
  return c >= 0 && resolve_on(c, p, 1) ? c : -1;
}

itopsStream_t* default_stream_locked(int card) {
  auto& c = (*g_cards)[card];
  if (!c.default_stream) {
    c.default_stream = new itopsStream_t();
    c.default_stream->device = card;
    c.default_stream->is_default = true;
    g_streams->insert(c.default_stream);
  }
  return c.default_stream;
}

// NULL -> the current card's default stream; nullptr for an unknown handle.
itopsStream_t* stream_of(topsStream_t s) {
  if (s == nullptr) return t_device < g_count ? default_stream_locked(t_device) : nullptr;
  return g_streams->count(s) ? s : nullptr;
}

void drain(itopsStream_t* s, uint64_t upto) {
  while (!s->pending.empty() && s->pending.front().seq <= upto) {
    auto& item = s->pending.front();
    char* dst = resolve_on(s->device, item.dst, item.bytes.size());
    if (dst) std::memcpy(dst, item.bytes.data(), item.bytes.size());
    s->done_seq = item.seq;
    s->pending.pop_front();
  }
  if (s->pending.empty()) s->done_seq = s->next_seq - 1;
}

void drain_all(itopsStream_t* s) { drain(s, UINT64_MAX); }

bool valid_card(int d) { return d >= 0 && d < g_count; }

}  // namespace

// ---- internals for libtopsaten ----

EMU_API void* topsEmuInternalResolve(const void* ptr, size_t bytes) {
  Lock lock(g_mutex);
  init_locked();
  return resolve_on(t_device, ptr, std::max<size_t>(bytes, 1));
}

EMU_API int topsEmuInternalStreamDevice(topsStream_t stream) {
  Lock lock(g_mutex);
  init_locked();
  itopsStream_t* s = stream_of(stream);
  return s ? s->device : -1;
}

EMU_API int topsEmuInternalEnter(const char* name) {
  Lock lock(g_mutex);
  return enter_locked(name);
}

// ---- devices ----

EMU_API topsError_t topsGetDeviceCount(int* count) {
  ENTER("topsGetDeviceCount");
  if (!count) return fail(topsErrorInvalidValue);
  *count = g_count;
  return g_count > 0 ? topsSuccess : fail(topsErrorNoDevice);
}

EMU_API topsError_t topsGetDevice(int* device) {
  ENTER("topsGetDevice");
  if (!device) return fail(topsErrorInvalidValue);
  if (g_count == 0) return fail(topsErrorNoDevice);
  *device = t_device;
  return topsSuccess;
}

EMU_API topsError_t topsSetDevice(int device) {
  ENTER("topsSetDevice");
  if (!valid_card(device)) return fail(topsErrorInvalidDevice);
  t_device = device;
  return topsSuccess;
}

EMU_API topsError_t topsDeviceSynchronize(void) {
  ENTER("topsDeviceSynchronize");
  if (!valid_card(t_device)) return fail(topsErrorNoDevice);
  for (itopsStream_t* s : *g_streams) {
    if (s->device == t_device) drain_all(s);
  }
  return topsSuccess;
}

EMU_API topsError_t topsMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  ENTER("topsMemGetInfo");
  if (!free_bytes || !total_bytes) return fail(topsErrorInvalidValue);
  if (!valid_card(t_device)) return fail(topsErrorNoDevice);
  const Card& c = (*g_cards)[t_device];
  *free_bytes = c.capacity - c.used;
  *total_bytes = c.capacity;
  return topsSuccess;
}

// ---- memory ----

EMU_API topsError_t topsMalloc(void** ptr, size_t size) {
  ENTER("topsMalloc");
  if (!ptr) return fail(topsErrorInvalidValue);
  if (!valid_card(t_device)) return fail(topsErrorNoDevice);
  if (size == 0) {
    *ptr = nullptr;
    return topsSuccess;
  }
  Card& c = (*g_cards)[t_device];
  if (size > c.capacity - c.used) return fail(topsErrorOutOfMemory);
  std::unique_ptr<char[]> host(new (std::nothrow) char[size]);
  if (!host) return fail(topsErrorOutOfMemory);
  const uintptr_t addr = c.next;
  c.next += (size + 511) & ~static_cast<uintptr_t>(511);
  c.used += size;
  c.allocations.emplace(addr, Allocation{size, std::move(host)});
  *ptr = reinterpret_cast<void*>(addr);
  return topsSuccess;
}

EMU_API topsError_t topsFree(void* ptr) {
  ENTER("topsFree");
  if (!ptr) return topsSuccess;
  if (!valid_card(t_device)) return fail(topsErrorNoDevice);
  Card& c = (*g_cards)[t_device];
  auto it = c.allocations.find(reinterpret_cast<uintptr_t>(ptr));
  // Another card's pointer does not resolve while this card is current.
  if (it == c.allocations.end()) return fail(topsErrorInvalidDevicePointer);
  c.used -= it->second.size;
  c.allocations.erase(it);
  return topsSuccess;
}

EMU_API topsError_t topsHostMalloc(void** ptr, size_t size, unsigned int flags) {
  ENTER("topsHostMalloc");
  if (!ptr) return fail(topsErrorInvalidValue);
  if (size == 0) {
    *ptr = nullptr;
    return topsSuccess;
  }
  void* p = std::malloc(size);
  if (!p) return fail(topsErrorOutOfMemory);
  g_host->insert(p);
  *ptr = p;
  return topsSuccess;
}

EMU_API topsError_t topsHostFree(void* ptr) {
  ENTER("topsHostFree");
  if (!ptr) return topsSuccess;
  if (!g_host->erase(ptr)) return fail(topsErrorInvalidValue);
  std::free(ptr);
  return topsSuccess;
}

EMU_API topsError_t topsPointerGetAttributes(topsPointerAttribute_t* attr, const void* ptr) {
  ENTER("topsPointerGetAttributes");
  if (!attr || !ptr) return fail(topsErrorInvalidValue);
  if (resolve_on(t_device, ptr, 1)) {
    attr->memoryType = topsMemoryTypeDevice;
    attr->device = t_device;
    attr->device_pointer = const_cast<void*>(ptr);
    attr->host_pointer = nullptr;
    attr->isManaged = 0;
    attr->allocationFlags = 0;
    return topsSuccess;
  }
  for (void* h : *g_host) {
    if (h == ptr) {
      attr->memoryType = topsMemoryTypeHost;
      attr->device = -1;
      attr->device_pointer = nullptr;
      attr->host_pointer = const_cast<void*>(ptr);
      attr->isManaged = 0;
      attr->allocationFlags = 0;
      return topsSuccess;
    }
  }
  // Device-scoped: another card's pointer is unknown while this card is current.
  return fail(topsErrorInvalidValue);
}

namespace {

// One copy with the rules of quirk 1 and 2. `stream` only orders nothing here:
// SDK work runs at submission, ahead of queued foreign work.
topsError_t copy_locked(void* dst, const void* src, size_t n, topsMemcpyKind kind) {
  if (n == 0) return topsSuccess;
  if (!dst || !src) return fail(topsErrorInvalidValue);
  if (kind == topsMemcpyDefault) {
    const bool d_dev = card_of_range(dst) >= 0, s_dev = card_of_range(src) >= 0;
    kind = d_dev ? (s_dev ? topsMemcpyDeviceToDevice : topsMemcpyHostToDevice)
                 : (s_dev ? topsMemcpyDeviceToHost : topsMemcpyHostToHost);
  }
  switch (kind) {
    case topsMemcpyHostToHost:
      if (card_of_range(dst) >= 0 || card_of_range(src) >= 0)
        return fail(topsErrorInvalidMemcpyDirection);
      std::memmove(dst, src, n);
      return topsSuccess;
    case topsMemcpyHostToDevice: {
      if (card_of_range(src) >= 0) return fail(topsErrorInvalidMemcpyDirection);
      char* d = resolve_on(t_device, dst, n);
      if (!d) return fail(topsErrorInvalidDevicePointer);
      std::memcpy(d, src, n);
      return topsSuccess;
    }
    case topsMemcpyDeviceToHost: {
      if (card_of_range(dst) >= 0) return fail(topsErrorInvalidMemcpyDirection);
      char* s = resolve_on(t_device, src, n);
      if (!s) return fail(topsErrorInvalidDevicePointer);
      std::memcpy(dst, s, n);
      return topsSuccess;
    }
    case topsMemcpyDeviceToDevice: {
      char* s = resolve_on(t_device, src, n);
      char* d = resolve_on(t_device, dst, n);
      // Two cards: the measured failure -- an error, and dst byte-for-byte unchanged.
      if (!s || !d) return fail(topsErrorInvalidDevicePointer);
      std::memmove(d, s, n);
      return topsSuccess;
    }
    default:
      return fail(topsErrorInvalidMemcpyDirection);
  }
}

topsError_t peer_locked(void* dst, int dst_dev, const void* src, int src_dev, size_t n) {
  if (!valid_card(dst_dev) || !valid_card(src_dev)) return fail(topsErrorInvalidDevice);
  if (t_device != dst_dev && t_device != src_dev) return fail(topsErrorInvalidDevice);
  if (n == 0) return topsSuccess;
  char* s = resolve_on(src_dev, src, n);
  char* d = resolve_on(dst_dev, dst, n);
  if (!s || !d) return fail(topsErrorInvalidDevicePointer);
  std::memmove(d, s, n);
  return topsSuccess;
}

}  // namespace

EMU_API topsError_t topsMemcpy(void* dst, const void* src, size_t bytes, topsMemcpyKind kind) {
  ENTER("topsMemcpy");
  if (!valid_card(t_device)) return fail(topsErrorNoDevice);
  return copy_locked(dst, src, bytes, kind);
}

EMU_API topsError_t topsMemcpyAsync(void* dst, const void* src, size_t bytes, topsMemcpyKind kind,
                                    topsStream_t stream) {
  ENTER("topsMemcpyAsync");
  itopsStream_t* s = stream_of(stream);
  if (!s) return fail(topsErrorInvalidHandle);
  if (s->device != t_device) return fail(topsErrorInvalidValue);
  return copy_locked(dst, src, bytes, kind);
}

EMU_API topsError_t topsMemcpyPeer(void* dst, int dstDevice, const void* src, int srcDevice,
                                   size_t bytes) {
  ENTER("topsMemcpyPeer");
  return peer_locked(dst, dstDevice, src, srcDevice, bytes);
}

EMU_API topsError_t topsMemcpyPeerAsync(void* dst, int dstDevice, const void* src, int srcDevice,
                                        size_t bytes, topsStream_t stream) {
  ENTER("topsMemcpyPeerAsync");
  itopsStream_t* s = stream_of(stream);
  if (!s) return fail(topsErrorInvalidHandle);
  // On the card this stalls the caller; reported here so tests see it.
  if (s->device != srcDevice) return fail(topsErrorInvalidValue);
  return peer_locked(dst, dstDevice, src, srcDevice, bytes);
}

EMU_API topsError_t topsMemset(void* dst, int value, size_t bytes) {
  ENTER("topsMemset");
  if (bytes == 0) return topsSuccess;
  char* d = resolve_on(t_device, dst, bytes);
  if (!d) return fail(topsErrorInvalidDevicePointer);
  std::memset(d, value, bytes);
  return topsSuccess;
}

EMU_API topsError_t topsMemsetAsync(void* dst, int value, size_t bytes, topsStream_t stream) {
  ENTER("topsMemsetAsync");
  itopsStream_t* s = stream_of(stream);
  if (!s) return fail(topsErrorInvalidHandle);
  if (s->device != t_device) return fail(topsErrorInvalidValue);
  if (bytes == 0) return topsSuccess;
  char* d = resolve_on(t_device, dst, bytes);
  if (!d) return fail(topsErrorInvalidDevicePointer);
  std::memset(d, value, bytes);
  return topsSuccess;
}

// ---- streams ----

EMU_API topsError_t topsStreamCreateWithFlags(topsStream_t* stream, unsigned int flags) {
  ENTER("topsStreamCreateWithFlags");
  if (!stream || flags > topsStreamNonBlocking) return fail(topsErrorInvalidValue);
  if (!valid_card(t_device)) return fail(topsErrorNoDevice);
  auto* s = new itopsStream_t();
  s->device = t_device;
  g_streams->insert(s);
  *stream = s;
  return topsSuccess;
}

EMU_API topsError_t topsStreamCreate(topsStream_t* stream) {
  return topsStreamCreateWithFlags(stream, topsStreamDefault);
}

EMU_API topsError_t topsStreamDestroy(topsStream_t stream) {
  ENTER("topsStreamDestroy");
  if (!stream || !g_streams->count(stream) || stream->is_default)
    return fail(topsErrorInvalidHandle);
  drain_all(stream);
  for (itopsEvent_t* e : *g_events) {
    if (e->stream == stream) e->stream = nullptr;
  }
  g_streams->erase(stream);
  delete stream;
  return topsSuccess;
}

EMU_API topsError_t topsStreamQuery(topsStream_t stream) {
  ENTER("topsStreamQuery");
  itopsStream_t* s = stream_of(stream);
  if (!s) return fail(topsErrorInvalidHandle);
  if (s->pending.empty()) return topsSuccess;
  drain_all(s);  // the card makes progress; the caller sees it next time
  return topsErrorNotReady;
}

EMU_API topsError_t topsStreamSynchronize(topsStream_t stream) {
  ENTER("topsStreamSynchronize");
  itopsStream_t* s = stream_of(stream);
  if (!s) return fail(topsErrorInvalidHandle);
  drain_all(s);
  return topsSuccess;
}

EMU_API topsError_t topsStreamWaitEvent(topsStream_t stream, topsEvent_t event,
                                        unsigned int flags) {
  ENTER("topsStreamWaitEvent");
  itopsStream_t* s = stream_of(stream);
  if (!s || !event || !g_events->count(event)) return fail(topsErrorInvalidHandle);
  // Everything before the event becomes visible to work queued on `stream` after this.
  if (event->recorded && event->stream) drain(event->stream, event->wait_seq);
  return topsSuccess;
}

// ---- events ----

EMU_API topsError_t topsEventCreateWithFlags(topsEvent_t* event, unsigned flags) {
  ENTER("topsEventCreateWithFlags");
  if (!event || flags > (topsEventBlockingSync | topsEventDisableTiming))
    return fail(topsErrorInvalidValue);
  auto* e = new itopsEvent_t();
  e->flags = flags;
  g_events->insert(e);
  *event = e;
  return topsSuccess;
}

EMU_API topsError_t topsEventCreate(topsEvent_t* event) {
  return topsEventCreateWithFlags(event, topsEventDefault);
}

EMU_API topsError_t topsEventRecord(topsEvent_t event, topsStream_t stream) {
  ENTER("topsEventRecord");
  itopsStream_t* s = stream_of(stream);
  if (!s || !event || !g_events->count(event)) return fail(topsErrorInvalidHandle);
  if (s->device != t_device) return fail(topsErrorInvalidValue);
  event->recorded = true;
  event->stream = s;
  event->wait_seq = s->next_seq - 1;
  event->when = std::chrono::steady_clock::now();
  return topsSuccess;
}

EMU_API topsError_t topsEventSynchronize(topsEvent_t event) {
  ENTER("topsEventSynchronize");
  if (!event || !g_events->count(event)) return fail(topsErrorInvalidHandle);
  if (event->recorded && event->stream) drain(event->stream, event->wait_seq);
  return topsSuccess;
}

EMU_API topsError_t topsEventQuery(topsEvent_t event) {
  ENTER("topsEventQuery");
  if (!event || !g_events->count(event)) return fail(topsErrorInvalidHandle);
  if (event->recorded && event->stream && event->stream->done_seq < event->wait_seq) {
    drain(event->stream, event->wait_seq);
    return topsErrorNotReady;
  }
  return topsSuccess;
}

EMU_API topsError_t topsEventDestroy(topsEvent_t event) {
  ENTER("topsEventDestroy");
  if (!event || !g_events->erase(event)) return fail(topsErrorInvalidHandle);
  delete event;
  return topsSuccess;
}

EMU_API topsError_t topsEventElapsedTime(float* ms, topsEvent_t start, topsEvent_t stop) {
  ENTER("topsEventElapsedTime");
  if (!ms) return fail(topsErrorInvalidValue);
  if (!start || !stop || !g_events->count(start) || !g_events->count(stop))
    return fail(topsErrorInvalidHandle);
  if ((start->flags | stop->flags) & topsEventDisableTiming) return fail(topsErrorInvalidHandle);
  if (!start->recorded || !stop->recorded) return fail(topsErrorInvalidHandle);
  for (itopsEvent_t* e : {start, stop}) {
    if (e->stream && e->stream->done_seq < e->wait_seq) return fail(topsErrorNotReady);
  }
  *ms = std::chrono::duration<float, std::milli>(stop->when - start->when).count();
  return topsSuccess;
}

// ---- errors ----

EMU_API const char* topsGetErrorString(topsError_t error) {
  switch (error) {
    case topsSuccess:
      return "topsSuccess: no error";
    case topsErrorInvalidValue:
      return "topsErrorInvalidValue: invalid argument";
    case topsErrorOutOfMemory:
      return "topsErrorOutOfMemory: out of memory";
    case topsErrorNotInitialized:
      return "topsErrorNotInitialized: initialization error";
    case topsErrorInvalidDevicePointer:
      return "topsErrorInvalidDevicePointer: invalid device pointer";
    case topsErrorInvalidMemcpyDirection:
      return "topsErrorInvalidMemcpyDirection: invalid copy direction";
    case topsErrorNoDevice:
      return "topsErrorNoDevice: no GCU device is detected";
    case topsErrorInvalidDevice:
      return "topsErrorInvalidDevice: invalid device ordinal";
    case topsErrorPeerAccessUnsupported:
      return "topsErrorPeerAccessUnsupported: peer access is not supported";
    case topsErrorInvalidHandle:
      return "topsErrorInvalidHandle: invalid resource handle";
    case topsErrorNotReady:
      return "topsErrorNotReady: device not ready";
    case topsErrorIllegalAddress:
      return "topsErrorIllegalAddress: an illegal memory access was encountered";
    case topsErrorNotSupported:
      return "topsErrorNotSupported: operation not supported";
    case topsErrorUnknown:
      return "topsErrorUnknown: unknown error";
  }
  return "unrecognized topsError_t";
}

EMU_API topsError_t topsGetLastError(void) {
  const topsError_t e = t_last;
  t_last = topsSuccess;
  return e;
}

// ---- emulator controls (tops_emulator.h) ----

namespace {
bool known_call(const std::string& name) { return name.rfind("tops", 0) == 0; }
}  // namespace

EMU_API int topsEmuInjectFault(const char* call, int nth, int status) {
  Lock lock(g_mutex);
  init_locked();
  if (!call || nth < 1 || status == 0 || !known_call(call)) return -1;
  (*g_faults)[call] = {nth, status};
  return 0;
}

EMU_API void topsEmuClearFaults(void) {
  Lock lock(g_mutex);
  init_locked();
  g_faults->clear();
}

EMU_API uint64_t topsEmuCallCount(const char* call) {
  Lock lock(g_mutex);
  init_locked();
  auto it = g_calls->find(call ? call : "");
  return it == g_calls->end() ? 0 : it->second;
}

EMU_API uint64_t topsEmuLiveAllocations(int device) {
  Lock lock(g_mutex);
  init_locked();
  return valid_card(device) ? (*g_cards)[device].allocations.size() : 0;
}

EMU_API uint64_t topsEmuLiveBytes(int device) {
  Lock lock(g_mutex);
  init_locked();
  return valid_card(device) ? (*g_cards)[device].used : 0;
}

EMU_API topsError_t topsEmuLaunchForeign(topsStream_t stream, void* dst, const void* host_src,
                                         size_t bytes) {
  Lock lock(g_mutex);
  init_locked();
  itopsStream_t* s = stream_of(stream);
  if (!s) return fail(topsErrorInvalidHandle);
  if (!resolve_on(s->device, dst, std::max<size_t>(bytes, 1)))
    return fail(topsErrorInvalidDevicePointer);
  itopsStream_t::Item item;
  item.seq = s->next_seq++;
  item.dst = dst;
  item.bytes.assign(static_cast<const char*>(host_src), static_cast<const char*>(host_src) + bytes);
  s->pending.push_back(std::move(item));
  return topsSuccess;
}

EMU_API uint64_t topsEmuPendingForeign(int device) {
  Lock lock(g_mutex);
  init_locked();
  uint64_t n = 0;
  for (itopsStream_t* s : *g_streams) {
    if (s->device == device) n += s->pending.size();
  }
  return n;
}
