// Streams: one worker thread and FIFO queue each, so work really runs
// asynchronously and in order, like a hardware queue.
#pragma once

#include <torch_fl/runtime.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace torch_fl::sim {

class Stream {
 public:
  Stream(int device, int priority);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int device() const noexcept { return device_; }
  int priority() const noexcept { return priority_; }
  tfl_stream handle() noexcept { return reinterpret_cast<tfl_stream>(this); }

  // Queues `task` after everything queued before; returns its ticket.
  uint64_t enqueue(std::function<void()> task);
  // Blocks until the task with `ticket` (and all before it) has finished.
  void wait(uint64_t ticket);
  // Blocks until everything queued so far has finished.
  void synchronize();
  // Nothing queued or running.
  bool idle();
  // Runs the queue dry, then stops and joins the worker.
  void shutdown();

  // v1.3: a graph capture records this stream's work instead (sim_graph owns
  // the capture; the flag is what every enqueue reads, so it is one load).
  bool capturing() const noexcept { return capturing_.load(std::memory_order_acquire); }
  void set_capturing(bool on) noexcept { capturing_.store(on, std::memory_order_release); }

 private:
  void run();

  const int device_;
  const int priority_;
  std::mutex mutex_;
  std::condition_variable work_cv_;  // worker: a task arrived or shutdown
  std::condition_variable done_cv_;  // waiters: a task finished
  std::deque<std::function<void()>> queue_;
  // Written under mutex_; atomics so synchronize()/idle() of an idle stream
  // (the common case: every host kernel checks first) skip the lock.
  std::atomic<uint64_t> submitted_{0};
  std::atomic<uint64_t> completed_{0};
  bool stopping_ = false;
  std::atomic<bool> capturing_{false};
  std::thread worker_;
};

using StreamPtr = std::shared_ptr<Stream>;

// A live stream handle (NULL: the current device's default stream, created on
// first use); INVALID_HANDLE with a message naming `fn` otherwise.
tfl_status resolve_stream(const char* fn, tfl_stream handle, StreamPtr* out);
// resolve_stream, plus the stream must belong to `device` (the current device
// of copies and memsets, which only act on their own device's queue).
tfl_status resolve_stream_on(const char* fn, tfl_stream handle, int device, StreamPtr* out);
// Waits for every stream of `device`, its default stream included.
void synchronize_device_streams(int device);

tfl_status sim_stream_create(tfl_stream* stream, int priority);
tfl_status sim_stream_destroy(tfl_stream stream);
tfl_status sim_stream_synchronize(tfl_stream stream);
tfl_status sim_stream_query(tfl_stream stream);
tfl_status sim_stream_wait_event(tfl_stream stream, tfl_event event);
tfl_status sim_launch_host_func(tfl_stream stream, tfl_host_fn fn, void* user_data);
// v1.2: a sim stream's native handle is its Stream object.
tfl_status sim_native_stream(tfl_stream stream, int device, void** out);

}  // namespace torch_fl::sim
