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
// topsrt has CUDA's shape, so the kit's CUDA-style runtime meets each of these
// (include/torch_fl/kit/cuda_style_runtime.h); this file is topsrt's dialect.
#include <tops_runtime_api.h>
#include <torch_fl/kit/cuda_style_runtime.h>
#include <torch_fl/kit/sdk_errors.h>

namespace {

// topsrt in the kit's CUDA-style runtime (include/torch_fl/kit/cuda_style_runtime.h).
struct Topsrt {
  using Error = topsError_t;
  using Stream = topsStream_t;
  using Event = topsEvent_t;
  using MemcpyKind = topsMemcpyKind;
  static constexpr Error kSuccess = topsSuccess;
  static constexpr Error kNotReady = topsErrorNotReady;
  static constexpr Error kNoDevice = topsErrorNoDevice;
  static constexpr const char* kRuntime = "topsrt";
  static constexpr const char* kDevice = "GCU card";
  static constexpr const char* kErrorType = "topsError_t";
  static constexpr const char* kDeviceName = "Enflame GCU %d (topsrt)";
  // No host-addressable memory (GCU memory is device-scoped); topsaten and Triton kernels on one
  // stream are not ordered by the hardware. No graphs: the TopsRider SDK this vendor targets
  // documents no stream-capture API (docs/gcu.md).
  static constexpr uint64_t kCapabilities = TFL_CAP_PEER_COPY | TFL_CAP_EVENT_TIMING |
                                            TFL_CAP_UNORDERED_PRODUCERS |
                                            TFL_CAP_PINNED_HOST_MEMORY;

  // Each status this runtime tells apart; any other is a device error.
  static constexpr torch_fl::kit::SdkError<topsError_t> kErrors[] = {
      TFL_KIT_SDK_ERROR(topsSuccess, TFL_OK),
      TFL_KIT_SDK_ERROR(topsErrorInvalidValue, TFL_ERROR_INVALID_VALUE),
      TFL_KIT_SDK_ERROR(topsErrorOutOfMemory, TFL_ERROR_OUT_OF_MEMORY),
      TFL_KIT_SDK_ERROR(topsErrorNotInitialized, TFL_ERROR_NOT_INITIALIZED),
      TFL_KIT_SDK_ERROR(topsErrorInvalidDevicePointer, TFL_ERROR_INVALID_POINTER),
      TFL_KIT_SDK_ERROR(topsErrorInvalidMemcpyDirection, TFL_ERROR_INVALID_MEMCPY_KIND),
      TFL_KIT_SDK_ERROR(topsErrorNoDevice, TFL_ERROR_INVALID_DEVICE),
      TFL_KIT_SDK_ERROR(topsErrorInvalidDevice, TFL_ERROR_INVALID_DEVICE),
      TFL_KIT_SDK_ERROR(topsErrorNotReady, TFL_ERROR_NOT_READY),
      TFL_KIT_SDK_ERROR(topsErrorNotSupported, TFL_ERROR_NOT_SUPPORTED),
      TFL_KIT_SDK_ERROR(topsErrorInvalidHandle, TFL_ERROR_INVALID_HANDLE),
  };
  static tfl_status to_status(topsError_t e) { return torch_fl::kit::sdk_status(kErrors, e); }
  static const char* error_string(Error e) { return topsGetErrorString(e); }
  static void clear_error() { (void)topsGetLastError(); }

  TFL_KIT_SDK_CALL(get_device_count, topsGetDeviceCount)
  TFL_KIT_SDK_CALL(get_device, topsGetDevice)
  TFL_KIT_SDK_CALL(set_device, topsSetDevice)
  TFL_KIT_SDK_CALL(device_synchronize, topsDeviceSynchronize)
  TFL_KIT_SDK_CALL(mem_get_info, topsMemGetInfo)
  TFL_KIT_SDK_CALL(malloc, topsMalloc)
  TFL_KIT_SDK_CALL(free, topsFree)
  TFL_KIT_SDK_CALL(host_free, topsHostFree)
  TFL_KIT_SDK_CALL(memcpy, topsMemcpy)
  TFL_KIT_SDK_CALL(memcpy_async, topsMemcpyAsync)
  TFL_KIT_SDK_CALL(memcpy_peer, topsMemcpyPeer)
  TFL_KIT_SDK_CALL(memcpy_peer_async, topsMemcpyPeerAsync)
  TFL_KIT_SDK_CALL(memset_async, topsMemsetAsync)
  TFL_KIT_SDK_CALL(stream_destroy, topsStreamDestroy)
  TFL_KIT_SDK_CALL(stream_synchronize, topsStreamSynchronize)
  TFL_KIT_SDK_CALL(stream_query, topsStreamQuery)
  TFL_KIT_SDK_CALL(event_destroy, topsEventDestroy)
  TFL_KIT_SDK_CALL(event_record, topsEventRecord)
  TFL_KIT_SDK_CALL(event_synchronize, topsEventSynchronize)
  TFL_KIT_SDK_CALL(event_query, topsEventQuery)
  TFL_KIT_SDK_CALL(event_elapsed_time, topsEventElapsedTime)

  static constexpr const char* host_malloc_name = "topsHostMalloc";
  static Error host_malloc(void** p, size_t n) {
    return topsHostMalloc(p, n, topsHostMallocDefault);
  }
  // topsrt has no stream priorities: every stream is created alike.
  static constexpr const char* stream_create_name = "topsStreamCreateWithFlags";
  static Error stream_create(Stream* s, bool non_blocking, int /*priority*/) {
    return topsStreamCreateWithFlags(s, non_blocking ? topsStreamNonBlocking : topsStreamDefault);
  }
  static constexpr const char* stream_wait_event_name = "topsStreamWaitEvent";
  static Error stream_wait_event(Stream s, Event e) { return topsStreamWaitEvent(s, e, 0); }
  static constexpr const char* event_create_name = "topsEventCreateWithFlags";
  static Error event_create(Event* e, bool timing) {
    return topsEventCreateWithFlags(e, timing ? topsEventDefault : topsEventDisableTiming);
  }
};

const tfl_runtime_v1 kTable = torch_fl::kit::CudaStyleRuntime<Topsrt>::table();

}  // namespace

TFL_KIT_RUNTIME_ENTRY(kTable)
