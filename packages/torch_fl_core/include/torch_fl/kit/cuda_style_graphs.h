// Device graphs (runtime.h v1.3) in the CUDA-style runtime (cuda_style_runtime.h), for an SDK
// with CUDA's stream capture. A dialect declares them with
//   static constexpr bool kGraphs = true;
//   using Graph, GraphExec (pointer handles), CaptureMode, CaptureStatus;
//   CaptureMode kCaptureGlobal, kCaptureThreadLocal, kCaptureRelaxed;
//   CaptureStatus kCaptureNone, kCaptureActive, kCaptureInvalidated;
//   and each with a `<call>_name` beside it: begin_capture(Stream, CaptureMode),
//   end_capture(Stream, Graph*), graph_instantiate(GraphExec*, Graph, unsigned long long flags),
//   graph_launch(GraphExec, Stream), graph_exec_destroy(GraphExec), graph_destroy(Graph),
//   stream_is_capturing(Stream, CaptureStatus*), exchange_capture_mode(CaptureMode*) (the
//   calling thread's), launch_host_func(Stream, void (*)(void*), void*) (the SDK's stream
//   callback);
// and its to_status gives TFL_ERROR_CAPTURE for the SDK's capture statuses. The table then has
// the graph fields and TFL_CAP_GRAPHS; without kGraphs (topsrt) they stay empty.
//
// The SDK enforces the capture rules (CUDA's: synchronizing or querying a capturing stream,
// synchronizing the device, waiting for or querying a captured event, a copy of pageable
// memory, the calls a capture mode forbids all fail and invalidate the capture); the runtime
// passes its statuses on. What is left here:
//  - malloc, free and host_free stay allowed while capturing (the ABI's rule; CUDA forbids them
//    in global mode): the thread's capture mode is relaxed around them, as PyTorch does for
//    cudaMalloc;
//  - a host function on a capturing stream goes through the SDK's stream callback, which the
//    capture records (the runtime's watcher thread would wait on a captured event);
//  - ending an invalidated capture names the call that invalidated it: the first capture
//    failure through the runtime after which the SDK reports the capture invalidated;
//  - the ABI's handle checks and the device a graph belongs to.
#pragma once

#include <torch_fl/kit/runtime_errors.h>
#include <torch_fl/runtime.h>

#include <map>
#include <mutex>
#include <new>
#include <string>
#include <type_traits>
#include <unordered_set>

// The SDK's graph and, once instantiated, its executable graph.
struct tfl_graph_st {
  void* graph;
  void* exec;
  int device;  // the capturing stream's: launches go to its streams
  std::mutex mu;
};

namespace torch_fl::kit {

// Whether a dialect declares the SDK's stream capture.
template <class Sdk, class = void>
struct has_graphs : std::false_type {};
template <class Sdk>
struct has_graphs<Sdk, std::void_t<decltype(Sdk::kGraphs)>> : std::bool_constant<Sdk::kGraphs> {};

// Without graphs: the fields stay empty and nothing else changes.
template <class Sdk, class Rt, bool = has_graphs<Sdk>::value>
class CudaStyleGraphs {
 public:
  static constexpr uint64_t kCapabilities = 0;
  struct Relaxed {
    Relaxed() {}  // user-provided: a scope object, not an unused variable
  };
  static std::string invalidated_by(const std::string&) { return ""; }
  static void forget_after_fork() {}
  static constexpr std::nullptr_t capture_begin = nullptr;
  static constexpr std::nullptr_t capture_end = nullptr;
  static constexpr std::nullptr_t instantiate = nullptr;
  static constexpr std::nullptr_t launch = nullptr;
  static constexpr std::nullptr_t destroy = nullptr;
  static constexpr std::nullptr_t capture_status = nullptr;
};

#define TFL_KIT_GRAPH_ENTER(device)        \
  typename Rt::DeviceScope _scope(device); \
  if (_scope.status() != Sdk::kSuccess)    \
  return Rt::fail_sdk(Sdk::set_device_name, (device), _scope.status())
#define TFL_KIT_GRAPH_CHECK(device, call, args, ...)                                             \
  do {                                                                                           \
    const typename Sdk::Error _e = Sdk::call args;                                               \
    if (_e != Sdk::kSuccess) return Rt::fail_sdk(Sdk::call##_name, (device), _e, ##__VA_ARGS__); \
  } while (0)

template <class Sdk, class Rt>
class CudaStyleGraphs<Sdk, Rt, true> {
  using Error = typename Sdk::Error;
  using Stream = typename Sdk::Stream;
  using Graph = typename Sdk::Graph;
  using GraphExec = typename Sdk::GraphExec;
  static_assert(std::is_pointer_v<Graph> && std::is_pointer_v<GraphExec>,
                "a CUDA-style SDK's graphs are pointer handles");

 public:
  static constexpr uint64_t kCapabilities = TFL_CAP_GRAPHS;

  // The calling thread's capture mode relaxed for the scope.
  class Relaxed {
   public:
    Relaxed() : ok_(Sdk::exchange_capture_mode(&mode_) == Sdk::kSuccess) {}
    ~Relaxed() {
      if (ok_) (void)Sdk::exchange_capture_mode(&mode_);
    }
    Relaxed(const Relaxed&) = delete;
    Relaxed& operator=(const Relaxed&) = delete;

   private:
    typename Sdk::CaptureMode mode_ = Sdk::kCaptureRelaxed;
    bool ok_;
  };

  // After a call failed with a capture status (`message`): the captures begun here that the SDK
  // now reports invalidated keep it as their reason; the words saying so, for the message.
  static std::string invalidated_by(const std::string& message) {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out;
    for (auto& [stream, capture] : captures_) {
      if (!capture.reason.empty()) continue;
      typename Sdk::CaptureStatus s = Sdk::kCaptureNone;
      if (Sdk::stream_is_capturing(Rt::sdk(stream), &s) != Sdk::kSuccess) {
        Sdk::clear_error();
        continue;
      }
      if (s != Sdk::kCaptureInvalidated) continue;
      capture.reason = message;
      out += "; the graph capture on " + Rt::device_text(capture.device) + " is now invalidated";
    }
    return out;
  }

  // A forked child has none of the parent's captures or graphs (cuda_style_runtime.h's
  // forget_after_fork).
  static void forget_after_fork() {
    new (&mu_) std::mutex();
    new (&captures_) std::map<tfl_stream_st*, Capture>();
    new (&graphs_) std::unordered_set<tfl_graph_st*>();
  }

  static tfl_status capture_begin(tfl_stream stream, int mode) {
    if (mode < TFL_CAPTURE_MODE_GLOBAL || mode > TFL_CAPTURE_MODE_RELAXED) {
      return fail(TFL_ERROR_INVALID_VALUE,
                  "graph_capture_begin: unknown capture mode " + std::to_string(mode));
    }
    // The runtime's default streams are SDK streams the SDK would capture: refused here, as
    // the ABI (and CUDA, for its NULL stream) refuse it.
    if (!stream) {
      return fail(TFL_ERROR_INVALID_VALUE,
                  "graph_capture_begin: the default stream cannot capture; capture on a created "
                  "stream");
    }
    TFL_KIT_GRAPH_ENTER(stream->device);
    TFL_KIT_GRAPH_CHECK(stream->device, begin_capture, (Rt::sdk(stream), sdk_mode(mode)));
    std::lock_guard<std::mutex> lock(mu_);
    captures_[stream] = Capture{stream->device, ""};
    return TFL_OK;
  }

  static tfl_status capture_end(tfl_stream stream, tfl_graph* graph) {
    if (!stream) {
      return fail(TFL_ERROR_INVALID_VALUE, "graph_capture_end: the default stream never captures");
    }
    std::string reason;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = captures_.find(stream);
      if (it != captures_.end()) {
        reason = it->second.reason;
        captures_.erase(it);
      }
    }
    TFL_KIT_GRAPH_ENTER(stream->device);
    Graph g = nullptr;
    // Ends the capture in every case; no graph on failure.
    TFL_KIT_GRAPH_CHECK(stream->device, end_capture, (Rt::sdk(stream), &g),
                        reason.empty() ? "" : "the capture was invalidated by: " + reason);
    if (!graph) {
      (void)Sdk::graph_destroy(g);
      return fail(TFL_ERROR_INVALID_VALUE,
                  "graph_capture_end: graph is NULL; the capture ended, its recording is dropped");
    }
    auto* made = new tfl_graph_st{g, nullptr, stream->device, {}};
    {
      std::lock_guard<std::mutex> lock(mu_);
      graphs_.insert(made);
    }
    *graph = made;
    return TFL_OK;
  }

  static tfl_status instantiate(tfl_graph graph) {
    if (!live(graph)) return unknown("graph_instantiate", graph);
    std::lock_guard<std::mutex> lock(graph->mu);
    if (graph->exec) return TFL_OK;
    TFL_KIT_GRAPH_ENTER(graph->device);
    GraphExec exec = nullptr;
    TFL_KIT_GRAPH_CHECK(graph->device, graph_instantiate,
                        (&exec, static_cast<Graph>(graph->graph), 0ULL));
    graph->exec = exec;
    return TFL_OK;
  }

  static tfl_status launch(tfl_graph graph, tfl_stream stream) {
    if (tfl_status s = instantiate(graph)) return s;
    tfl_stream_st* st = nullptr;
    if (tfl_status s = Rt::resolve(stream, &st)) return s;
    if (st->device != graph->device) {
      return fail(TFL_ERROR_INVALID_HANDLE, std::string(Sdk::kRuntime) +
                                                " runtime: graph_launch of a graph captured on " +
                                                Rt::device_text(graph->device) +
                                                " on a stream of " + Rt::device_text(st->device));
    }
    TFL_KIT_GRAPH_ENTER(st->device);
    TFL_KIT_GRAPH_CHECK(st->device, graph_launch,
                        (static_cast<GraphExec>(graph->exec), Rt::sdk(st)));
    return TFL_OK;
  }

  // Launches already queued keep what they run (CUDA's contract).
  static tfl_status destroy(tfl_graph graph) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (graphs_.erase(graph) == 0) return unknown("graph_destroy", graph);
    }
    const int device = graph->device;
    void* exec = graph->exec;
    void* g = graph->graph;
    delete graph;
    TFL_KIT_GRAPH_ENTER(device);
    const Error ex = exec ? Sdk::graph_exec_destroy(static_cast<GraphExec>(exec)) : Sdk::kSuccess;
    TFL_KIT_GRAPH_CHECK(device, graph_destroy, (static_cast<Graph>(g)));
    if (ex != Sdk::kSuccess) return Rt::fail_sdk(Sdk::graph_exec_destroy_name, device, ex);
    return TFL_OK;
  }

  static tfl_status capture_status(tfl_stream stream, int* status) {
    if (!status) {
      return fail(TFL_ERROR_INVALID_VALUE, "stream_capture_status: NULL out-parameter");
    }
    tfl_stream_st* st = nullptr;
    if (tfl_status s = Rt::resolve(stream, &st)) return s;
    typename Sdk::CaptureStatus s = Sdk::kCaptureNone;
    TFL_KIT_GRAPH_CHECK(st->device, stream_is_capturing, (Rt::sdk(st), &s));
    if (s == Sdk::kCaptureNone) {
      *status = TFL_CAPTURE_NONE;
    } else if (s == Sdk::kCaptureActive) {
      *status = TFL_CAPTURE_ACTIVE;
    } else if (s == Sdk::kCaptureInvalidated) {
      *status = TFL_CAPTURE_INVALIDATED;
    } else {
      return fail(TFL_ERROR_DEVICE, std::string(Sdk::stream_is_capturing_name) + " on " +
                                        Rt::device_text(st->device) + " gave capture status " +
                                        std::to_string(static_cast<int>(s)));
    }
    return TFL_OK;
  }

  // Whether `st` captures (or did until its capture was invalidated).
  static tfl_status capturing(tfl_stream_st* st, bool* yes) {
    typename Sdk::CaptureStatus s = Sdk::kCaptureNone;
    TFL_KIT_GRAPH_CHECK(st->device, stream_is_capturing, (Rt::sdk(st), &s));
    *yes = s != Sdk::kCaptureNone;
    return TFL_OK;
  }

  // A host function on a capturing stream: the SDK's callback, which the capture records.
  static tfl_status capture_host_func(tfl_stream_st* st, tfl_host_fn fn, void* user_data) {
    TFL_KIT_GRAPH_ENTER(st->device);
    TFL_KIT_GRAPH_CHECK(st->device, launch_host_func, (Rt::sdk(st), fn, user_data));
    return TFL_OK;
  }

 private:
  struct Capture {
    int device;
    std::string reason;  // the failure that invalidated it, once known
  };

  static typename Sdk::CaptureMode sdk_mode(int mode) {
    switch (mode) {
      case TFL_CAPTURE_MODE_THREAD_LOCAL:
        return Sdk::kCaptureThreadLocal;
      case TFL_CAPTURE_MODE_RELAXED:
        return Sdk::kCaptureRelaxed;
      default:
        return Sdk::kCaptureGlobal;
    }
  }

  // A destroyed or made-up graph is refused rather than given to the SDK.
  static bool live(tfl_graph g) {
    std::lock_guard<std::mutex> lock(mu_);
    return graphs_.count(g) != 0;
  }
  static tfl_status unknown(const char* fn, tfl_graph g) {
    return fail(TFL_ERROR_INVALID_HANDLE,
                std::string(fn) + ": unknown or destroyed graph " + pointer_text(g));
  }

  static inline std::mutex mu_;
  static inline std::map<tfl_stream_st*, Capture> captures_;  // begun here, not ended yet
  static inline std::unordered_set<tfl_graph_st*> graphs_;
};

#undef TFL_KIT_GRAPH_ENTER
#undef TFL_KIT_GRAPH_CHECK

}  // namespace torch_fl::kit
