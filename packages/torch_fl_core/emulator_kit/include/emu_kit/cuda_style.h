// A runtime of CUDA's shape (topsrt, the MUSA runtime: CUDA's C API, statuses included, under
// another prefix) emulated over the framework. The contract it enforces:
//  - device pointers are device-scoped and not host-addressable: each device hands out addresses
//    in an unmapped range of its own, and a pointer resolves only against its device, so calls
//    run with the pointer's device current (free, memset, copies: H2D the destination's, D2H and
//    D2D the source's);
//  - a DeviceToDevice copy between two devices' memory fails and moves nothing (peer copies do
//    it, with the current device one of the two; an asynchronous one on a stream of the source);
//  - every device has a default stream (the NULL handle), made at first use; synchronous copies
//    and memsets run in order on it and wait for it;
//  - work queued on a worker stream runs later; memory freed before it ran is a violation and
//    fails the work with kIllegalAddress, the stream's asynchronous error until a
//    synchronisation returns it;
//  - where the SDK has CUDA's stream capture (CudaConfig::graphs), work on a capturing stream is
//    recorded into a graph and each launch of it queues the work again; the calls a capture
//    forbids fail with CUDA's capture statuses and invalidate it (emu_kit/capture.h).
// cuda_style_api.h makes the SDK's extern "C" functions from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "emu_kit/capture.h"
#include "emu_kit/event.h"
#include "emu_kit/handles.h"
#include "emu_kit/ledger.h"
#include "emu_kit/memory.h"
#include "emu_kit/stream.h"

namespace emu_kit {

// CUDA's values, which the CUDA-shaped SDKs keep.
namespace cuda {
// Statuses.
constexpr int kSuccess = 0, kInvalidValue = 1, kOutOfMemory = 2, kNotInitialized = 3;
constexpr int kInvalidDevicePointer = 17, kInvalidMemcpyDirection = 21;
constexpr int kNoDevice = 100, kInvalidDevice = 101, kPeerAccessUnsupported = 217;
constexpr int kInvalidHandle = 400, kIllegalState = 401, kNotReady = 600, kIllegalAddress = 700;
constexpr int kNotSupported = 801, kUnknown = 999;
// Stream capture's statuses.
constexpr int kStreamCaptureUnsupported = 900, kStreamCaptureInvalidated = 901;
constexpr int kStreamCaptureMerge = 902, kStreamCaptureUnmatched = 903;
constexpr int kStreamCaptureUnjoined = 904, kStreamCaptureIsolation = 905;
constexpr int kCapturedEvent = 907, kStreamCaptureWrongThread = 908;
// cudaGraphInstantiate's flags.
constexpr unsigned long long kGraphInstantiateFlags = 0xf;
// Copy kinds.
constexpr int kHostToHost = 0, kHostToDevice = 1, kDeviceToHost = 2, kDeviceToDevice = 3;
constexpr int kDefault = 4;
enum MemoryType : int { kUnregistered = 0, kHost = 1, kDevice = 2 };
constexpr unsigned kStreamNonBlocking = 0x1;
constexpr unsigned kEventBlockingSync = 0x1, kEventDisableTiming = 0x2;
// Stream priorities: lower is greater, as CUDA's.
constexpr int kLeastPriority = 0, kGreatestPriority = -1;
}  // namespace cuda

// What an SDK calls things and where it departs from CUDA. The defaults are CUDA's, under the
// SDK's prefix: "<sdk>FreeHost", "no <SDK>-capable device is detected", the emulator's
// <SDK>_EMU_DEVICE_COUNT (default 2; 0: no device) and <SDK>_EMU_MEMORY_MB (default 4096).
struct CudaConfig {
  CudaConfig(const std::string& sdk, std::string label, Stream::Mode mode);

  std::string sdk;    // the functions' and statuses' prefix: "tops", "musa"
  std::string label;  // names the emulator in violation reports
  Stream::Mode mode;
  std::string ledger_prefix;  // what faults may name (Ledger): "<sdk>" and its other libraries'
  std::string device_kind;    // "no <device_kind> device is detected"
  std::string host_free;      // the SDK's free of pinned host memory, for messages
  std::string device_count_env, memory_mb_env;
  // A DeviceToDevice copy between two devices' memory.
  int cross_device_copy = cuda::kInvalidValue;
  // Pointer attributes of host memory the runtime does not know: kUnregistered with success
  // (CUDA 11+), or kInvalidValue.
  bool unregistered_host = true;
  // Statuses whose enumerator is not CUDA's name ({kOutOfMemory, "OutOfMemory"}).
  std::vector<std::pair<int, std::string>> renamed;
  // The SDK has CUDA's stream capture and graphs (and their statuses' strings).
  bool graphs = false;
};

struct CudaStream : Stream {
  CudaStream(int device, bool is_default, Mode mode, FreedWork freed, int priority_)
      : Stream(device, is_default, mode, freed), priority(priority_) {}
  const int priority;
};
using CudaStreamRef = std::shared_ptr<CudaStream>;

struct PointerInfo {
  int type = cuda::kUnregistered;
  int device = -1;
  void* device_pointer = nullptr;
  void* host_pointer = nullptr;
};

// A span of device memory that work reads or writes.
struct Range {
  const void* ptr;
  size_t bytes;
};
template <class R>
std::vector<Range> ranges_of(const R* r, size_t n) {
  std::vector<Range> out;
  for (size_t i = 0; i < n; ++i) out.push_back(Range{r[i].ptr, r[i].bytes});
  return out;
}

// Work of an op library: runs on the stream's worker with host[i] behind its ranges[i].
using RangeWork = std::function<int(void* const* host, char* msg, size_t len)>;

class CudaRuntime {
 public:
  explicit CudaRuntime(CudaConfig config);
  virtual ~CudaRuntime() = default;
  CudaRuntime(const CudaRuntime&) = delete;
  CudaRuntime& operator=(const CudaRuntime&) = delete;

  // The API, a method per function. `fn` is the SDK function's name: each call is counted and
  // may be failed under it (Ledger). Each returns a status (cuda::k*) and records a failure as
  // the thread's last error.
  int get_device_count(const char* fn, int* count);
  int get_device(const char* fn, int* device);
  int set_device(const char* fn, int device);
  int device_synchronize(const char* fn);
  int stream_priority_range(const char* fn, int* least, int* greatest);
  int mem_get_info(const char* fn, size_t* free_bytes, size_t* total_bytes);
  int mem_alloc(const char* fn, void** ptr, size_t size);
  int mem_free(const char* fn, void* ptr);
  int host_alloc(const char* fn, void** ptr, size_t size);
  int host_free(const char* fn, void* ptr);
  int pointer_attributes(const char* fn, const void* ptr, PointerInfo* info);
  // `async`: on `stream`, a stream of the current device; else in order on the current device's
  // default stream, waited for.
  int copy(const char* fn, void* dst, const void* src, size_t n, int kind, CudaStream* stream,
           bool async);
  int copy_peer(const char* fn, void* dst, int dst_device, const void* src, int src_device,
                size_t n, CudaStream* stream, bool async);
  int fill(const char* fn, void* dst, int value, size_t n, CudaStream* stream, bool async);
  int stream_create(const char* fn, CudaStream** stream, unsigned flags, int priority);
  int stream_destroy(const char* fn, CudaStream* stream);
  int stream_query(const char* fn, CudaStream* stream);
  int stream_synchronize(const char* fn, CudaStream* stream);
  int stream_wait_event(const char* fn, CudaStream* stream, Event* event);
  int event_create(const char* fn, Event** event, unsigned flags);
  int event_record(const char* fn, Event* event, CudaStream* stream);
  int event_synchronize(const char* fn, Event* event);
  int event_query(const char* fn, Event* event);
  int event_destroy(const char* fn, Event* event);
  int event_elapsed(const char* fn, float* ms, Event* start, Event* stop);
  const char* error_string(int status) const;
  int take_last_error();
  // Stream capture and graphs (emu_kit/capture.h); graphs and executable graphs are opaque
  // handles. `mode` and `*status` are CUDA's values.
  int begin_capture(const char* fn, CudaStream* stream, int mode);
  int end_capture(const char* fn, CudaStream* stream, void** graph);
  int is_capturing(const char* fn, CudaStream* stream, int* status);
  int exchange_capture_mode(const char* fn, int* mode);
  int graph_instantiate(const char* fn, void** exec, void* graph, unsigned long long flags);
  int graph_launch(const char* fn, void* exec, CudaStream* stream);
  int graph_exec_destroy(const char* fn, void* exec);
  int graph_destroy(const char* fn, void* graph);
  // Runs host_fn(data) on the stream in order (recorded while it captures).
  int launch_host_func(const char* fn, CudaStream* stream, void (*host_fn)(void*), void* data);

  // For the SDK's other libraries and its test controls.
  Ledger& ledger() { return ledger_; }
  std::recursive_mutex& mutex() { return mu_; }
  int current_device() const;
  Stream::Mode stream_mode() const { return cfg_.mode; }
  bool valid_device(int device) const { return device >= 0 && device < count_; }
  DeviceMemory device_memory(int device);
  // The stream behind a handle (NULL: the current device's default stream); nullptr if unknown.
  CudaStreamRef stream(const CudaStream* handle);
  // Every live stream, the default streams made so far included.
  std::vector<CudaStreamRef> streams() { return streams_.all(); }
  // The host memory behind [p, p + n) when it lies in one live allocation of `device`.
  char* resolve(int device, const void* p, size_t n);
  // Which device's address range p falls in, allocated or not; -1 for none.
  int device_of(const void* p) const;
  // Resolves every range on `device` into host[i], keeping the allocations in *held. An empty
  // range needs nothing when `empty_ok`, else it is one byte. -1, or the first range that does
  // not resolve (nothing held then).
  long pin(int device, const std::vector<Range>& ranges, bool empty_ok, void** host,
           std::vector<AllocRef>* held);
  // Queues `work` on `stream`, a stream of the current device (recorded while it captures). 0,
  // -1 for an unknown stream or one of another device, -2 when its capture was invalidated
  // (the last error says so), 1 + i when ranges[i] does not resolve; nothing is queued then.
  int submit(const char* name, const CudaStream* stream, const std::vector<Range>& ranges,
             RangeWork work);
  // The same on a stream of any device, the ranges resolved on the stream's: a collective
  // library's operations run on their communicator's device, whichever is current.
  int submit_on_stream_device(const char* name, const CudaStream* stream,
                              const std::vector<Range>& ranges, RangeWork work);
  // Holds a worker stream: work queued on it from now on waits until release(), so that a test
  // sees work not yet done. kInvalidHandle for an unknown stream, kInvalidValue when it is
  // already held (hold) or not held (release), kNotSupported on inline streams.
  int hold(const CudaStream* stream);
  int release(const CudaStream* stream);
  // Records `status` as the thread's last error and returns it.
  int fail(int status);

 protected:
  virtual CudaStreamRef make_stream(int device, bool is_default, int priority) = 0;
  virtual std::shared_ptr<Event> make_event(unsigned flags, bool timing) = 0;
  FreedWork freed_work() const;

  // A second lane of work on a stream, outside the runtime's order (gcu's foreign producer):
  // synchronisation drains it, the runtime's own work does not wait for it. Called with the
  // lock held.
  virtual bool lane_busy(CudaStream&) { return false; }
  virtual void lane_drain(CudaStream&) {}
  // The lane's work recorded before the event has not all run.
  virtual bool lane_behind(Event&) { return false; }
  virtual void lane_drain_to(Event&) {}
  virtual void recorded(Event&, const CudaStreamRef&) {}

 private:
  struct Device {
    DeviceMemory memory;
    uintptr_t next = 0;  // where its next allocation goes in its address range
    CudaStreamRef default_stream;
  };
  struct Side;  // one side of a copy
  enum class Wait { none, item, drain };
  using Lock = std::lock_guard<std::recursive_mutex>;
  using UniqueLock = std::unique_lock<std::recursive_mutex>;

  // Counts the call of `fn`: the status of a fault injected for it (recorded), else 0.
  int enter(const char* fn);
  // The lock is held by the *_locked functions' callers.
  CudaStreamRef stream_locked(const void* handle);
  std::shared_ptr<Event> event_locked(const void* handle) { return events_.find(handle); }
  // The stream an asynchronous call names or, for a synchronous one, the default stream; it
  // must be the current device's. 0 or a status.
  int stream_for_locked(bool async, const CudaStream* handle, CudaStreamRef* stream);
  int submit_locked(const char* name, const CudaStreamRef& stream, const std::vector<Range>& ranges,
                    RangeWork work);
  int side_locked(const void* p, size_t n, bool device, int dev, Side* side);
  int copy_locked(const char* fn, void* dst, const void* src, size_t n, int kind, bool async,
                  WorkItem* item, Wait* wait, bool* pageable);
  WorkItem copy_item(const char* fn, const Side& to, const Side& from, size_t n, bool async,
                     Wait* wait);
  // Records the refusal's CUDA status as the last error and returns it.
  int refused(const Verdict& v);
  int retired_locked(const char* fn, const AllocRef& a);
  // Pushes `item` under `lk`, then releases it and waits as `wait` says. While captures are
  // underway an asynchronous item on a capturing stream is recorded (refused when
  // `unrecordable` says why it cannot be), and a synchronous one may be forbidden.
  int run(UniqueLock& lk, const char* fn, const CudaStreamRef& stream, WorkItem item, Wait wait,
          const char* unrecordable = nullptr);
  int drain(const CudaStreamRef& stream);

  const CudaConfig cfg_;
  const std::string free_name_;
  Ledger ledger_;
  std::recursive_mutex mu_;
  int count_ = 0;
  std::vector<Device> devices_;
  AllocationMap allocs_;       // device memory of every device
  AllocationMap host_allocs_;  // pinned host memory
  HandleTable<CudaStream> streams_;
  HandleTable<Event> events_;
  std::unordered_map<int, std::string> error_strings_;
  std::string unrecognized_;
  std::unordered_map<const CudaStream*, std::shared_ptr<std::promise<void>>> holds_;
  Captures captures_;
  HandleTable<CapturedGraph> graphs_;  // what captures made
  HandleTable<CapturedGraph> execs_;   // instantiated: what launches queue
};

// The runtime over the SDK's handle types, S and E deriving from CudaStream and Event.
template <class S, class E>
class CudaRuntimeOf : public CudaRuntime {
 public:
  using CudaRuntime::CudaRuntime;

 protected:
  CudaStreamRef make_stream(int device, bool is_default, int priority) override {
    return std::make_shared<S>(device, is_default, stream_mode(), freed_work(), priority);
  }
  std::shared_ptr<Event> make_event(unsigned flags, bool timing) override {
    return std::make_shared<E>(flags, timing);
  }
};

// The library's runtime, made by `make` at first use. With worker streams a forked child gets a
// fresh one: its parent's stream threads did not survive the fork.
CudaRuntime& cuda_runtime(CudaRuntime* (*make)());

}  // namespace emu_kit
