// The sim runtime's tfl_runtime_v1 table and its exported entry point.
//
// `sim` is torch-fl's built-in vendor: N virtual devices backed by host
// memory, with real asynchronous streams, so core's device, stream, event and
// allocator code runs (and its misuse fails) without any accelerator.
#include <torch_fl/runtime.h>

#include "sim_control.h"
#include "sim_copy.h"
#include "sim_device.h"
#include "sim_entry.h"
#include "sim_errors.h"
#include "sim_event.h"
#include "sim_graph.h"
#include "sim_ipc.h"
#include "sim_memory.h"
#include "sim_stream.h"

namespace torch_fl::sim {
namespace {

tfl_status sim_init() {
  return entry(Call::init, [] { return TFL_OK; });
}

const char* sim_status_name(tfl_status status) { return status_name(status); }
const char* sim_last_error() { return last_error(); }

const tfl_runtime_v1 kTable = {
    /*abi_version=*/TFL_RUNTIME_ABI_VERSION,
    /*struct_size=*/sizeof(tfl_runtime_v1),
    /*name=*/"sim",
    /*capabilities=*/TFL_CAP_HOST_ADDRESSABLE_MEMORY | TFL_CAP_PEER_COPY | TFL_CAP_EVENT_TIMING |
        TFL_CAP_PINNED_HOST_MEMORY | TFL_CAP_GRAPHS,
    /*init=*/sim_init,
    /*status_name=*/sim_status_name,
    /*last_error=*/sim_last_error,
    /*device_count=*/sim_device_count,
    /*get_device=*/sim_get_device,
    /*set_device=*/sim_set_device,
    /*device_synchronize=*/sim_device_synchronize,
    /*mem_get_info=*/sim_mem_get_info,
    /*device_name=*/sim_device_name,
    /*malloc=*/sim_malloc,
    /*free=*/sim_free,
    /*host_malloc=*/sim_host_malloc,
    /*host_free=*/sim_host_free,
    /*pointer_info=*/sim_pointer_info,
    /*memcpy=*/sim_memcpy,
    /*memcpy_async=*/sim_memcpy_async,
    /*memcpy_peer_async=*/sim_memcpy_peer_async,
    /*memset_async=*/sim_memset_async,
    /*stream_create=*/sim_stream_create,
    /*stream_destroy=*/sim_stream_destroy,
    /*stream_synchronize=*/sim_stream_synchronize,
    /*stream_query=*/sim_stream_query,
    /*stream_wait_event=*/sim_stream_wait_event,
    /*launch_host_func=*/sim_launch_host_func,
    /*event_create=*/sim_event_create,
    /*event_destroy=*/sim_event_destroy,
    /*event_record=*/sim_event_record,
    /*event_synchronize=*/sim_event_synchronize,
    /*event_query=*/sim_event_query,
    /*event_elapsed_ms=*/sim_event_elapsed_ms,
    /*ipc_get_handle=*/sim_ipc_get_handle,
    /*ipc_open_handle=*/sim_ipc_open_handle,
    /*ipc_close_handle=*/sim_ipc_close_handle,
    /*native_stream=*/sim_native_stream,
    /*probe=*/sim_probe,
    /*graph_capture_begin=*/sim_graph_capture_begin,
    /*graph_capture_end=*/sim_graph_capture_end,
    /*graph_instantiate=*/sim_graph_instantiate,
    /*graph_launch=*/sim_graph_launch,
    /*graph_destroy=*/sim_graph_destroy,
    /*stream_capture_status=*/sim_stream_capture_status,
};

}  // namespace
}  // namespace torch_fl::sim

extern "C" TFL_SIM_EXPORT const tfl_runtime_v1* tfl_runtime_get(uint32_t abi_version) {
  return abi_version == TFL_RUNTIME_ABI_VERSION ? &torch_fl::sim::kTable : nullptr;
}
