// Device graphs (runtime ABI v1.3): while a stream captures, the work enqueued
// on it is recorded instead of run; a graph replays the recording on a stream.
//
// Captures and graphs share one mutex: captures are rare and short, and the
// enqueue path of a stream that does not capture never takes it (one atomic
// load of Stream::capturing).
#include "sim_graph.h"

#include <cstdarg>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "sim_entry.h"
#include "sim_errors.h"

namespace torch_fl::sim {

std::atomic<int> g_active_captures{0};

namespace {

using Nodes = std::vector<Node>;

struct Capture {
  uint64_t id;
  StreamPtr stream;  // kept alive while it captures
  int mode;
  std::thread::id thread;  // the thread that began it
  Nodes nodes;
  bool invalidated = false;
  std::string reason;  // why, from the first forbidden call
};

struct Graph {
  int device;
  // Shared with every queued launch, so destroying the graph never pulls
  // nodes from under a launch still waiting on its stream.
  std::shared_ptr<const Nodes> nodes;
};

struct GraphState {
  std::mutex mutex;
  std::unordered_map<const Stream*, std::unique_ptr<Capture>> captures;  // by capturing stream
  std::unordered_map<tfl_graph, std::shared_ptr<Graph>> graphs;
  uint64_t next_capture_id = 1;
};

// Leaked on purpose, like the stream and event registries.
GraphState& state() {
  static GraphState* s = new GraphState();
  return *s;
}

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  const int len = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out(len > 0 ? static_cast<size_t>(len) + 1 : 1, '\0');
  if (len > 0) std::vsnprintf(out.data(), out.size(), fmt, args);
  va_end(args);
  out.resize(len > 0 ? static_cast<size_t>(len) : 0);
  return out;
}

const char* mode_name(int mode) {
  switch (mode) {
    case TFL_CAPTURE_MODE_GLOBAL:
      return "TFL_CAPTURE_MODE_GLOBAL";
    case TFL_CAPTURE_MODE_THREAD_LOCAL:
      return "TFL_CAPTURE_MODE_THREAD_LOCAL";
    case TFL_CAPTURE_MODE_RELAXED:
      return "TFL_CAPTURE_MODE_RELAXED";
  }
  return "an unknown mode";
}

void* handle_of(const Capture& c) { return c.stream->handle(); }

// CUDA's modes: GLOBAL forbids unsafe calls in every thread, THREAD_LOCAL in
// the capturing thread only, RELAXED nowhere.
bool reaches_this_thread(const Capture& c) {
  return c.mode == TFL_CAPTURE_MODE_GLOBAL ||
         (c.mode == TFL_CAPTURE_MODE_THREAD_LOCAL && c.thread == std::this_thread::get_id());
}

// The first reason is the one capture_end reports: later failures follow from it.
void invalidate(Capture& c, const std::string& reason) {
  if (c.invalidated) return;
  c.invalidated = true;
  c.reason = reason;
}

// Fails with TFL_ERROR_CAPTURE, invalidating `c`; `what` says why.
tfl_status forbid(Capture& c, const std::string& what) {
  invalidate(c, what);
  return set_error(TFL_ERROR_CAPTURE, "%s; the capture is now invalidated", what.c_str());
}

Capture* find_capture(GraphState& st, const Stream& s) {
  auto it = st.captures.find(&s);
  return it == st.captures.end() ? nullptr : it->second.get();
}

Capture* find_capture_by_id(GraphState& st, uint64_t id) {
  if (id == 0) return nullptr;
  for (auto& [stream, c] : st.captures) {
    if (c->id == id) return c.get();
  }
  return nullptr;
}

tfl_status invalidated_error(const char* fn, const Capture& c) {
  return set_error(TFL_ERROR_CAPTURE,
                   "%s: stream %p captures a graph that was invalidated (%s); end the capture", fn,
                   handle_of(c), c.reason.c_str());
}

// Appends `node` to `c`; an event record makes the event the capture's.
void append(Capture& c, Node node) {
  if (node.event) node.event->set_capture(c.id);
  c.nodes.push_back(std::move(node));
}

tfl_status resolve_graph(const char* fn, tfl_graph handle, std::shared_ptr<Graph>* out) {
  GraphState& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  auto it = handle == nullptr ? st.graphs.end() : st.graphs.find(handle);
  if (it == st.graphs.end()) {
    return set_error(TFL_ERROR_INVALID_HANDLE, "%s: unknown or destroyed graph %p", fn,
                     static_cast<void*>(handle));
  }
  *out = it->second;
  return TFL_OK;
}

// The queue task of one launch: every node in recording order. A node that
// throws (a misbehaving host function) must not leave later event records
// pending forever, so each runs on its own.
void replay(const Nodes& nodes, const std::vector<uint64_t>& generations) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    try {
      if (nodes[i].event) {
        nodes[i].event->mark_reached(generations[i], Event::Clock::now());
      } else {
        nodes[i].work();
      }
    } catch (...) {
    }
  }
}

}  // namespace

// ---- the hooks of the enqueue and synchronization paths --------------------------

bool record_node(const char* fn, Stream& stream, Node&& node, tfl_status* status) {
  GraphState& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  Capture* c = find_capture(st, stream);
  if (c == nullptr) return false;
  if (c->invalidated) {
    *status = invalidated_error(fn, *c);
  } else {
    append(*c, std::move(node));
    *status = TFL_OK;
  }
  return true;
}

tfl_status check_unsafe_call(const char* fn, int device) {
  if (!any_capture()) return TFL_OK;
  GraphState& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  tfl_status result = TFL_OK;
  for (auto& [stream, c] : st.captures) {
    if ((device >= 0 && c->stream->device() != device) || !reaches_this_thread(*c)) continue;
    const std::string what =
        format("%s: not allowed while stream %p captures a graph on flagos sim device %d (%s)", fn,
               handle_of(*c), c->stream->device(), mode_name(c->mode));
    // Every capture it reaches is invalidated; the message names the first.
    if (result == TFL_OK) {
      result = forbid(*c, what);
    } else {
      invalidate(*c, what);
    }
  }
  return result;
}

tfl_status check_device_wait(const char* fn, int device) {
  if (!any_capture()) return TFL_OK;
  GraphState& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  tfl_status result = TFL_OK;
  for (auto& [stream, c] : st.captures) {
    if (c->stream->device() != device) continue;
    const std::string what = format(
        "%s: would wait for stream %p, which captures a graph on flagos sim device %d (its work "
        "is recorded, not run): not allowed in any capture mode, from any thread",
        fn, handle_of(*c), device);
    if (result == TFL_OK) {
      result = forbid(*c, what);
    } else {
      invalidate(*c, what);
    }
  }
  return result;
}

tfl_status check_stream_call_slow(const char* fn, Stream& stream) {
  GraphState& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  Capture* c = find_capture(st, stream);
  if (c == nullptr) return TFL_OK;
  return forbid(*c, format("%s: stream %p captures a graph: its work is recorded, not run, so it "
                           "cannot be synchronized, queried or destroyed until the capture ends",
                           fn, handle_of(*c)));
}

tfl_status check_event_call(const char* fn, Event& event) {
  if (!any_capture()) return TFL_OK;
  const uint64_t id = event.capture();
  if (id == 0) return TFL_OK;
  GraphState& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  Capture* c = find_capture_by_id(st, id);
  if (c == nullptr) return TFL_OK;  // that capture ended: the event is as before it
  return forbid(*c, format("%s: event %p was recorded by the graph capture of stream %p: it stands "
                           "for recorded work, not run",
                           fn, static_cast<void*>(&event), handle_of(*c)));
}

bool capture_wait_event(const char* fn, Stream& stream, const EventPtr& event, tfl_status* status) {
  if (!any_capture()) return false;
  const uint64_t id = event->capture();
  GraphState& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  Capture* mine = stream.capturing() ? find_capture(st, stream) : nullptr;
  Capture* theirs = find_capture_by_id(st, id);
  void* e = event.get();
  if (mine == nullptr) {
    if (theirs == nullptr) return false;
    // CUDA would pull this stream into the capture (a fork); sim records one
    // stream per capture.
    *status = TFL_ERROR_NOT_SUPPORTED;
    invalidate(*theirs, format("%s: stream %p waited on event %p recorded by the graph capture of "
                               "stream %p",
                               fn, stream.handle(), e, handle_of(*theirs)));
    set_error(TFL_ERROR_NOT_SUPPORTED,
              "%s: stream %p waits on event %p recorded by the graph capture of stream %p, which "
              "would join that capture; the sim runtime captures one stream only; the capture is "
              "now invalidated",
              fn, stream.handle(), e, handle_of(*theirs));
    return true;
  }
  if (mine->invalidated) {
    *status = invalidated_error(fn, *mine);
    return true;
  }
  if (theirs == mine) {
    *status = TFL_OK;  // recorded earlier on this very stream: its order already waits
    return true;
  }
  if (theirs != nullptr) {
    // Merging two captures: CUDA refuses it, and it breaks both.
    const std::string what = format(
        "%s: stream %p, capturing a graph, waits on event %p recorded by the graph capture "
        "of stream %p",
        fn, stream.handle(), e, handle_of(*theirs));
    invalidate(*theirs, what);
    *status = forbid(*mine, what);
    return true;
  }
  if (event->latest_record() == 0) {
    *status = TFL_OK;  // never recorded: nothing to wait for, now or at replay
    return true;
  }
  // Recorded outside the capture: a replay would depend on work that is not
  // in the graph. CUDA refuses this (cudaErrorStreamCaptureIsolation, unless
  // the wait is external) and invalidates the capture; so does sim.
  *status = forbid(*mine, format("%s: stream %p, capturing a graph, waits on event %p recorded "
                                 "outside the capture",
                                 fn, stream.handle(), e));
  return true;
}

// ---- table functions ------------------------------------------------------------

tfl_status sim_graph_capture_begin(tfl_stream stream, int mode) {
  return entry(Call::graph_capture_begin, [&] {
    const char* fn = "tfl_graph_capture_begin";
    if (mode < TFL_CAPTURE_MODE_GLOBAL || mode > TFL_CAPTURE_MODE_RELAXED) {
      return set_error(TFL_ERROR_INVALID_VALUE, "%s: unknown capture mode %d", fn, mode);
    }
    if (stream == nullptr) {
      return set_error(TFL_ERROR_INVALID_VALUE,
                       "%s: the default stream cannot capture (as in CUDA); capture on a created "
                       "stream",
                       fn);
    }
    StreamPtr s;
    const tfl_status status = resolve_stream(fn, stream, &s);
    if (status != TFL_OK) return status;
    GraphState& st = state();
    std::lock_guard<std::mutex> lock(st.mutex);
    if (Capture* c = find_capture(st, *s)) {
      return forbid(*c, format("%s: stream %p already captures a graph", fn, handle_of(*c)));
    }
    auto c = std::make_unique<Capture>();
    c->id = st.next_capture_id++;
    c->stream = s;
    c->mode = mode;
    c->thread = std::this_thread::get_id();
    st.captures.emplace(s.get(), std::move(c));
    g_active_captures.fetch_add(1, std::memory_order_acq_rel);
    s->set_capturing(true);
    return TFL_OK;
  });
}

tfl_status sim_graph_capture_end(tfl_stream stream, tfl_graph* graph) {
  return entry(Call::graph_capture_end, [&] {
    const char* fn = "tfl_graph_capture_end";
    if (stream == nullptr) {
      return set_error(TFL_ERROR_INVALID_VALUE, "%s: the default stream never captures", fn);
    }
    StreamPtr s;
    const tfl_status status = resolve_stream(fn, stream, &s);
    if (status != TFL_OK) return status;
    std::unique_ptr<Capture> c;  // before the lock: a dropped recording is freed after it
    GraphState& st = state();
    std::lock_guard<std::mutex> lock(st.mutex);
    auto it = st.captures.find(s.get());
    if (it == st.captures.end()) {
      return set_error(TFL_ERROR_INVALID_VALUE, "%s: stream %p is not capturing a graph", fn,
                       static_cast<void*>(stream));
    }
    // The capture ends whatever happens next (runtime.h).
    c = std::move(it->second);
    st.captures.erase(it);
    s->set_capturing(false);
    g_active_captures.fetch_sub(1, std::memory_order_acq_rel);
    if (graph == nullptr) {
      return set_error(TFL_ERROR_INVALID_VALUE,
                       "%s: graph is NULL; the capture of stream %p ended, its recording is lost",
                       fn, static_cast<void*>(stream));
    }
    if (c->mode != TFL_CAPTURE_MODE_RELAXED && c->thread != std::this_thread::get_id()) {
      return set_error(TFL_ERROR_CAPTURE,
                       "%s: the capture of stream %p began in another thread with %s, so it must "
                       "end there (as in CUDA); it ended, its recording is lost",
                       fn, static_cast<void*>(stream), mode_name(c->mode));
    }
    if (c->invalidated) {
      return set_error(TFL_ERROR_CAPTURE,
                       "%s: the capture of stream %p was invalidated, so there is no graph: %s", fn,
                       static_cast<void*>(stream), c->reason.c_str());
    }
    auto g = std::make_shared<Graph>();
    g->device = s->device();
    g->nodes = std::make_shared<const Nodes>(std::move(c->nodes));
    const auto handle = reinterpret_cast<tfl_graph>(g.get());
    st.graphs.emplace(handle, std::move(g));
    *graph = handle;
    return TFL_OK;
  });
}

tfl_status sim_graph_instantiate(tfl_graph graph) {
  return entry(Call::graph_instantiate, [&] {
    // Nothing to prepare: recorded nodes run as they are. The handle is
    // still checked, as a real runtime's instantiation would.
    std::shared_ptr<Graph> g;
    return resolve_graph("tfl_graph_instantiate", graph, &g);
  });
}

tfl_status sim_graph_launch(tfl_graph graph, tfl_stream stream) {
  return entry(Call::graph_launch, [&] {
    const char* fn = "tfl_graph_launch";
    std::shared_ptr<Graph> g;
    tfl_status status = resolve_graph(fn, graph, &g);
    if (status != TFL_OK) return status;
    StreamPtr s;
    if ((status = resolve_stream(fn, stream, &s)) != TFL_OK) return status;
    if (s->device() != g->device) {
      return set_error(TFL_ERROR_INVALID_HANDLE,
                       "%s: stream %p belongs to flagos sim device %d but graph %p was captured on "
                       "device %d",
                       fn, static_cast<void*>(stream), s->device(), static_cast<void*>(graph),
                       g->device);
    }
    std::shared_ptr<const Nodes> nodes;
    {
      std::lock_guard<std::mutex> lock(state().mutex);
      nodes = g->nodes;
      // Launched into a capture: its nodes become the capture's, as a child
      // graph would in CUDA.
      if (s->capturing()) {
        if (Capture* c = find_capture(state(), *s)) {
          if (c->invalidated) return invalidated_error(fn, *c);
          c->nodes.reserve(c->nodes.size() + nodes->size());
          for (const Node& node : *nodes) append(*c, node);
          return TFL_OK;
        }
      }
    }
    if (nodes->empty()) return TFL_OK;
    // Event records start their generation now, so the event is pending from
    // the launch on, as after event_record.
    std::vector<uint64_t> generations(nodes->size(), 0);
    for (size_t i = 0; i < nodes->size(); ++i) {
      if ((*nodes)[i].event) generations[i] = (*nodes)[i].event->begin_record();
    }
    try {
      s->enqueue([nodes, generations] { replay(*nodes, generations); });
    } catch (...) {
      // Never leave an event pending forever.
      for (size_t i = 0; i < nodes->size(); ++i) {
        if ((*nodes)[i].event) (*nodes)[i].event->mark_reached(generations[i], Event::Clock::now());
      }
      throw;
    }
    return TFL_OK;
  });
}

tfl_status sim_graph_destroy(tfl_graph graph) {
  return entry(Call::graph_destroy, [&] {
    GraphState& st = state();
    std::lock_guard<std::mutex> lock(st.mutex);
    if (graph == nullptr || st.graphs.erase(graph) == 0) {
      return set_error(TFL_ERROR_INVALID_HANDLE, "tfl_graph_destroy: unknown or destroyed graph %p",
                       static_cast<void*>(graph));
    }
    return TFL_OK;
  });
}

tfl_status sim_stream_capture_status(tfl_stream stream, int* status) {
  return entry(Call::stream_capture_status, [&] {
    const char* fn = "tfl_stream_capture_status";
    if (status == nullptr) return set_error(TFL_ERROR_INVALID_VALUE, "%s: status is NULL", fn);
    StreamPtr s;
    const tfl_status st = resolve_stream(fn, stream, &s);
    if (st != TFL_OK) return st;
    int answer = TFL_CAPTURE_NONE;
    if (s->capturing()) {
      std::lock_guard<std::mutex> lock(state().mutex);
      if (const Capture* c = find_capture(state(), *s)) {
        answer = c->invalidated ? TFL_CAPTURE_INVALIDATED : TFL_CAPTURE_ACTIVE;
      }
    }
    *status = answer;
    return TFL_OK;
  });
}

}  // namespace torch_fl::sim
