// The torch-fl runtime table (include/torch_fl/runtime.h) over CANN's aclrt. Compiled against
// the toolkit's acl/acl.h and runtime.h only, no torch.
//
// aclrt has CUDA's shape (a current device per thread, device-scoped pointers, streams and events
// as handles), so the kit's CUDA-style runtime (include/torch_fl/kit/cuda_style_runtime.h) gives
// the table and this file is aclrt's dialect. What CANN requires beyond CUDA's rules, and where
// it is met (the kit's optional dialect members, cuda_style_hooks.h, or here):
//  - aclInit once per process, before any aclrt call (init). A repeat returns
//    ACL_ERROR_REPEAT_INITIALIZE, accepted: the application (or another library) may have
//    initialised first.
//  - device pointers are device-scoped: every call touching one runs with its owning NPU
//    current (H2D: dst decides; D2H, D2D, memset, free: src/ptr). Ownership is tracked by the
//    runtime (start, size, device) for every malloc: aclrtPointerGetAttributes only exists in
//    recent toolkits, reports no allocation bounds, and an interior pointer's allocation is what
//    pointer_info and the overrun checks (kChecksArguments) need.
//  - a stream belongs to the NPU current when it was created, and is used with that NPU current.
//  - copies between NPUs need aclrtDeviceEnablePeerAccess in both directions (once per pair,
//    each with its own NPU current), then an ACL_MEMCPY_DEVICE_TO_DEVICE copy issued with the
//    source NPU current on a source-NPU stream (memcpy_peer, memcpy_peer_async); aclrtMemcpy
//    waits for no stream, so a synchronous one drains the default streams first
//    (kUnorderedSyncCopies).
//  - aclrtMemcpyAsync with host memory needs aclrtMallocHost memory (CANN documents that other
//    host memory fails unpredictably when the copy runs); pageable host memory is copied
//    synchronously after the stream's earlier work instead, as CUDA does for pageable H2D
//    (kPinnedAsyncCopies). Async host-to-host copies are not supported by aclrtMemcpyAsync: done
//    on the host once the stream has drained.
//  - host functions: aclrtLaunchCallback(ACL_CALLBACK_BLOCK) runs fn on a thread subscribed to
//    the stream (aclrtSubscribeReport) that serves aclrtProcessReport; BLOCK holds later work on
//    the stream until fn returned (kStreamCallbacks; aclrt_host_functions.cpp).
//  - aclrtStreamQuery reports COMPLETE=0 / NOT_READY=1 but aclrtQueryEventStatus reports
//    NOT_READY=0 / COMPLETE=1: each is compared with its own enum's names, never with 0.
//  - an event waits forever unless recorded, and lives in the context of its device
//    (kTracksEvents).
//  - aclrtDestroyStream needs the stream drained first (kDrainBeforeStreamDestroy).
//  - device graphs are CANN's stream capture (aclmdlRICaptureBegin .. aclmdlRICaptureEnd, then
//    aclmdlRIExecuteAsync; cuda_style_graphs.h); CANN refuses what a capture forbids, and its
//    capture statuses become TFL_ERROR_CAPTURE (aclrt_errors.cpp).
//  - a forked child starts uninitialised: the runtime forgets the parent's state there.
#include <acl/acl.h>
#include <pthread.h>
#include <torch_fl/kit/cuda_style_runtime.h>

#include <algorithm>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <utility>

#include "aclrt_errors.h"
#include "aclrt_host_functions.h"

namespace {

// Peer access between two NPUs, enabled once per pair in both directions, each with its own
// device current. Called with `a` current, which is current again on return.
std::mutex g_peer_mutex;
std::set<std::pair<int, int>> g_peers;  // (low, high)

aclError enable_peer(int a, int b, const char** call) {
  std::lock_guard<std::mutex> lock(g_peer_mutex);
  const auto key = std::minmax(a, b);
  if (a == b || g_peers.count(key)) return ACL_SUCCESS;
  for (const auto& [from, to] : {std::make_pair(a, b), std::make_pair(b, a)}) {
    int32_t can = 0;
    *call = "aclrtDeviceCanAccessPeer";
    if (aclError e = aclrtDeviceCanAccessPeer(&can, from, to)) return e;
    if (can != 1) return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
  }
  for (const auto& [from, to] : {std::make_pair(a, b), std::make_pair(b, a)}) {
    *call = "aclrtSetDevice";
    if (aclError e = aclrtSetDevice(from)) return e;
    *call = "aclrtDeviceEnablePeerAccess";
    const aclError e = aclrtDeviceEnablePeerAccess(to, 0);
    if (e != ACL_SUCCESS || from != a) (void)aclrtSetDevice(a);
    if (e != ACL_SUCCESS) return e;
  }
  g_peers.insert(key);
  return ACL_SUCCESS;
}

// aclrt in the kit's CUDA-style runtime. A call that goes through more than one CANN function
// names the one that failed in its thread-local `<call>_name`.
struct Aclrt {
  using Error = aclError;
  using Stream = aclrtStream;
  using Event = aclrtEvent;
  using MemcpyKind = aclrtMemcpyKind;  // CUDA's values, in CUDA's order
  static constexpr Error kSuccess = ACL_SUCCESS;
  // What the stream and event queries below answer for pending work.
  static constexpr Error kNotReady = ACL_ERROR_RT_STREAM_NOT_COMPLETE;
  static constexpr Error kNoDevice = ACL_ERROR_RT_NO_DEVICE;
  static constexpr const char* kRuntime = "aclrt";
  static constexpr const char* kDevice = "Ascend NPU";
  static constexpr const char* kErrorType = "aclError";
  // NPU memory is device-scoped (no host-addressable memory). aclnn ops and other kernels queued
  // on one aclrtStream run in stream order, so producers need no barrier. TFL_CAP_GRAPHS comes
  // with kGraphs below.
  static constexpr uint64_t kCapabilities =
      TFL_CAP_PEER_COPY | TFL_CAP_EVENT_TIMING | TFL_CAP_PINNED_HOST_MEMORY;
  static constexpr bool kChecksArguments = true;  // the toolkit faults at execution instead
  static constexpr bool kUnorderedSyncCopies = true;
  static constexpr bool kPinnedAsyncCopies = true;
  static constexpr bool kDrainBeforeStreamDestroy = true;
  static constexpr bool kStreamCallbacks = true;
  static constexpr bool kTracksEvents = true;

  static tfl_status to_status(Error e) { return tfl_aclrt::to_status(e); }
  static const char* error_string(Error e) { return tfl_aclrt::error_name(e); }
  static void clear_error() { (void)aclGetRecentErrMsg(); }
  static std::string failure_text(const char* call, int device, Error e,
                                  const std::string& detail) {
    return tfl_aclrt::failure_text(call, device, e, detail);
  }
  // One SoC per machine: aclrtGetSocName names the chip ("Ascend910B1"), the index tells the
  // cards apart.
  static void device_name(int device, char* buf, size_t len) {
    const char* soc = aclrtGetSocName();
    std::snprintf(buf, len, "%s (NPU %d)", soc && *soc ? soc : "Ascend", device);
  }

  static constexpr const char* init_name = "aclInit";
  static Error init() {
    const Error e = aclInit(nullptr);
    return e == ACL_ERROR_REPEAT_INITIALIZE ? ACL_SUCCESS : e;
  }
  static constexpr const char* get_device_count_name = "aclrtGetDeviceCount";
  static Error get_device_count(int* n) {
    uint32_t count = 0;
    const Error e = aclrtGetDeviceCount(&count);
    if (e == ACL_SUCCESS) *n = static_cast<int>(count);
    return e;
  }
  // A thread that never chose a device is on NPU 0 (as with CUDA); CANN has no current device
  // until aclrtSetDevice, so that is made explicit here. Only "no device chosen yet" means that.
  static inline thread_local const char* get_device_name = "aclrtGetDevice";
  static Error get_device(int* device) {
    get_device_name = "aclrtGetDevice";
    int32_t d = -1;
    Error e = aclrtGetDevice(&d);
    if (e == ACL_ERROR_RT_CONTEXT_NULL) {
      (void)aclGetRecentErrMsg();  // the "no context" text is not an error here
      get_device_name = "aclrtSetDevice";
      e = aclrtSetDevice(0);
      d = 0;
    }
    if (e == ACL_SUCCESS) *device = d;
    return e;
  }
  TFL_KIT_SDK_CALL(set_device, aclrtSetDevice)
  TFL_KIT_SDK_CALL(device_synchronize, aclrtSynchronizeDevice)
  static constexpr const char* mem_get_info_name = "aclrtGetMemInfo";
  static Error mem_get_info(size_t* free_bytes, size_t* total_bytes) {
    return aclrtGetMemInfo(ACL_HBM_MEM, free_bytes, total_bytes);
  }
  static constexpr const char* malloc_name = "aclrtMalloc";
  static Error malloc(void** p, size_t n) { return aclrtMalloc(p, n, ACL_MEM_MALLOC_HUGE_FIRST); }
  TFL_KIT_SDK_CALL(free, aclrtFree)
  // aclrtMallocHost and aclrtFreeHost need a context: the calling thread's device.
  static inline thread_local const char* host_malloc_name = "aclrtMallocHost";
  static Error host_malloc(void** p, size_t n) {
    int device = -1;
    const Error e = get_device(&device);
    host_malloc_name = e == ACL_SUCCESS ? "aclrtMallocHost" : get_device_name;
    return e == ACL_SUCCESS ? aclrtMallocHost(p, n) : e;
  }
  static inline thread_local const char* host_free_name = "aclrtFreeHost";
  static Error host_free(void* p) {
    int device = -1;
    const Error e = get_device(&device);
    host_free_name = e == ACL_SUCCESS ? "aclrtFreeHost" : get_device_name;
    return e == ACL_SUCCESS ? aclrtFreeHost(p) : e;
  }
  // aclrtMemcpy's destMax is the copy's size: the runtime checks bounds (kChecksArguments).
  static constexpr const char* memcpy_name = "aclrtMemcpy";
  static Error memcpy(void* dst, const void* src, size_t n, MemcpyKind kind) {
    return aclrtMemcpy(dst, n, src, n, kind);
  }
  static constexpr const char* memcpy_async_name = "aclrtMemcpyAsync";
  static Error memcpy_async(void* dst, const void* src, size_t n, MemcpyKind kind, Stream s) {
    return aclrtMemcpyAsync(dst, n, src, n, kind, s);
  }
  // No MemcpyPeer in ACL: peer access, then a DEVICE_TO_DEVICE copy from the source NPU.
  static inline thread_local const char* memcpy_peer_name = "aclrtMemcpy";
  static Error memcpy_peer(void* dst, int dst_device, const void* src, int src_device, size_t n) {
    if (Error e = enable_peer(src_device, dst_device, &memcpy_peer_name)) return e;
    memcpy_peer_name = "aclrtMemcpy";
    return aclrtMemcpy(dst, n, src, n, ACL_MEMCPY_DEVICE_TO_DEVICE);
  }
  static inline thread_local const char* memcpy_peer_async_name = "aclrtMemcpyAsync";
  static Error memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device,
                                 size_t n, Stream s) {
    if (Error e = enable_peer(src_device, dst_device, &memcpy_peer_async_name)) return e;
    memcpy_peer_async_name = "aclrtMemcpyAsync";
    return aclrtMemcpyAsync(dst, n, src, n, ACL_MEMCPY_DEVICE_TO_DEVICE, s);
  }
  static constexpr const char* memset_async_name = "aclrtMemsetAsync";
  static Error memset_async(void* p, int value, size_t n, Stream s) {
    return aclrtMemsetAsync(p, n, value, n, s);
  }
  // Priority is not passed on: CANN's training parts take only 0 (a reserved value). Every
  // stream, the runtime's default streams too, is a created one (never CANN's NULL stream), so
  // it can be subscribed for host functions. FAST_LAUNCH: resources reserved at creation instead
  // of on each first launch.
  static constexpr const char* stream_create_name = "aclrtCreateStreamWithConfig";
  static Error stream_create(Stream* s, bool /*non_blocking*/, int /*priority*/) {
    return aclrtCreateStreamWithConfig(s, 0, ACL_STREAM_FAST_LAUNCH);
  }
  static inline thread_local const char* stream_destroy_name = "aclrtDestroyStream";
  static Error stream_destroy(Stream s) {
    if (Error e = tfl_aclrt::unsubscribe(s, &stream_destroy_name)) return e;
    stream_destroy_name = "aclrtDestroyStream";
    return aclrtDestroyStream(s);
  }
  TFL_KIT_SDK_CALL(stream_synchronize, aclrtSynchronizeStream)
  static constexpr const char* stream_query_name = "aclrtStreamQuery";
  static Error stream_query(Stream s) {
    aclrtStreamStatus status = ACL_STREAM_STATUS_RESERVED;
    if (Error e = aclrtStreamQuery(s, &status)) return e;
    if (status == ACL_STREAM_STATUS_COMPLETE) return ACL_SUCCESS;
    return status == ACL_STREAM_STATUS_NOT_READY ? kNotReady : ACL_ERROR_RT_INTERNAL_ERROR;
  }
  static constexpr const char* stream_wait_event_name = "aclrtStreamWaitEvent";
  static Error stream_wait_event(Stream s, Event e) { return aclrtStreamWaitEvent(s, e); }
  // SYNC: usable by aclrtStreamWaitEvent; TIME_LINE: records timestamps (costs a little).
  static constexpr const char* event_create_name = "aclrtCreateEventWithFlag";
  static Error event_create(Event* e, bool timing) {
    return aclrtCreateEventWithFlag(e, ACL_EVENT_SYNC | (timing ? ACL_EVENT_TIME_LINE : 0u));
  }
  TFL_KIT_SDK_CALL(event_destroy, aclrtDestroyEvent)
  TFL_KIT_SDK_CALL(event_record, aclrtRecordEvent)
  TFL_KIT_SDK_CALL(event_synchronize, aclrtSynchronizeEvent)
  static constexpr const char* event_query_name = "aclrtQueryEventStatus";
  static Error event_query(Event e) {
    aclrtEventRecordedStatus status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
    if (Error s = aclrtQueryEventStatus(e, &status)) return s;
    return status == ACL_EVENT_RECORDED_STATUS_COMPLETE ? ACL_SUCCESS : kNotReady;
  }
  TFL_KIT_SDK_CALL(event_elapsed_time, aclrtEventElapsedTime)
  static inline thread_local const char* launch_host_func_name = "aclrtLaunchCallback";
  static Error launch_host_func(Stream s, void (*fn)(void*), void* user_data) {
    return tfl_aclrt::launch_callback(s, fn, user_data, &launch_host_func_name);
  }

  // Device graphs: CANN's stream capture. A graph is the model run instance (aclmdlRI)
  // aclmdlRICaptureEnd made, ready to execute: instantiating it is a no-op.
  static constexpr bool kGraphs = true;
  using Graph = aclmdlRI;
  using GraphExec = aclmdlRI;
  using CaptureMode = aclmdlRICaptureMode;
  using CaptureStatus = aclmdlRICaptureStatus;
  static constexpr CaptureMode kCaptureGlobal = ACL_MODEL_RI_CAPTURE_MODE_GLOBAL;
  static constexpr CaptureMode kCaptureThreadLocal = ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL;
  static constexpr CaptureMode kCaptureRelaxed = ACL_MODEL_RI_CAPTURE_MODE_RELAXED;
  static constexpr CaptureStatus kCaptureNone = ACL_MODEL_RI_CAPTURE_STATUS_NONE;
  static constexpr CaptureStatus kCaptureActive = ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE;
  static constexpr CaptureStatus kCaptureInvalidated = ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED;
  TFL_KIT_SDK_CALL(begin_capture, aclmdlRICaptureBegin)
  TFL_KIT_SDK_CALL(end_capture, aclmdlRICaptureEnd)
  static constexpr const char* graph_instantiate_name = "aclmdlRICaptureEnd";
  static Error graph_instantiate(GraphExec* exec, Graph g, unsigned long long /*flags*/) {
    *exec = g;
    return ACL_SUCCESS;
  }
  TFL_KIT_SDK_CALL(graph_launch, aclmdlRIExecuteAsync)
  // Executions already queued keep what they run (CANN's aclmdlRIDestroy contract).
  static constexpr const char* graph_exec_destroy_name = "aclmdlRIDestroy";
  static Error graph_exec_destroy(GraphExec) { return ACL_SUCCESS; }  // graph_destroy frees it
  TFL_KIT_SDK_CALL(graph_destroy, aclmdlRIDestroy)
  static constexpr const char* stream_is_capturing_name = "aclmdlRICaptureGetInfo";
  static Error stream_is_capturing(Stream s, CaptureStatus* status) {
    aclmdlRI model = nullptr;
    return aclmdlRICaptureGetInfo(s, status, &model);
  }
  // CANN allows allocation while capturing in every mode: nothing to relax.
  static constexpr const char* exchange_capture_mode_name = "aclmdlRICaptureBegin";
  static Error exchange_capture_mode(CaptureMode*) { return ACL_SUCCESS; }
};

using Runtime = torch_fl::kit::CudaStyleRuntime<Aclrt>;

// A forked child has none of the parent's NPU state (the driver's, the toolkit's) nor its report
// threads, and CANN starts it uninitialised: the runtime forgets the parent's streams,
// allocations, peer access and report threads, so the child initialises afresh on first use
// (core refuses flagos in a child whose parent had used it; a parent that only probed forks
// children that can use it).
void after_fork_in_child() {
  Runtime::forget_after_fork();
  new (&g_peer_mutex) std::mutex();
  new (&g_peers) std::set<std::pair<int, int>>();
  tfl_aclrt::forget_reporters_after_fork();
}

__attribute__((constructor)) void register_fork_handler() {
  pthread_atfork(nullptr, nullptr, after_fork_in_child);
}

// v1.1 IPC is left out (the kit's empty fields): CANN's IPC memory (aclrtIpcMemGetExportKey /
// aclrtIpcMemImportByKey) exists only in recent toolkits and, by default, opens only in
// processes the exporter named in advance (aclrtIpcMemSetImportPid), which the ABI's "any process
// may open the handle" does not give. Without it, torch.multiprocessing refuses flagos tensors,
// naming the device and .cpu().
const tfl_runtime_v1 kTable = Runtime::table();

}  // namespace

TFL_KIT_RUNTIME_ENTRY(kTable)
