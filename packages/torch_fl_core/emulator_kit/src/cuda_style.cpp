// The CUDA-style runtime's state: devices, the calling thread's device and last error, statuses'
// strings, lookups, and queueing work on streams.
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <future>

#include "emu_kit/cuda_style.h"

namespace emu_kit {

namespace {

constexpr uintptr_t kBase = 0x200000000000ull;       // 32 TiB: outside glibc's heap and mmap areas
constexpr uintptr_t kDeviceSpan = 0x10000000000ull;  // 1 TiB of address space per device

// One runtime per library (the kit is linked into each), so these are the library's.
thread_local int t_device = 0;
thread_local int t_last = cuda::kSuccess;

struct ErrorText {
  int status;
  const char* name;  // after "<sdk>Error"
  const char* text;
};
// "%s" in a text: the config's device_kind.
constexpr ErrorText kErrors[] = {
    {cuda::kInvalidValue, "InvalidValue", "invalid argument"},
    {cuda::kOutOfMemory, "MemoryAllocation", "out of memory"},
    {cuda::kNotInitialized, "InitializationError", "initialization error"},
    {cuda::kInvalidDevicePointer, "InvalidDevicePointer", "invalid device pointer"},
    {cuda::kInvalidMemcpyDirection, "InvalidMemcpyDirection", "invalid copy direction"},
    {cuda::kNoDevice, "NoDevice", "no %s device is detected"},
    {cuda::kInvalidDevice, "InvalidDevice", "invalid device ordinal"},
    {cuda::kPeerAccessUnsupported, "PeerAccessUnsupported", "peer access is not supported"},
    {cuda::kInvalidHandle, "InvalidResourceHandle", "invalid resource handle"},
    {cuda::kNotReady, "NotReady", "device not ready"},
    {cuda::kIllegalAddress, "IllegalAddress", "an illegal memory access was encountered"},
    {cuda::kNotSupported, "NotSupported", "operation not supported"},
    {cuda::kUnknown, "Unknown", "unknown error"},
};
// Where the SDK has stream capture (CudaConfig::graphs).
constexpr ErrorText kCaptureErrors[] = {
    {cuda::kIllegalState, "IllegalState", "the operation cannot be performed in the present state"},
    {cuda::kStreamCaptureUnsupported, "StreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cuda::kStreamCaptureInvalidated, "StreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {cuda::kStreamCaptureMerge, "StreamCaptureMerge",
     "operation would result in a merge of separate capture sequences"},
    {cuda::kStreamCaptureUnmatched, "StreamCaptureUnmatched",
     "capture was not ended in the same stream as it began"},
    {cuda::kStreamCaptureUnjoined, "StreamCaptureUnjoined", "capturing stream has unjoined work"},
    {cuda::kStreamCaptureIsolation, "StreamCaptureIsolation",
     "dependency created on uncaptured work in another stream"},
    {cuda::kCapturedEvent, "CapturedEvent",
     "operation not permitted on an event last recorded in a capturing stream"},
    {cuda::kStreamCaptureWrongThread, "StreamCaptureWrongThread",
     "attempt to terminate a thread-local capture sequence from another thread"},
};

std::atomic<CudaRuntime*> g_runtime{nullptr};
CudaRuntime* (*g_make)() = nullptr;

void fresh_in_child() {
  CudaRuntime* old = g_runtime.load();
  if (!old || old->stream_mode() != Stream::Mode::worker) return;
  // The parent's runtime is abandoned, not destroyed: its locks may be held by threads that did
  // not fork.
  g_runtime.store(g_make());
  t_device = 0;
  t_last = cuda::kSuccess;
}

}  // namespace

CudaRuntime& cuda_runtime(CudaRuntime* (*make)()) {
  static CudaRuntime* first = [make] {
    g_make = make;
    CudaRuntime* rt = make();  // never destroyed: other libraries may call in at exit
    g_runtime.store(rt);
    pthread_atfork(nullptr, nullptr, fresh_in_child);
    return rt;
  }();
  (void)first;
  return *g_runtime.load();
}

CudaConfig::CudaConfig(const std::string& sdk_, std::string label_, Stream::Mode mode_)
    : sdk(sdk_), label(std::move(label_)), mode(mode_), ledger_prefix(sdk_) {
  std::string upper = sdk_;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  device_kind = upper + "-capable";
  host_free = sdk_ + "FreeHost";
  device_count_env = upper + "_EMU_DEVICE_COUNT";
  memory_mb_env = upper + "_EMU_MEMORY_MB";
}

CudaRuntime::CudaRuntime(CudaConfig config)
    : cfg_(std::move(config)),
      free_name_(cfg_.sdk + "Free"),
      ledger_(cfg_.ledger_prefix, cfg_.label) {
  count_ = static_cast<int>(env_size(cfg_.device_count_env.c_str(), 2));
  const size_t cap = env_size(cfg_.memory_mb_env.c_str(), 4096) << 20;
  devices_.resize(static_cast<size_t>(count_));
  for (int i = 0; i < count_; ++i) {
    devices_[i].memory.capacity = cap;
    devices_[i].next = kBase + kDeviceSpan * static_cast<uintptr_t>(i);
  }
  unrecognized_ = "unrecognized " + cfg_.sdk + "Error_t";
  error_strings_[cuda::kSuccess] = cfg_.sdk + "Success: no error";
  const auto add = [this](const ErrorText& e) {
    std::string name = e.name;
    for (const auto& r : cfg_.renamed)
      if (r.first == e.status) name = r.second;
    char text[128];
    snprintf(text, sizeof text, e.text, cfg_.device_kind.c_str());
    error_strings_[e.status] = cfg_.sdk + "Error" + name + ": " + text;
  };
  for (const ErrorText& e : kErrors) add(e);
  if (cfg_.graphs)
    for (const ErrorText& e : kCaptureErrors) add(e);
}

FreedWork CudaRuntime::freed_work() const {
  return FreedWork{cuda::kIllegalAddress, free_name_.c_str(), cfg_.host_free.c_str()};
}

int CudaRuntime::fail(int status) {
  t_last = status;
  return status;
}

int CudaRuntime::take_last_error() {
  const int e = t_last;
  t_last = cuda::kSuccess;
  return e;
}

const char* CudaRuntime::error_string(int status) const {
  auto it = error_strings_.find(status);
  if (it != error_strings_.end()) return it->second.c_str();
  return unrecognized_.c_str();
}

int CudaRuntime::current_device() const { return t_device; }

DeviceMemory CudaRuntime::device_memory(int device) {
  Lock lk(mu_);
  return valid_device(device) ? devices_[static_cast<size_t>(device)].memory : DeviceMemory{};
}

char* CudaRuntime::resolve(int device, const void* p, size_t n) {
  Lock lk(mu_);
  return allocs_.resolve(device, p, n);
}

int CudaRuntime::device_of(const void* p) const {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (a < kBase) return -1;
  const uintptr_t i = (a - kBase) / kDeviceSpan;
  return i < static_cast<uintptr_t>(count_) ? static_cast<int>(i) : -1;
}

CudaStreamRef CudaRuntime::stream_locked(const void* handle) {
  if (handle != nullptr) return streams_.find(handle);
  if (!valid_device(t_device)) return nullptr;
  Device& d = devices_[static_cast<size_t>(t_device)];
  if (!d.default_stream) {
    d.default_stream = make_stream(t_device, true, cuda::kLeastPriority);
    streams_.add(d.default_stream);
  }
  return d.default_stream;
}

CudaStreamRef CudaRuntime::stream(const CudaStream* handle) {
  Lock lk(mu_);
  return stream_locked(handle);
}

long CudaRuntime::pin(int device, const std::vector<Range>& ranges, bool empty_ok, void** host,
                      std::vector<AllocRef>* held) {
  Lock lk(mu_);
  std::vector<AllocRef> mine;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const Range& r = ranges[i];
    if (r.bytes == 0 && empty_ok) {
      host[i] = allocs_.resolve(device, r.ptr, 0);
      continue;
    }
    const size_t n = std::max<size_t>(r.bytes, 1);
    host[i] = allocs_.resolve(device, r.ptr, n);
    if (host[i] == nullptr) return static_cast<long>(i);
    AllocRef a = allocs_.range(r.ptr, n);
    if (std::find(mine.begin(), mine.end(), a) == mine.end()) mine.push_back(std::move(a));
  }
  held->insert(held->end(), mine.begin(), mine.end());
  return -1;
}

int CudaRuntime::submit(const char* name, const CudaStream* stream,
                        const std::vector<Range>& ranges, RangeWork work) {
  Lock lk(mu_);
  CudaStreamRef st = stream_locked(stream);
  if (!st || st->device() != t_device) return -1;
  return submit_locked(name, st, ranges, std::move(work));
}

int CudaRuntime::submit_on_stream_device(const char* name, const CudaStream* stream,
                                         const std::vector<Range>& ranges, RangeWork work) {
  Lock lk(mu_);
  CudaStreamRef st = stream_locked(stream);
  if (!st) return -1;
  return submit_locked(name, st, ranges, std::move(work));
}

int CudaRuntime::submit_locked(const char* name, const CudaStreamRef& st,
                               const std::vector<Range>& ranges, RangeWork work) {
  auto host = std::make_shared<std::vector<void*>>(ranges.size());
  WorkItem item;
  const long bad = pin(st->device(), ranges, true, host->data(), &item.allocs);
  if (bad >= 0) return static_cast<int>(bad) + 1;
  item.name = name;
  item.run = [host, work = std::move(work)](char* msg, size_t len) {
    return work(host->data(), msg, len);
  };
  Verdict v;
  if (captures_.any() && captures_.record(st.get(), name, item, &v)) {
    if (!v) return 0;
    refused(v);
    return -2;
  }
  st->push(std::move(item));
  return 0;
}

int CudaRuntime::hold(const CudaStream* stream) {
  Lock lk(mu_);
  if (cfg_.mode != Stream::Mode::worker) return cuda::kNotSupported;
  CudaStreamRef s = stream_locked(stream);
  if (!s) return cuda::kInvalidHandle;
  if (holds_.count(s.get())) return cuda::kInvalidValue;
  auto gate = std::make_shared<std::promise<void>>();
  std::shared_future<void> opened = gate->get_future().share();
  WorkItem item;
  item.name = "hold";
  item.run = [opened](char*, size_t) {
    opened.wait();
    return 0;
  };
  s->push(std::move(item));
  holds_[s.get()] = std::move(gate);
  return cuda::kSuccess;
}

int CudaRuntime::release(const CudaStream* stream) {
  Lock lk(mu_);
  CudaStreamRef s = stream_locked(stream);
  if (!s) return cuda::kInvalidHandle;
  auto it = holds_.find(s.get());
  if (it == holds_.end()) return cuda::kInvalidValue;
  it->second->set_value();
  holds_.erase(it);
  return cuda::kSuccess;
}

int CudaRuntime::run(UniqueLock& lk, const char* fn, const CudaStreamRef& stream, WorkItem item,
                     Wait wait, const char* unrecordable) {
  if (captures_.any()) {
    if (wait == Wait::drain) {
      // Synchronous (on the default stream, which never captures): the modes may forbid it.
      if (Verdict v = captures_.unsafe_call(stream->device(), fn)) return refused(v);
    } else {
      if (unrecordable)
        if (Verdict v = captures_.unrecordable(stream.get(), fn, unrecordable)) return refused(v);
      Verdict v;
      if (captures_.record(stream.get(), fn, item, &v)) return v ? refused(v) : cuda::kSuccess;
    }
  }
  std::future<void> done;
  if (wait == Wait::item) {
    auto ran = std::make_shared<std::promise<void>>();
    done = ran->get_future();
    item.cleanup = [ran] { ran->set_value(); };
  }
  stream->push(std::move(item));  // an inline stream runs it here, in the order of the calls
  lk.unlock();
  if (wait == Wait::item) done.wait();
  return wait == Wait::drain ? drain(stream) : cuda::kSuccess;
}

int CudaRuntime::drain(const CudaStreamRef& stream) {
  std::string msg;
  const int e = stream->drain(&msg);
  return e == cuda::kSuccess ? e : fail(e);
}

int CudaRuntime::enter(const char* fn) {
  const int injected = ledger_.enter(fn);
  return injected ? fail(injected) : cuda::kSuccess;
}

// ---- devices ----

int CudaRuntime::get_device_count(const char* fn, int* count) {
  if (int e = enter(fn)) return e;
  if (!count) return fail(cuda::kInvalidValue);
  *count = count_;
  return count_ > 0 ? cuda::kSuccess : fail(cuda::kNoDevice);
}

int CudaRuntime::get_device(const char* fn, int* device) {
  if (int e = enter(fn)) return e;
  if (!device) return fail(cuda::kInvalidValue);
  if (count_ == 0) return fail(cuda::kNoDevice);
  *device = t_device;
  return cuda::kSuccess;
}

int CudaRuntime::set_device(const char* fn, int device) {
  if (int e = enter(fn)) return e;
  if (!valid_device(device)) return fail(cuda::kInvalidDevice);
  t_device = device;
  return cuda::kSuccess;
}

int CudaRuntime::device_synchronize(const char* fn) {
  if (int e = enter(fn)) return e;
  std::vector<CudaStreamRef> mine;
  {
    Lock lk(mu_);
    if (!valid_device(t_device)) return fail(cuda::kNoDevice);
    if (Verdict v = captures_.device_wait(t_device, fn)) return refused(v);
    for (CudaStreamRef& s : streams_.all()) {
      if (s->device() != t_device) continue;
      lane_drain(*s);
      mine.push_back(std::move(s));
    }
  }
  int first = cuda::kSuccess;
  for (const CudaStreamRef& s : mine) {
    const int e = drain(s);
    if (first == cuda::kSuccess) first = e;
  }
  return first;
}

int CudaRuntime::stream_priority_range(const char* fn, int* least, int* greatest) {
  if (int e = enter(fn)) return e;
  if (least) *least = cuda::kLeastPriority;
  if (greatest) *greatest = cuda::kGreatestPriority;
  return cuda::kSuccess;
}

int CudaRuntime::mem_get_info(const char* fn, size_t* free_bytes, size_t* total_bytes) {
  if (int e = enter(fn)) return e;
  if (!free_bytes || !total_bytes) return fail(cuda::kInvalidValue);
  Lock lk(mu_);
  if (!valid_device(t_device)) return fail(cuda::kNoDevice);
  const DeviceMemory& m = devices_[static_cast<size_t>(t_device)].memory;
  *free_bytes = m.available();
  *total_bytes = m.capacity;
  return cuda::kSuccess;
}

}  // namespace emu_kit
