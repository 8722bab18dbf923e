// Device graphs over aclmdlRICaptureBegin / aclmdlRICaptureEnd / aclmdlRIExecuteAsync /
// aclmdlRIDestroy / aclmdlRICaptureGetInfo.
//
// CANN enforces the capture rules itself (its unsafe calls per capture mode, synchronizing a
// capturing stream, querying a captured event, ...): the runtime passes its statuses on, and
// aclrt_errors.cpp maps the capture ones to TFL_ERROR_CAPTURE. What is left here: the ABI's
// handle checks, which CANN's opaque handles do not give, and the NPU a graph belongs to.
#include "aclrt_graph.h"

#include <mutex>
#include <string>
#include <unordered_set>

#include "aclrt_device.h"
#include "aclrt_errors.h"
#include "aclrt_stream.h"

struct tfl_graph_st {
  aclmdlRI model;
  int device;  // the NPU of the capturing stream: launches go to its streams
};

namespace tfl_aclrt {
namespace {

// Live graphs: a destroyed or made-up handle is refused rather than passed to CANN.
std::mutex g_graphs_mutex;
std::unordered_set<tfl_graph_st*> g_graphs;

bool live(tfl_graph_st* g) {
  std::lock_guard<std::mutex> lock(g_graphs_mutex);
  return g_graphs.count(g) != 0;
}

tfl_status unknown_graph(const char* fn, tfl_graph g) {
  return fail(TFL_ERROR_INVALID_HANDLE,
              std::string(fn) + ": unknown or destroyed graph " + pointer_text(g));
}

aclmdlRICaptureMode acl_mode(int mode) {
  switch (mode) {
    case TFL_CAPTURE_MODE_THREAD_LOCAL:
      return ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL;
    case TFL_CAPTURE_MODE_RELAXED:
      return ACL_MODEL_RI_CAPTURE_MODE_RELAXED;
    default:
      return ACL_MODEL_RI_CAPTURE_MODE_GLOBAL;
  }
}

}  // namespace

tfl_status rt_graph_capture_begin(tfl_stream stream, int mode) {
  if (mode < TFL_CAPTURE_MODE_GLOBAL || mode > TFL_CAPTURE_MODE_RELAXED)
    return fail(TFL_ERROR_INVALID_VALUE,
                "graph_capture_begin: unknown capture mode " + std::to_string(mode));
  // The runtime's default stream is a created aclrtStream, so CANN would capture it: refused
  // here, as the ABI (and CUDA) refuse capturing the default stream.
  if (!stream)
    return fail(TFL_ERROR_INVALID_VALUE,
                "graph_capture_begin: the default stream cannot capture; capture on a created "
                "stream");
  READY();
  ENTER_DEVICE(stream->device);
  ACL_CHECK(stream->device, aclmdlRICaptureBegin(stream->stream, acl_mode(mode)));
  return TFL_OK;
}

tfl_status rt_graph_capture_end(tfl_stream stream, tfl_graph* graph) {
  if (!stream)
    return fail(TFL_ERROR_INVALID_VALUE, "graph_capture_end: the default stream never captures");
  READY();
  ENTER_DEVICE(stream->device);
  aclmdlRI model = nullptr;
  // Ends the capture in every case (CANN ends it on failure too); no graph then.
  ACL_CHECK(stream->device, aclmdlRICaptureEnd(stream->stream, &model));
  if (!graph) {
    (void)aclmdlRIDestroy(model);
    return fail(TFL_ERROR_INVALID_VALUE,
                "graph_capture_end: graph is NULL; the capture ended, its recording is dropped");
  }
  auto* g = new tfl_graph_st{model, stream->device};
  {
    std::lock_guard<std::mutex> lock(g_graphs_mutex);
    g_graphs.insert(g);
  }
  *graph = g;
  return TFL_OK;
}

// aclmdlRICaptureEnd returns a model ready to execute: nothing to prepare, the handle is checked.
tfl_status rt_graph_instantiate(tfl_graph graph) {
  if (!live(graph)) return unknown_graph("graph_instantiate", graph);
  return TFL_OK;
}

tfl_status rt_graph_launch(tfl_graph graph, tfl_stream stream) {
  if (!live(graph)) return unknown_graph("graph_launch", graph);
  READY();
  RESOLVE(st, stream);
  if (st->device != graph->device)
    return fail(TFL_ERROR_INVALID_HANDLE, "graph_launch: the graph was captured on Ascend NPU " +
                                              std::to_string(graph->device) +
                                              " but the stream belongs to NPU " +
                                              std::to_string(st->device));
  ENTER_DEVICE(st->device);
  ACL_CHECK(st->device, aclmdlRIExecuteAsync(graph->model, st->stream));
  return TFL_OK;
}

tfl_status rt_graph_destroy(tfl_graph graph) {
  {
    std::lock_guard<std::mutex> lock(g_graphs_mutex);
    if (g_graphs.erase(graph) == 0) return unknown_graph("graph_destroy", graph);
  }
  READY();
  const int device = graph->device;
  const aclmdlRI model = graph->model;
  delete graph;
  // Executions already queued keep what they run (CANN's aclmdlRIDestroy contract).
  ENTER_DEVICE(device);
  ACL_CHECK(device, aclmdlRIDestroy(model));
  return TFL_OK;
}

tfl_status rt_stream_capture_status(tfl_stream stream, int* status) {
  if (!status) return fail(TFL_ERROR_INVALID_VALUE, "stream_capture_status: NULL out-parameter");
  READY();
  RESOLVE(st, stream);
  ENTER_DEVICE(st->device);
  aclmdlRICaptureStatus s = ACL_MODEL_RI_CAPTURE_STATUS_NONE;
  aclmdlRI model = nullptr;
  ACL_CHECK(st->device, aclmdlRICaptureGetInfo(st->stream, &s, &model));
  switch (s) {
    case ACL_MODEL_RI_CAPTURE_STATUS_NONE:
      *status = TFL_CAPTURE_NONE;
      return TFL_OK;
    case ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE:
      *status = TFL_CAPTURE_ACTIVE;
      return TFL_OK;
    case ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED:
      *status = TFL_CAPTURE_INVALIDATED;
      return TFL_OK;
  }
  return fail(TFL_ERROR_DEVICE, "aclmdlRICaptureGetInfo on Ascend NPU " +
                                    std::to_string(st->device) + " returned capture status " +
                                    std::to_string(static_cast<int>(s)));
}

}  // namespace tfl_aclrt
