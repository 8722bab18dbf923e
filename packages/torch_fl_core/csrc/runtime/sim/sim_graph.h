// Device graphs (runtime ABI v1.3): while a stream captures, the work enqueued
// on it is recorded instead of run; a graph replays the recording on a stream.
//
// What sim implements of CUDA's stream capture: one stream per capture (a
// stream that would join it through an event wait is refused), the three
// capture modes for the calls that would wait for recorded work, and graphs
// whose nodes run in recording order as one task of the launch stream.
#pragma once

#include <torch_fl/runtime.h>

#include <atomic>
#include <functional>

#include "sim_event.h"
#include "sim_stream.h"

namespace torch_fl::sim {

// One recorded piece of work. An event record is kept apart: its generation
// is taken when the graph is launched (the event is pending from then on, as
// after event_record), and its marker runs in order with the rest.
struct Node {
  std::function<void()> work;  // runs at replay, reading and writing memory then
  EventPtr event;              // set: an event record instead of `work`
};

// Active captures in the process: lets every check skip the lock while there
// are none (always, outside of graph captures).
extern std::atomic<int> g_active_captures;
inline bool any_capture() noexcept { return g_active_captures.load(std::memory_order_acquire) > 0; }

// Records `node` into the capture of `stream`: true with *status TFL_OK, or
// TFL_ERROR_CAPTURE where the capture was invalidated. False when `stream`
// does not capture (it ended meanwhile): the caller runs the work as usual.
bool record_node(const char* fn, Stream& stream, Node&& node, tfl_status* status);

// The enqueue sites' test: a stream that never captured pays one atomic load
// and no std::function is built for it.
template <class Work>
bool record_if_capturing(const char* fn, Stream& stream, const Work& work, tfl_status* status) {
  return stream.capturing() && record_node(fn, stream, Node{work, nullptr}, status);
}

// TFL_ERROR_CAPTURE, invalidating them, where a capture forbids call `fn`
// that waits for a device's work (a synchronous memcpy) or may (as in
// CUDA) synchronize the process (host_malloc): every capture of `device` (-1:
// of any device) whose mode reaches the calling thread. Else TFL_OK.
tfl_status check_unsafe_call(const char* fn, int device);
// device_synchronize waits for every stream of `device`, a capturing one included, whatever
// the capture's mode and thread: as CUDA's cudaDeviceSynchronize, it is refused while any
// stream of the device captures, and the capture is invalidated.
tfl_status check_device_wait(const char* fn, int device);

// Synchronizing, querying or destroying the capturing stream itself: its work
// is recorded, not run, so there is nothing to wait for (every mode, as CUDA).
tfl_status check_stream_call_slow(const char* fn, Stream& stream);
inline tfl_status check_stream_call(const char* fn, Stream& stream) {
  return stream.capturing() ? check_stream_call_slow(fn, stream) : TFL_OK;
}

// Synchronizing or querying an event last recorded by an active capture: it
// stands for recorded work, not run (every mode, as CUDA's
// cudaErrorCapturedEvent).
tfl_status check_event_call(const char* fn, Event& event);

// stream_wait_event's capture rules. True when the wait is settled here
// (*status says how); false: an ordinary wait, enqueue it.
bool capture_wait_event(const char* fn, Stream& stream, const EventPtr& event, tfl_status* status);

tfl_status sim_graph_capture_begin(tfl_stream stream, int mode);
tfl_status sim_graph_capture_end(tfl_stream stream, tfl_graph* graph);
tfl_status sim_graph_instantiate(tfl_graph graph);
tfl_status sim_graph_launch(tfl_graph graph, tfl_stream stream);
tfl_status sim_graph_destroy(tfl_graph graph);
tfl_status sim_stream_capture_status(tfl_stream stream, int* status);

}  // namespace torch_fl::sim
