// launch_host_func for an SDK without stream callbacks: a marker on the stream
// (an event recorded there) and one thread that waits for each marker in turn
// and then runs the function. Functions of all streams run one at a time, in
// the order they were launched, as with CUDA's callback thread.
#pragma once

#include <torch_fl/runtime.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace torch_fl::kit {

class HostFunctionThread {
 public:
  // Queues fn(user_data) to run once `reached()` returned (it blocks until the
  // stream got there, then releases the marker).
  void launch(std::function<void()> reached, tfl_host_fn fn, void* user_data) {
    std::call_once(started_, [this] { std::thread([this] { run(); }).detach(); });
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(Work{std::move(reached), fn, user_data});
    }
    cv_.notify_one();
  }

 private:
  struct Work {
    std::function<void()> reached;
    tfl_host_fn fn;
    void* user_data;
  };

  // The thread is never joined: it outlives static destructors (leaked with
  // its queue), so a host function still pending at exit cannot hang it.
  void run() {
    for (;;) {
      Work w;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] { return !queue_.empty(); });
        w = std::move(queue_.front());
        queue_.pop_front();
      }
      w.reached();
      w.fn(w.user_data);
    }
  }

  std::once_flag started_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Work> queue_;
};

}  // namespace torch_fl::kit
