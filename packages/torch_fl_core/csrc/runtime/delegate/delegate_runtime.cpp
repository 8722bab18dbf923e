#include "runtime/delegate/delegate_runtime.h"

#include <ATen/ATen.h>
#include <ATen/core/CachingHostAllocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

namespace torch_fl::delegate {
namespace {

c10::DeviceType g_type = c10::DeviceType::CUDA;
std::string g_name;
thread_local std::string t_last_error;

const c10::impl::DeviceGuardImplInterface* impl() { return c10::impl::getDeviceGuardImpl(g_type); }

c10::DeviceIndex current() { return impl()->getDevice().index(); }

// The backend's lazy initialisation (allocator, driver) before memory calls.
void lazy_init() { at::globalContext().lazyInitDevice(g_type); }

c10::Stream stream_of(tfl_stream s, c10::DeviceIndex device) {
  const auto id = static_cast<c10::StreamId>(reinterpret_cast<intptr_t>(s));
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(g_type, device), id);
}

tfl_stream handle_of(const c10::Stream& s) {
  return reinterpret_cast<tfl_stream>(static_cast<intptr_t>(s.id()));
}

struct Event {
  void* native = nullptr;  // the mirrored backend's event, created on first record
  c10::DeviceIndex device = -1;
  uint32_t flags = 0;
};

// Runs `fn`, turning a torch error into a status and this thread's message.
template <class F>
tfl_status guarded(const char* call, F&& fn) {
  try {
    fn();
    return TFL_OK;
  } catch (const c10::OutOfMemoryError& e) {
    t_last_error = std::string(call) + ": " + e.what_without_backtrace();
    return TFL_ERROR_OUT_OF_MEMORY;
  } catch (const c10::Error& e) {
    t_last_error = std::string(call) + ": " + e.what_without_backtrace();
    return TFL_ERROR_DEVICE;
  } catch (const std::exception& e) {
    t_last_error = std::string(call) + ": " + e.what();
    return TFL_ERROR_DEVICE;
  }
}

tfl_status init() { return TFL_OK; }

const char* status_name(tfl_status s) { return tfl_status_string(s); }

const char* last_error() { return t_last_error.c_str(); }

tfl_status device_count(int* count) {
  if (!count) return TFL_ERROR_INVALID_VALUE;
  *count = impl()->deviceCount();
  return TFL_OK;
}

tfl_status get_device(int* device) {
  if (!device) return TFL_ERROR_INVALID_VALUE;
  return guarded("get_device", [&] { *device = current(); });
}

tfl_status set_device(int device) {
  if (device < 0 || device >= impl()->deviceCount()) return TFL_ERROR_INVALID_DEVICE;
  return guarded("set_device", [&] { impl()->setDevice(c10::Device(g_type, device)); });
}

tfl_status device_synchronize() {
  return guarded("device_synchronize", [] { impl()->synchronizeDevice(current()); });
}

tfl_status mem_get_info(size_t* free_bytes, size_t* total_bytes) {
  if (!free_bytes || !total_bytes) return TFL_ERROR_INVALID_VALUE;
  return guarded("mem_get_info", [&] {
    lazy_init();
    std::tie(*free_bytes, *total_bytes) = c10::getDeviceAllocator(g_type)->getMemoryInfo(current());
  });
}

tfl_status device_name(int device, char* buf, size_t len) {
  if (!buf || len == 0) return TFL_ERROR_INVALID_VALUE;
  if (device < 0 || device >= impl()->deviceCount()) return TFL_ERROR_INVALID_DEVICE;
  // c10 has no device-generic name query; the vendor's Python layer names
  // the product (torch.cuda.get_device_name) where it can.
  std::snprintf(buf, len, "%s:%d", c10::DeviceTypeName(g_type, true).c_str(), device);
  return TFL_OK;
}

tfl_status malloc_(void** ptr, size_t size) {
  if (!ptr) return TFL_ERROR_INVALID_VALUE;
  if (size == 0) {
    *ptr = nullptr;
    return TFL_OK;
  }
  return guarded("malloc", [&] {
    lazy_init();
    *ptr = c10::getDeviceAllocator(g_type)->raw_allocate(size);
  });
}

tfl_status free_(void* ptr) {
  if (!ptr) return TFL_OK;
  return guarded("free", [&] { c10::getDeviceAllocator(g_type)->raw_deallocate(ptr); });
}

tfl_status host_malloc(void** ptr, size_t size) {
  if (!ptr) return TFL_ERROR_INVALID_VALUE;
  return guarded("host_malloc", [&] {
    lazy_init();
    *ptr = at::getHostAllocator(g_type)->raw_allocate(size);
  });
}

tfl_status host_free(void* ptr) {
  if (!ptr) return TFL_OK;
  return guarded("host_free", [&] { at::getHostAllocator(g_type)->raw_deallocate(ptr); });
}

tfl_status pointer_info(const void* ptr, tfl_pointer_kind* kind, int* device) {
  if (!kind || !device) return TFL_ERROR_INVALID_VALUE;
  return guarded("pointer_info", [&] {
    const auto& hooks = at::globalContext().getAcceleratorHooksInterface(g_type);
    if (ptr && hooks.isPinnedPtr(ptr)) {
      *kind = TFL_POINTER_HOST;
      *device = -1;
      return;
    }
    // Device pointers are the allocator's business (the glue forwards to it);
    // there is no device-generic owner query, so report them unknown.
    *kind = TFL_POINTER_UNKNOWN;
    *device = -1;
  });
}

// Byte tensors over raw pointers, copied with ATen (the mirrored backend's
// own copy kernels pick cudaMemcpyAsync & co. on the current stream).
at::Tensor bytes(void* p, size_t n, bool on_device, c10::DeviceIndex device) {
  const auto opts = at::TensorOptions().dtype(at::kByte).device(
      on_device ? c10::Device(g_type, device) : c10::Device(c10::kCPU));
  return at::from_blob(p, {static_cast<int64_t>(n)}, opts);
}

tfl_status copy(void* dst, const void* src, size_t n, tfl_memcpy_kind kind, bool async,
                tfl_stream stream) {
  if (n == 0) return TFL_OK;
  if (!dst || !src) return TFL_ERROR_INVALID_VALUE;
  return guarded(async ? "memcpy_async" : "memcpy", [&] {
    const auto dev = current();
    const bool dst_dev = kind == TFL_MEMCPY_HOST_TO_DEVICE || kind == TFL_MEMCPY_DEVICE_TO_DEVICE;
    const bool src_dev = kind == TFL_MEMCPY_DEVICE_TO_HOST || kind == TFL_MEMCPY_DEVICE_TO_DEVICE;
    const c10::Stream s = stream_of(stream, dev);
    const c10::Stream prev = impl()->exchangeStream(s);
    try {
      bytes(dst, n, dst_dev, dev).copy_(bytes(const_cast<void*>(src), n, src_dev, dev), async);
      if (!async) impl()->synchronizeStream(s);
    } catch (...) {
      impl()->exchangeStream(prev);
      throw;
    }
    impl()->exchangeStream(prev);
  });
}

tfl_status memcpy_(void* dst, const void* src, size_t n, tfl_memcpy_kind kind) {
  return copy(dst, src, n, kind, false, nullptr);
}

tfl_status memcpy_async(void* dst, const void* src, size_t n, tfl_memcpy_kind kind,
                        tfl_stream stream) {
  return copy(dst, src, n, kind, true, stream);
}

tfl_status memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device, size_t n,
                             tfl_stream stream) {
  if (n == 0) return TFL_OK;
  if (!dst || !src) return TFL_ERROR_INVALID_VALUE;
  return guarded("memcpy_peer_async", [&] {
    const auto dev = current();
    const c10::Stream s = stream_of(stream, dev);
    const c10::Stream prev = impl()->exchangeStream(s);
    try {
      at::from_blob(dst, {static_cast<int64_t>(n)},
                    at::TensorOptions().dtype(at::kByte).device(c10::Device(g_type, dst_device)))
          .copy_(at::from_blob(
                     const_cast<void*>(src), {static_cast<int64_t>(n)},
                     at::TensorOptions().dtype(at::kByte).device(c10::Device(g_type, src_device))),
                 true);
    } catch (...) {
      impl()->exchangeStream(prev);
      throw;
    }
    impl()->exchangeStream(prev);
  });
}

tfl_status memset_async(void* ptr, int value, size_t n, tfl_stream stream) {
  if (n == 0) return TFL_OK;
  if (!ptr) return TFL_ERROR_INVALID_VALUE;
  return guarded("memset_async", [&] {
    const auto dev = current();
    const c10::Stream s = stream_of(stream, dev);
    const c10::Stream prev = impl()->exchangeStream(s);
    try {
      bytes(ptr, n, true, dev).fill_(value & 0xff);
    } catch (...) {
      impl()->exchangeStream(prev);
      throw;
    }
    impl()->exchangeStream(prev);
  });
}

tfl_status stream_create(tfl_stream* stream, int priority) {
  if (!stream) return TFL_ERROR_INVALID_VALUE;
  // The mirrored backend pools its streams (as CUDA does); "creating" takes
  // the next pooled one and destroying returns nothing.
  return guarded("stream_create", [&] {
    *stream =
        handle_of(impl()->getStreamFromGlobalPool(c10::Device(g_type, current()), priority < 0));
  });
}

tfl_status stream_destroy(tfl_stream) { return TFL_OK; }

tfl_status stream_synchronize(tfl_stream stream) {
  return guarded("stream_synchronize",
                 [&] { impl()->synchronizeStream(stream_of(stream, current())); });
}

tfl_status stream_query(tfl_stream stream) {
  bool idle = true;
  const tfl_status st =
      guarded("stream_query", [&] { idle = impl()->queryStream(stream_of(stream, current())); });
  if (st != TFL_OK) return st;
  return idle ? TFL_OK : TFL_ERROR_NOT_READY;
}

tfl_status stream_wait_event(tfl_stream stream, tfl_event event) {
  if (!event) return TFL_ERROR_INVALID_HANDLE;
  auto* e = reinterpret_cast<Event*>(event);
  if (!e->native) return TFL_OK;  // never recorded: nothing to wait for
  return guarded("stream_wait_event",
                 [&] { impl()->block(e->native, stream_of(stream, current())); });
}

tfl_status launch_host_func(tfl_stream, tfl_host_fn, void*) {
  t_last_error =
      "launch_host_func: c10 has no device-generic host callback; the delegate "
      "runtime's glue never needs one (the mirrored allocators manage their own reuse)";
  return TFL_ERROR_NOT_SUPPORTED;
}

tfl_status event_create(tfl_event* event, uint32_t flags) {
  if (!event) return TFL_ERROR_INVALID_VALUE;
  auto* e = new Event();
  e->flags = flags;
  *event = reinterpret_cast<tfl_event>(e);
  return TFL_OK;
}

tfl_status event_destroy(tfl_event event) {
  if (!event) return TFL_ERROR_INVALID_HANDLE;
  auto* e = reinterpret_cast<Event*>(event);
  if (e->native) impl()->destroyEvent(e->native, e->device);
  delete e;
  return TFL_OK;
}

tfl_status event_record(tfl_event event, tfl_stream stream) {
  if (!event) return TFL_ERROR_INVALID_HANDLE;
  auto* e = reinterpret_cast<Event*>(event);
  return guarded("event_record", [&] {
    const auto dev = current();
    TORCH_CHECK(e->device < 0 || e->device == dev, "event of device ", e->device,
                " recorded on device ", dev);
    e->device = dev;
    const auto flag = (e->flags & TFL_EVENT_DISABLE_TIMING) ? c10::EventFlag::PYTORCH_DEFAULT
                                                            : c10::EventFlag::BACKEND_DEFAULT;
    impl()->record(&e->native, stream_of(stream, dev), dev, flag);
  });
}

tfl_status event_synchronize(tfl_event event) {
  if (!event) return TFL_ERROR_INVALID_HANDLE;
  auto* e = reinterpret_cast<Event*>(event);
  return guarded("event_synchronize", [&] { impl()->synchronizeEvent(e->native); });
}

tfl_status event_query(tfl_event event) {
  if (!event) return TFL_ERROR_INVALID_HANDLE;
  auto* e = reinterpret_cast<Event*>(event);
  bool done = true;
  const tfl_status st = guarded("event_query", [&] { done = impl()->queryEvent(e->native); });
  if (st != TFL_OK) return st;
  return done ? TFL_OK : TFL_ERROR_NOT_READY;
}

tfl_status event_elapsed_ms(float* ms, tfl_event start, tfl_event end) {
  if (!ms || !start || !end) return TFL_ERROR_INVALID_VALUE;
  auto* a = reinterpret_cast<Event*>(start);
  auto* b = reinterpret_cast<Event*>(end);
  return guarded("event_elapsed_ms", [&] {
    *ms = static_cast<float>(impl()->elapsedTime(a->native, b->native, a->device));
  });
}

// c10::Stream::native_handle() is newer than the oldest torch this builds against (2.10 lacks it).
template <class S, class = void>
struct HasNativeHandle : std::false_type {};
template <class S>
struct HasNativeHandle<S, std::void_t<decltype(std::declval<const S&>().native_handle())>>
    : std::true_type {};

// The mirrored backend's own stream handle (cudaStream_t) behind a flagos stream: what FlagGems'
// launcher enqueues on is then the same stream torch's kernels use.
template <class S = c10::Stream>
tfl_status native_stream(tfl_stream stream, int device, void** out) {
  if (!out) return TFL_ERROR_INVALID_VALUE;
  if (device < 0 || device >= static_cast<int>(impl()->deviceCount())) {
    t_last_error = "native_stream: device " + std::to_string(device) + " out of range";
    return TFL_ERROR_INVALID_DEVICE;
  }
  if constexpr (HasNativeHandle<S>::value) {
    return guarded("native_stream", [&] {
      const S s = stream_of(stream, static_cast<c10::DeviceIndex>(device));
      *out = s.native_handle();
    });
  } else {
    t_last_error = "native_stream: this torch's c10::Stream has no native_handle() (torch >= 2.11)";
    return TFL_ERROR_NOT_SUPPORTED;
  }
}

// Counting devices needs no initialised context here: torch's backend answers it.
tfl_status probe(int* count, char* msg, size_t len) {
  if (msg && len) msg[0] = '\0';
  if (!count) return TFL_ERROR_INVALID_VALUE;
  *count = 0;
  const tfl_status st = guarded("probe", [&] { *count = static_cast<int>(impl()->deviceCount()); });
  const std::string why = st != TFL_OK ? t_last_error
                          : *count == 0 ? g_name + ": the backend reports no devices"
                                        : "";
  if (msg && len) std::snprintf(msg, len, "%s", why.c_str());
  return st;
}

tfl_runtime_v1 g_table = {
    TFL_RUNTIME_ABI_VERSION,
    sizeof(tfl_runtime_v1),
    "delegate",
    TFL_CAP_PEER_COPY | TFL_CAP_EVENT_TIMING | TFL_CAP_PINNED_HOST_MEMORY,
    init,
    status_name,
    last_error,
    device_count,
    get_device,
    set_device,
    device_synchronize,
    mem_get_info,
    device_name,
    malloc_,
    free_,
    host_malloc,
    host_free,
    pointer_info,
    memcpy_,
    memcpy_async,
    memcpy_peer_async,
    memset_async,
    stream_create,
    stream_destroy,
    stream_synchronize,
    stream_query,
    stream_wait_event,
    launch_host_func,
    event_create,
    event_destroy,
    event_record,
    event_synchronize,
    event_query,
    event_elapsed_ms,
    // v1.1 IPC: torch's own CUDA IPC carries flagos tensors here (torch_fl.multiprocessing).
    /*ipc_get_handle=*/nullptr,
    /*ipc_open_handle=*/nullptr,
    /*ipc_close_handle=*/nullptr,
    native_stream<>,
    probe,
    // v1.3 graphs: the mirrored backend's own graph API captures flagos work
    // here (torch_fl.device.graphs), with its pools and RNG capture.
    /*graph_capture_begin=*/nullptr,
    /*graph_capture_end=*/nullptr,
    /*graph_instantiate=*/nullptr,
    /*graph_launch=*/nullptr,
    /*graph_destroy=*/nullptr,
    /*stream_capture_status=*/nullptr,
};

}  // namespace

const tfl_runtime_v1* runtime_table(c10::DeviceType type) {
  g_type = type;
  g_name = "delegate:" + c10::DeviceTypeName(type, true);
  g_table.name = g_name.c_str();
  return &g_table;
}

}  // namespace torch_fl::delegate
