// Events: markers on a stream; each record starts a new generation and the
// event is complete once its latest generation's marker has run (CUDA).
#pragma once

#include <torch_fl/runtime.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

namespace torch_fl::sim {

class Event {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Event(uint32_t flags) : flags_(flags) {}

  bool timing_enabled() const noexcept { return (flags_ & TFL_EVENT_DISABLE_TIMING) == 0; }

  // Starts a new record and returns its generation (1, 2, ...). It is no
  // longer the record of a capture.
  uint64_t begin_record();
  // v1.3: the latest record was made by the graph capture `id` (sim_graph),
  // which recorded it without starting a generation; 0: by no capture.
  void set_capture(uint64_t id);
  uint64_t capture();
  // The marker of `generation` ran (on its stream's worker) at `when`.
  void mark_reached(uint64_t generation, Clock::time_point when);
  // Generation of the latest record; 0 when never recorded.
  uint64_t latest_record();
  bool reached(uint64_t generation);
  void wait(uint64_t generation);

  struct State {
    uint64_t recorded;
    uint64_t reached;
    Clock::time_point time;  // when the latest reached marker ran
  };
  State state();

 private:
  const uint32_t flags_;
  std::mutex mutex_;
  std::condition_variable cv_;
  uint64_t recorded_ = 0;
  uint64_t reached_ = 0;
  uint64_t capture_ = 0;
  Clock::time_point time_{};
};

using EventPtr = std::shared_ptr<Event>;

// A live event handle, or INVALID_HANDLE with a message naming `fn`.
tfl_status resolve_event(const char* fn, tfl_event handle, EventPtr* out);

tfl_status sim_event_create(tfl_event* event, uint32_t flags);
tfl_status sim_event_destroy(tfl_event event);
tfl_status sim_event_record(tfl_event event, tfl_stream stream);
tfl_status sim_event_synchronize(tfl_event event);
tfl_status sim_event_query(tfl_event event);
tfl_status sim_event_elapsed_ms(float* ms, tfl_event start, tfl_event end);

}  // namespace torch_fl::sim
