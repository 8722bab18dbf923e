// A device graph through the runtime's graph seat (runtime.h v1.3): capture
// the work a flagos stream is given, replay it with one launch. The memory a
// capture allocates comes from a private pool (caching_allocator.h) that the
// graph holds until reset, since every replay writes there again.
//
// Host kernels on host-addressable memory cannot be enqueued as kernels; the
// capture records them as host work (graph_capture.h) that the capturing
// stream runs at each replay, so a runtime's recording of its stream holds
// them in order with its copies and SDK kernels.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>
#include <torch_fl/runtime.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "glue/graph_capture.h"

namespace torch_fl {

// Whether the active runtime declares and fills the graph seat.
bool runtime_records_graphs();

class DeviceGraph final : public CaptureSink {
 public:
  DeviceGraph();
  ~DeviceGraph() override;
  DeviceGraph(const DeviceGraph&) = delete;
  DeviceGraph& operator=(const DeviceGraph&) = delete;

  // On the calling thread's current device and stream (not the default one).
  // pool: 0 for a new private pool, else a pool id another graph or
  // new_graph_pool_id() gave. mode: tfl_capture_mode.
  void capture_begin(uint64_t pool, int mode);
  void capture_end();
  void instantiate();
  // On the current stream of the graph's device.
  void replay();
  void reset();
  uint64_t pool() const { return pool_; }
  bool capturing() const { return capturing_; }

  c10::Stream stream() const override { return *stream_; }
  void record(std::function<void()> work, std::function<void()> before_launch) override;
  void before_each_launch(std::function<void()> fn) override;
  std::shared_ptr<void>& rng_draws() override { return rng_draws_; }

 private:
  struct HostWork;
  void check_host_failure();
  void end_capture_state();

  c10::DeviceIndex device_ = -1;
  std::optional<c10::Stream> stream_;  // the capture stream
  std::vector<c10::Stream> launched_;  // streams with launches not yet waited for
  tfl_graph graph_ = nullptr;
  uint64_t pool_ = 0;
  bool capturing_ = false;
  bool instantiated_ = false;
  // Host work outlives queued launches (shared with the runtime's recording
  // through user_data) and reports a failure at the next replay or reset.
  std::vector<std::shared_ptr<HostWork>> host_work_;
  std::vector<std::function<void()>> before_launch_;
  std::shared_ptr<void> rng_draws_;
  std::mutex record_mutex_;
  struct Failure {
    std::mutex mutex;
    std::exception_ptr error;
  };
  std::shared_ptr<Failure> failure_ = std::make_shared<Failure>();
};

}  // namespace torch_fl
