// The torch-fl runtime table (include/torch_fl/runtime.h) over CANN's aclrt. Compiled against
// the toolkit's acl/acl.h and runtime.h only, no torch.
//
// What CANN requires, and where the runtime meets it (one file per concept, aclrt_*.cpp):
//  - aclInit once per process, before any aclrt call. A repeat returns
//    ACL_ERROR_REPEAT_INITIALIZE, accepted: the application (or another library) may have
//    initialised first.
//  - device pointers are device-scoped: every call touching one runs with its owning NPU
//    current (H2D: dst decides; D2H, D2D, memset, free: src/ptr). Ownership is tracked here
//    (start, size, device) for every malloc: aclrtPointerGetAttributes only exists in recent
//    toolkits, reports no allocation bounds, and an interior pointer's allocation is what
//    pointer_info and the overrun checks need.
//  - a stream belongs to the NPU current when it was created, and is used with that NPU current.
//  - copies between NPUs need aclrtDeviceEnablePeerAccess in both directions (once per pair,
//    each with its own NPU current), then an ACL_MEMCPY_DEVICE_TO_DEVICE copy issued with the
//    source NPU current on a source-NPU stream.
//  - aclrtMemcpyAsync with host memory needs aclrtMallocHost memory (CANN documents that other
//    host memory fails unpredictably when the copy runs); pageable host memory is copied
//    synchronously after the stream's earlier work instead, as CUDA does for pageable H2D.
//    Async host-to-host copies are not supported by aclrtMemcpyAsync: done on the host once
//    the stream has drained.
//  - host functions: aclrtLaunchCallback(ACL_CALLBACK_BLOCK) runs fn on a thread subscribed to
//    the stream (aclrtSubscribeReport) that serves aclrtProcessReport; BLOCK holds later work on
//    the stream until fn returned, the ordering runtime.h asks for.
//  - aclrtStreamQuery reports COMPLETE=0 / NOT_READY=1 but aclrtQueryEventStatus reports
//    NOT_READY=0 / COMPLETE=1: each is compared with its own enum's names, never with 0.
//  - aclrtDestroyStream needs the stream drained first: stream_destroy synchronizes it.
//  - device graphs are CANN's stream capture (aclmdlRICaptureBegin .. aclmdlRICaptureEnd, then
//    aclmdlRIExecuteAsync); CANN refuses what a capture forbids, and its capture statuses become
//    TFL_ERROR_CAPTURE (aclrt_graph.cpp, aclrt_errors.cpp).
#include <torch_fl/kit/runtime_errors.h>
#include <torch_fl/kit/runtime_table.h>
#include <torch_fl/runtime.h>

#include <cstddef>

#include "aclrt_copy.h"
#include "aclrt_device.h"
#include "aclrt_event.h"
#include "aclrt_graph.h"
#include "aclrt_host_functions.h"
#include "aclrt_memory.h"
#include "aclrt_stream.h"

namespace tfl_aclrt {

constexpr auto rt_status_name = torch_fl::kit::status_name;
constexpr auto rt_last_error = torch_fl::kit::last_error;

// v1.1 IPC left out: CANN's IPC memory (aclrtIpcMemGetExportKey / aclrtIpcMemImportByKey) exists
// only in recent toolkits and, by default, opens only in processes the exporter named in advance
// (aclrtIpcMemSetImportPid), which the ABI's "any process may open the handle" does not give.
// Without it, torch.multiprocessing refuses flagos tensors, naming the device and .cpu().
constexpr std::nullptr_t rt_ipc_get_handle = nullptr;
constexpr std::nullptr_t rt_ipc_open_handle = nullptr;
constexpr std::nullptr_t rt_ipc_close_handle = nullptr;

// NPU memory is device-scoped (no host-addressable memory). aclnn ops and other kernels queued on
// one aclrtStream run in stream order, so producers need no barrier. Graphs: CANN's stream
// capture (aclrt_graph.cpp).
TFL_KIT_RUNTIME_TABLE(kTable, "aclrt",
                      TFL_CAP_PEER_COPY | TFL_CAP_EVENT_TIMING | TFL_CAP_PINNED_HOST_MEMORY |
                          TFL_CAP_GRAPHS);

}  // namespace tfl_aclrt

TFL_KIT_RUNTIME_ENTRY(tfl_aclrt::kTable)
