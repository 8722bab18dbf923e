#include "glue/device_graph.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "glue/caching_allocator.h"
#include "glue/runtime_access.h"
#include "glue/stream_pool.h"

namespace torch_fl {

bool runtime_records_graphs() {
  if (!runtime_active() || !has_capability(TFL_CAP_GRAPHS)) return false;
  const tfl_runtime_v1& rt = runtime();
  return TFL_RUNTIME_HAS(&rt, graph_capture_begin) && TFL_RUNTIME_HAS(&rt, graph_capture_end) &&
         TFL_RUNTIME_HAS(&rt, graph_instantiate) && TFL_RUNTIME_HAS(&rt, graph_launch) &&
         TFL_RUNTIME_HAS(&rt, graph_destroy) && TFL_RUNTIME_HAS(&rt, stream_capture_status);
}

struct DeviceGraph::HostWork {
  std::function<void()> work;
  std::shared_ptr<Failure> failure;

  // Runs on the stream's worker: an exception has no caller there, so the
  // first one is kept for the graph's next replay or reset to raise.
  static void run(void* self) {
    auto* w = static_cast<HostWork*>(self);
    try {
      w->work();
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(w->failure->mutex);
      if (!w->failure->error) w->failure->error = std::current_exception();
      std::fprintf(stderr, "[flagos graph] a replayed host kernel failed: %s\n", e.what());
    }
  }
};

DeviceGraph::DeviceGraph() {
  TORCH_CHECK(runtime_records_graphs(), "flagos: runtime ", runtime_name(),
              " has no device-graph seat (runtime ABI v1.3 graph_* functions and "
              "TFL_CAP_GRAPHS)");
}

DeviceGraph::~DeviceGraph() {
  try {
    reset();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[flagos graph] reset at destruction failed: %s\n", e.what());
  }
}

void DeviceGraph::capture_begin(uint64_t pool, int mode) {
  TORCH_CHECK(!capturing_, "flagos graph: capture_begin while this graph already captures");
  TORCH_CHECK(graph_ == nullptr,
              "flagos graph: this graph holds a capture already; reset() it before capturing "
              "again");
  TORCH_CHECK(capturing_device() < 0, "flagos graph: this thread is capturing another graph");
  const c10::DeviceIndex device = current_device();
  const c10::Stream stream = current_stream(device);
  TORCH_CHECK(stream != default_stream(device), "flagos graph: capture on flagos:", int(device),
              " needs a non-default stream (use `with torch.flagos.graph(g):`, which captures on "
              "a side stream)");
  if (pool_ != 0) {  // a failed capture's pool, held until now
    release_graph_pool(device_, pool_);
    pool_ = 0;
  }
  const uint64_t id = pool != 0 ? pool : new_graph_pool_id();
  begin_graph_pool(device, stream.id(), id);
  const tfl_status st = runtime().graph_capture_begin(native_stream(stream), mode);
  if (st != TFL_OK) {
    end_graph_pool(device, stream.id());
    release_graph_pool(device, id);
    throw_runtime_error(st, "graph_capture_begin", device);
  }
  device_ = device;
  stream_ = stream;
  pool_ = id;
  capturing_ = true;
  add_capture_sink(this);
}

void DeviceGraph::end_capture_state() {
  capturing_ = false;
  remove_capture_sink(this);
  end_graph_pool(device_, stream_->id());
}

void DeviceGraph::capture_end() {
  TORCH_CHECK(capturing_, "flagos graph: capture_end without capture_begin");
  TORCH_CHECK(capture_sink() == this,
              "flagos graph: capture_end needs the capturing stream current (flagos:", int(device_),
              ", stream ", stream_->id(), ")");
  tfl_graph graph = nullptr;
  tfl_status st;
  {
    CurrentDeviceScope scope(device_);
    st = runtime().graph_capture_end(native_stream(*stream_), &graph);
  }
  end_capture_state();
  if (st != TFL_OK) {
    // The pool stays held until reset(), as after a successful capture: the
    // failed capture's tensors may still be alive and be freed later.
    throw_runtime_error(st, "graph_capture_end", device_);
  }
  graph_ = graph;
}

void DeviceGraph::instantiate() {
  TORCH_CHECK(graph_ != nullptr, "flagos graph: instantiate before a successful capture");
  if (instantiated_) return;
  TFL_CALL(device_, graph_instantiate, graph_);
  instantiated_ = true;
}

void DeviceGraph::check_host_failure() {
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(failure_->mutex);
    std::swap(error, failure_->error);
  }
  if (error) std::rethrow_exception(error);
}

void DeviceGraph::replay() {
  TORCH_CHECK(graph_ != nullptr, "flagos graph: replay before a successful capture");
  check_host_failure();
  instantiate();
  CurrentDeviceScope scope(device_);
  for (const auto& fn : before_launch_) fn();
  const c10::Stream stream = current_stream(device_);
  TFL_CALL(device_, graph_launch, graph_, native_stream(stream));
  if (std::find(launched_.begin(), launched_.end(), stream) == launched_.end()) {
    launched_.push_back(stream);
  }
}

void DeviceGraph::reset() {
  if (capturing_) {
    // Abandoned mid-capture (an exception in the captured block): end it so
    // the stream runs work again; the recording is dropped.
    tfl_graph graph = nullptr;
    {
      CurrentDeviceScope scope(device_);
      if (runtime().graph_capture_end(native_stream(*stream_), &graph) == TFL_OK && graph) {
        runtime().graph_destroy(graph);
      }
    }
    end_capture_state();
  }
  if (!launched_.empty()) {
    // Host work of queued launches (on every stream it was launched on)
    // points at this graph's tensors: let them finish before they can go.
    CurrentDeviceScope scope(device_);
    for (const c10::Stream& s : launched_) {
      TFL_CALL(device_, stream_synchronize, native_stream(s));
    }
    launched_.clear();
  }
  if (graph_ != nullptr) {
    const tfl_graph graph = graph_;
    graph_ = nullptr;
    TFL_CALL(device_, graph_destroy, graph);
  }
  host_work_.clear();
  before_launch_.clear();
  rng_draws_.reset();
  instantiated_ = false;
  if (pool_ != 0) {
    release_graph_pool(device_, pool_);
    pool_ = 0;
  }
  check_host_failure();
}

void DeviceGraph::record(std::function<void()> work, std::function<void()> before_launch) {
  // Several threads may record (autograd's device thread beside the caller).
  std::lock_guard<std::mutex> lock(record_mutex_);
  TORCH_INTERNAL_ASSERT(capturing_);
  auto host = std::make_shared<HostWork>(HostWork{std::move(work), failure_});
  TFL_CALL(device_, launch_host_func, native_stream(*stream_), &HostWork::run, host.get());
  host_work_.push_back(std::move(host));
  if (before_launch) before_launch_.push_back(std::move(before_launch));
}

void DeviceGraph::before_each_launch(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(record_mutex_);
  TORCH_INTERNAL_ASSERT(capturing_);
  before_launch_.push_back(std::move(fn));
}

}  // namespace torch_fl
