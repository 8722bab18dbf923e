// Device graphs (runtime ABI v1.3) over CANN's stream capture, "ACL Graph": a tfl_graph is the
// model run instance (aclmdlRI) aclmdlRICaptureEnd made, with the NPU it was captured on.
#pragma once

#include <acl/acl.h>
#include <torch_fl/runtime.h>

namespace tfl_aclrt {

tfl_status rt_graph_capture_begin(tfl_stream stream, int mode);
tfl_status rt_graph_capture_end(tfl_stream stream, tfl_graph* graph);
tfl_status rt_graph_instantiate(tfl_graph graph);
tfl_status rt_graph_launch(tfl_graph graph, tfl_stream stream);
tfl_status rt_graph_destroy(tfl_graph graph);
tfl_status rt_stream_capture_status(tfl_stream stream, int* status);

}  // namespace tfl_aclrt
