// The torch-fl runtime table (include/torch_fl/runtime.h) over the MUSA
// runtime. Compiled against the SDK header and runtime.h only, no torch.
//
// The MUSA runtime has CUDA's shape, so the kit's CUDA-style runtime
// (include/torch_fl/kit/cuda_style_runtime.h) gives the whole table: device
// pointers used with their owning GPU current, cross-GPU copies through
// musaMemcpyPeer(Async) on a stream of the source GPU, default streams, the
// host-function watcher, every status checked and named, and device graphs over
// MUSA's stream capture (musaStreamBeginCapture, musaGraphLaunch, ...). This file
// is the MUSA runtime's dialect.
#include <musa_runtime_api.h>
#include <torch_fl/kit/cuda_style_runtime.h>
#include <torch_fl/kit/sdk_errors.h>

namespace {

struct Musart {
  using Error = musaError_t;
  using Stream = musaStream_t;
  using Event = musaEvent_t;
  using MemcpyKind = musaMemcpyKind;
  static constexpr Error kSuccess = musaSuccess;
  static constexpr Error kNotReady = musaErrorNotReady;
  static constexpr Error kNoDevice = musaErrorNoDevice;
  static constexpr const char* kRuntime = "musart";
  static constexpr const char* kDevice = "MUSA GPU";
  static constexpr const char* kErrorType = "musaError_t";
  static constexpr const char* kDeviceName = "Moore Threads MUSA GPU %d (musart)";
  // Device memory is not host-addressable. muDNN and Triton (mthreads) kernels launch through the
  // one MUSA runtime onto the same stream, so they are ordered as on CUDA (no
  // TFL_CAP_UNORDERED_PRODUCERS). TFL_CAP_GRAPHS comes with kGraphs below.
  static constexpr uint64_t kCapabilities =
      TFL_CAP_PEER_COPY | TFL_CAP_EVENT_TIMING | TFL_CAP_PINNED_HOST_MEMORY;

  // Each status this runtime tells apart; any other is a device error.
  static constexpr torch_fl::kit::SdkError<musaError_t> kErrors[] = {
      TFL_KIT_SDK_ERROR(musaSuccess, TFL_OK),
      TFL_KIT_SDK_ERROR(musaErrorInvalidValue, TFL_ERROR_INVALID_VALUE),
      TFL_KIT_SDK_ERROR(musaErrorMemoryAllocation, TFL_ERROR_OUT_OF_MEMORY),
      TFL_KIT_SDK_ERROR(musaErrorInitializationError, TFL_ERROR_NOT_INITIALIZED),
      TFL_KIT_SDK_ERROR(musaErrorInvalidDevicePointer, TFL_ERROR_INVALID_POINTER),
      TFL_KIT_SDK_ERROR(musaErrorInvalidMemcpyDirection, TFL_ERROR_INVALID_MEMCPY_KIND),
      TFL_KIT_SDK_ERROR(musaErrorNoDevice, TFL_ERROR_INVALID_DEVICE),
      TFL_KIT_SDK_ERROR(musaErrorInvalidDevice, TFL_ERROR_INVALID_DEVICE),
      TFL_KIT_SDK_ERROR(musaErrorNotReady, TFL_ERROR_NOT_READY),
      TFL_KIT_SDK_ERROR(musaErrorNotSupported, TFL_ERROR_NOT_SUPPORTED),
      TFL_KIT_SDK_ERROR(musaErrorInvalidResourceHandle, TFL_ERROR_INVALID_HANDLE),
      // A call a stream capture forbids, or work on (or the end of) an invalidated capture.
      TFL_KIT_SDK_ERROR(musaErrorStreamCaptureUnsupported, TFL_ERROR_CAPTURE),
      TFL_KIT_SDK_ERROR(musaErrorStreamCaptureInvalidated, TFL_ERROR_CAPTURE),
      TFL_KIT_SDK_ERROR(musaErrorStreamCaptureMerge, TFL_ERROR_CAPTURE),
      TFL_KIT_SDK_ERROR(musaErrorStreamCaptureUnmatched, TFL_ERROR_CAPTURE),
      TFL_KIT_SDK_ERROR(musaErrorStreamCaptureUnjoined, TFL_ERROR_CAPTURE),
      TFL_KIT_SDK_ERROR(musaErrorStreamCaptureIsolation, TFL_ERROR_CAPTURE),
      TFL_KIT_SDK_ERROR(musaErrorStreamCaptureImplicit, TFL_ERROR_CAPTURE),
      TFL_KIT_SDK_ERROR(musaErrorCapturedEvent, TFL_ERROR_CAPTURE),
      TFL_KIT_SDK_ERROR(musaErrorStreamCaptureWrongThread, TFL_ERROR_CAPTURE),
      // e.g. ending a capture on a stream that does not capture
      TFL_KIT_SDK_ERROR(musaErrorIllegalState, TFL_ERROR_INVALID_VALUE),
  };
  static tfl_status to_status(musaError_t e) { return torch_fl::kit::sdk_status(kErrors, e); }
  static const char* error_string(Error e) { return musaGetErrorString(e); }
  static void clear_error() { (void)musaGetLastError(); }

  TFL_KIT_SDK_CALL(get_device_count, musaGetDeviceCount)
  TFL_KIT_SDK_CALL(get_device, musaGetDevice)
  TFL_KIT_SDK_CALL(set_device, musaSetDevice)
  TFL_KIT_SDK_CALL(device_synchronize, musaDeviceSynchronize)
  TFL_KIT_SDK_CALL(mem_get_info, musaMemGetInfo)
  TFL_KIT_SDK_CALL(malloc, musaMalloc)
  TFL_KIT_SDK_CALL(free, musaFree)
  TFL_KIT_SDK_CALL(host_free, musaFreeHost)
  TFL_KIT_SDK_CALL(memcpy, musaMemcpy)
  TFL_KIT_SDK_CALL(memcpy_async, musaMemcpyAsync)
  TFL_KIT_SDK_CALL(memcpy_peer, musaMemcpyPeer)
  TFL_KIT_SDK_CALL(memcpy_peer_async, musaMemcpyPeerAsync)
  TFL_KIT_SDK_CALL(memset_async, musaMemsetAsync)
  TFL_KIT_SDK_CALL(stream_destroy, musaStreamDestroy)
  TFL_KIT_SDK_CALL(stream_synchronize, musaStreamSynchronize)
  TFL_KIT_SDK_CALL(stream_query, musaStreamQuery)
  TFL_KIT_SDK_CALL(event_destroy, musaEventDestroy)
  TFL_KIT_SDK_CALL(event_record, musaEventRecord)
  TFL_KIT_SDK_CALL(event_synchronize, musaEventSynchronize)
  TFL_KIT_SDK_CALL(event_query, musaEventQuery)
  TFL_KIT_SDK_CALL(event_elapsed_time, musaEventElapsedTime)

  static constexpr const char* host_malloc_name = "musaHostAlloc";
  static Error host_malloc(void** p, size_t n) { return musaHostAlloc(p, n, musaHostAllocDefault); }
  // Priorities as CUDA numbers them: lower is more urgent, clamped by the runtime to its range.
  static constexpr const char* stream_create_name = "musaStreamCreateWithPriority";
  static Error stream_create(Stream* s, bool non_blocking, int priority) {
    return musaStreamCreateWithPriority(s, non_blocking ? musaStreamNonBlocking : musaStreamDefault,
                                        priority);
  }
  static constexpr const char* stream_wait_event_name = "musaStreamWaitEvent";
  static Error stream_wait_event(Stream s, Event e) { return musaStreamWaitEvent(s, e, 0); }
  static constexpr const char* event_create_name = "musaEventCreateWithFlags";
  static Error event_create(Event* e, bool timing) {
    return musaEventCreateWithFlags(e, timing ? musaEventDefault : musaEventDisableTiming);
  }

  // Device graphs: CUDA's stream capture under MUSA's names (cuda_style_graphs.h).
  static constexpr bool kGraphs = true;
  using Graph = musaGraph_t;
  using GraphExec = musaGraphExec_t;
  using CaptureMode = musaStreamCaptureMode;
  using CaptureStatus = musaStreamCaptureStatus;
  static constexpr CaptureMode kCaptureGlobal = musaStreamCaptureModeGlobal;
  static constexpr CaptureMode kCaptureThreadLocal = musaStreamCaptureModeThreadLocal;
  static constexpr CaptureMode kCaptureRelaxed = musaStreamCaptureModeRelaxed;
  static constexpr CaptureStatus kCaptureNone = musaStreamCaptureStatusNone;
  static constexpr CaptureStatus kCaptureActive = musaStreamCaptureStatusActive;
  static constexpr CaptureStatus kCaptureInvalidated = musaStreamCaptureStatusInvalidated;
  TFL_KIT_SDK_CALL(begin_capture, musaStreamBeginCapture)
  TFL_KIT_SDK_CALL(end_capture, musaStreamEndCapture)
  TFL_KIT_SDK_CALL(graph_instantiate, musaGraphInstantiate)
  TFL_KIT_SDK_CALL(graph_launch, musaGraphLaunch)
  TFL_KIT_SDK_CALL(graph_exec_destroy, musaGraphExecDestroy)
  TFL_KIT_SDK_CALL(graph_destroy, musaGraphDestroy)
  TFL_KIT_SDK_CALL(stream_is_capturing, musaStreamIsCapturing)
  TFL_KIT_SDK_CALL(exchange_capture_mode, musaThreadExchangeStreamCaptureMode)
  TFL_KIT_SDK_CALL(launch_host_func, musaLaunchHostFunc)
};

const tfl_runtime_v1 kTable = torch_fl::kit::CudaStyleRuntime<Musart>::table();

}  // namespace

TFL_KIT_RUNTIME_ENTRY(kTable)
