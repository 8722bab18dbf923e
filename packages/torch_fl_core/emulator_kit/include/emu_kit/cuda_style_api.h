// The extern "C" functions of a CUDA-shaped SDK over its CudaRuntime, a macro per concept, each
// function counted and faulted under its SDK name. P: the SDK's prefix (its types P##Error_t,
// P##Stream_t, P##Event_t, P##MemcpyKind, its stream and event types deriving from CudaStream
// and Event); RT: an expression naming its runtime. Include the SDK's header first. What an SDK
// names its own way (pinned memory, pointer attributes, priorities) its emulator writes by hand.
#pragma once

#include "emu_kit/controls.h"
#include "emu_kit/cuda_style.h"

namespace emu_kit {

template <class H>
int create_stream(CudaRuntime& rt, const char* fn, H* out, unsigned flags, int priority) {
  CudaStream* s = nullptr;
  const int e = rt.stream_create(fn, out ? &s : nullptr, flags, priority);
  if (e == cuda::kSuccess) *out = static_cast<H>(s);
  return e;
}

template <class H>
int create_event(CudaRuntime& rt, const char* fn, H* out, unsigned flags) {
  Event* ev = nullptr;
  const int e = rt.event_create(fn, out ? &ev : nullptr, flags);
  if (e == cuda::kSuccess) *out = static_cast<H>(ev);
  return e;
}

}  // namespace emu_kit

#define EMU_KIT_CUDA_FN(P, name, params, call) \
  EMU_KIT_EXPORT P##Error_t P##name params { return static_cast<P##Error_t>(call); }

// GetDeviceCount, GetDevice, SetDevice, DeviceSynchronize, MemGetInfo.
#define EMU_KIT_CUDA_DEVICE_API(P, RT)                                                           \
  EMU_KIT_CUDA_FN(P, GetDeviceCount, (int* count),                                               \
                  (RT).get_device_count(#P "GetDeviceCount", count))                             \
  EMU_KIT_CUDA_FN(P, GetDevice, (int* device), (RT).get_device(#P "GetDevice", device))          \
  EMU_KIT_CUDA_FN(P, SetDevice, (int device), (RT).set_device(#P "SetDevice", device))           \
  EMU_KIT_CUDA_FN(P, DeviceSynchronize, (void), (RT).device_synchronize(#P "DeviceSynchronize")) \
  EMU_KIT_CUDA_FN(P, MemGetInfo, (size_t* free_bytes, size_t* total_bytes),                      \
                  (RT).mem_get_info(#P "MemGetInfo", free_bytes, total_bytes))

// Malloc, Free, and pinned host memory under the SDK's names HOST_ALLOC(ptr, size, flags) and
// HOST_FREE(ptr).
#define EMU_KIT_CUDA_MEMORY_API(P, RT, HOST_ALLOC, HOST_FREE)                                   \
  EMU_KIT_CUDA_FN(P, Malloc, (void** ptr, size_t size), (RT).mem_alloc(#P "Malloc", ptr, size)) \
  EMU_KIT_CUDA_FN(P, Free, (void* ptr), (RT).mem_free(#P "Free", ptr))                          \
  EMU_KIT_EXPORT P##Error_t HOST_ALLOC(void** ptr, size_t size, unsigned int) {                 \
    return static_cast<P##Error_t>((RT).host_alloc(#HOST_ALLOC, ptr, size));                    \
  }                                                                                             \
  EMU_KIT_EXPORT P##Error_t HOST_FREE(void* ptr) {                                              \
    return static_cast<P##Error_t>((RT).host_free(#HOST_FREE, ptr));                            \
  }

// Memcpy, MemcpyAsync, MemcpyPeer, MemcpyPeerAsync, Memset, MemsetAsync.
#define EMU_KIT_CUDA_COPY_API(P, RT)                                                               \
  EMU_KIT_CUDA_FN(P, Memcpy, (void* dst, const void* src, size_t n, P##MemcpyKind kind),           \
                  (RT).copy(#P "Memcpy", dst, src, n, kind, nullptr, false))                       \
  EMU_KIT_CUDA_FN(P, MemcpyAsync,                                                                  \
                  (void* dst, const void* src, size_t n, P##MemcpyKind kind, P##Stream_t stream),  \
                  (RT).copy(#P "MemcpyAsync", dst, src, n, kind, stream, true))                    \
  EMU_KIT_CUDA_FN(P, MemcpyPeer, (void* dst, int dst_dev, const void* src, int src_dev, size_t n), \
                  (RT).copy_peer(#P "MemcpyPeer", dst, dst_dev, src, src_dev, n, nullptr, false))  \
  EMU_KIT_CUDA_FN(                                                                                 \
      P, MemcpyPeerAsync,                                                                          \
      (void* dst, int dst_dev, const void* src, int src_dev, size_t n, P##Stream_t stream),        \
      (RT).copy_peer(#P "MemcpyPeerAsync", dst, dst_dev, src, src_dev, n, stream, true))           \
  EMU_KIT_CUDA_FN(P, Memset, (void* dst, int value, size_t n),                                     \
                  (RT).fill(#P "Memset", dst, value, n, nullptr, false))                           \
  EMU_KIT_CUDA_FN(P, MemsetAsync, (void* dst, int value, size_t n, P##Stream_t stream),            \
                  (RT).fill(#P "MemsetAsync", dst, value, n, stream, true))

// StreamCreate, StreamCreateWithFlags, StreamDestroy, StreamQuery, StreamSynchronize,
// StreamWaitEvent.
#define EMU_KIT_CUDA_STREAM_API(P, RT)                                                             \
  EMU_KIT_CUDA_FN(                                                                                 \
      P, StreamCreate, (P##Stream_t * stream),                                                     \
      ::emu_kit::create_stream(RT, #P "StreamCreate", stream, 0, ::emu_kit::cuda::kLeastPriority)) \
  EMU_KIT_CUDA_FN(P, StreamCreateWithFlags, (P##Stream_t * stream, unsigned int flags),            \
                  ::emu_kit::create_stream(RT, #P "StreamCreateWithFlags", stream, flags,          \
                                           ::emu_kit::cuda::kLeastPriority))                       \
  EMU_KIT_CUDA_FN(P, StreamDestroy, (P##Stream_t stream),                                          \
                  (RT).stream_destroy(#P "StreamDestroy", stream))                                 \
  EMU_KIT_CUDA_FN(P, StreamQuery, (P##Stream_t stream),                                            \
                  (RT).stream_query(#P "StreamQuery", stream))                                     \
  EMU_KIT_CUDA_FN(P, StreamSynchronize, (P##Stream_t stream),                                      \
                  (RT).stream_synchronize(#P "StreamSynchronize", stream))                         \
  EMU_KIT_CUDA_FN(P, StreamWaitEvent, (P##Stream_t stream, P##Event_t event, unsigned int),        \
                  (RT).stream_wait_event(#P "StreamWaitEvent", stream, event))

// EventCreate, EventCreateWithFlags, EventRecord, EventSynchronize, EventQuery, EventDestroy,
// EventElapsedTime.
#define EMU_KIT_CUDA_EVENT_API(P, RT)                                                          \
  EMU_KIT_CUDA_FN(P, EventCreate, (P##Event_t * event),                                        \
                  ::emu_kit::create_event(RT, #P "EventCreate", event, 0))                     \
  EMU_KIT_CUDA_FN(P, EventCreateWithFlags, (P##Event_t * event, unsigned int flags),           \
                  ::emu_kit::create_event(RT, #P "EventCreateWithFlags", event, flags))        \
  EMU_KIT_CUDA_FN(P, EventRecord, (P##Event_t event, P##Stream_t stream),                      \
                  (RT).event_record(#P "EventRecord", event, stream))                          \
  EMU_KIT_CUDA_FN(P, EventSynchronize, (P##Event_t event),                                     \
                  (RT).event_synchronize(#P "EventSynchronize", event))                        \
  EMU_KIT_CUDA_FN(P, EventQuery, (P##Event_t event), (RT).event_query(#P "EventQuery", event)) \
  EMU_KIT_CUDA_FN(P, EventDestroy, (P##Event_t event),                                         \
                  (RT).event_destroy(#P "EventDestroy", event))                                \
  EMU_KIT_CUDA_FN(P, EventElapsedTime, (float* ms, P##Event_t start, P##Event_t stop),         \
                  (RT).event_elapsed(#P "EventElapsedTime", ms, start, stop))

// GetErrorString, GetLastError, and checks that the SDK's values are CUDA's.
#define EMU_KIT_CUDA_ERROR_API(P, RT)                                                             \
  static_assert(P##Success == 0 && P##ErrorInvalidValue == 1 &&                                   \
                    P##ErrorInvalidDevicePointer == 17 && P##ErrorInvalidMemcpyDirection == 21 && \
                    P##ErrorNoDevice == 100 && P##ErrorInvalidDevice == 101 &&                    \
                    P##ErrorNotReady == 600 && P##ErrorIllegalAddress == 700,                     \
                "the SDK's statuses are CUDA's");                                                 \
  static_assert(P##MemcpyDeviceToDevice == 3 && P##MemcpyDefault == 4 &&                          \
                    P##StreamNonBlocking == 1 && P##EventDisableTiming == 2,                      \
                "the SDK's constants are CUDA's");                                                \
  EMU_KIT_EXPORT const char* P##GetErrorString(P##Error_t error) {                                \
    return (RT).error_string(error);                                                              \
  }                                                                                               \
  EMU_KIT_CUDA_FN(P, GetLastError, (void), (RT).take_last_error())

// CUDA's stream capture and graphs, where the SDK has them (CudaConfig::graphs):
// StreamBeginCapture, StreamEndCapture, StreamIsCapturing, ThreadExchangeStreamCaptureMode,
// GraphInstantiate, GraphLaunch, GraphExecDestroy, GraphDestroy. Its types P##Graph_t,
// P##GraphExec_t (opaque pointers), P##StreamCaptureMode and P##StreamCaptureStatus.
#define EMU_KIT_CUDA_GRAPH_API(P, RT)                                                            \
  static_assert(P##ErrorIllegalState == 401 && P##ErrorStreamCaptureUnsupported == 900 &&        \
                    P##ErrorStreamCaptureInvalidated == 901 && P##ErrorCapturedEvent == 907 &&   \
                    P##ErrorStreamCaptureWrongThread == 908,                                     \
                "the SDK's capture statuses are CUDA's");                                        \
  static_assert(P##StreamCaptureModeGlobal == 0 && P##StreamCaptureModeThreadLocal == 1 &&       \
                    P##StreamCaptureModeRelaxed == 2 && P##StreamCaptureStatusNone == 0 &&       \
                    P##StreamCaptureStatusActive == 1 && P##StreamCaptureStatusInvalidated == 2, \
                "the SDK's capture modes and statuses are CUDA's");                              \
  EMU_KIT_CUDA_FN(P, StreamBeginCapture, (P##Stream_t stream, P##StreamCaptureMode mode),        \
                  (RT).begin_capture(#P "StreamBeginCapture", stream, mode))                     \
  EMU_KIT_EXPORT P##Error_t P##StreamEndCapture(P##Stream_t stream, P##Graph_t* graph) {         \
    void* g = nullptr;                                                                           \
    const int e = (RT).end_capture(#P "StreamEndCapture", stream, graph ? &g : nullptr);         \
    if (e == 0) *graph = static_cast<P##Graph_t>(g);                                             \
    return static_cast<P##Error_t>(e);                                                           \
  }                                                                                              \
  EMU_KIT_EXPORT P##Error_t P##StreamIsCapturing(P##Stream_t stream,                             \
                                                 P##StreamCaptureStatus* status) {               \
    int s = 0;                                                                                   \
    const int e = (RT).is_capturing(#P "StreamIsCapturing", stream, status ? &s : nullptr);      \
    if (e == 0) *status = static_cast<P##StreamCaptureStatus>(s);                                \
    return static_cast<P##Error_t>(e);                                                           \
  }                                                                                              \
  EMU_KIT_EXPORT P##Error_t P##ThreadExchangeStreamCaptureMode(P##StreamCaptureMode* mode) {     \
    int m = mode ? static_cast<int>(*mode) : 0;                                                  \
    const int e =                                                                                \
        (RT).exchange_capture_mode(#P "ThreadExchangeStreamCaptureMode", mode ? &m : nullptr);   \
    if (e == 0) *mode = static_cast<P##StreamCaptureMode>(m);                                    \
    return static_cast<P##Error_t>(e);                                                           \
  }                                                                                              \
  EMU_KIT_EXPORT P##Error_t P##GraphInstantiate(P##GraphExec_t* exec, P##Graph_t graph,          \
                                                unsigned long long flags) {                      \
    void* x = nullptr;                                                                           \
    const int e =                                                                                \
        (RT).graph_instantiate(#P "GraphInstantiate", exec ? &x : nullptr, graph, flags);        \
    if (e == 0) *exec = static_cast<P##GraphExec_t>(x);                                          \
    return static_cast<P##Error_t>(e);                                                           \
  }                                                                                              \
  EMU_KIT_CUDA_FN(P, GraphLaunch, (P##GraphExec_t exec, P##Stream_t stream),                     \
                  (RT).graph_launch(#P "GraphLaunch", exec, stream))                             \
  EMU_KIT_CUDA_FN(P, GraphExecDestroy, (P##GraphExec_t exec),                                    \
                  (RT).graph_exec_destroy(#P "GraphExecDestroy", exec))                          \
  EMU_KIT_CUDA_FN(P, GraphDestroy, (P##Graph_t graph), (RT).graph_destroy(#P "GraphDestroy", graph))
