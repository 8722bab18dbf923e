// An in-order stream of one emulated device. A worker stream runs its work on its own thread, so
// queued work really completes later (and the host can observe it not done yet); an inline
// stream runs each item as it is pushed, a valid schedule of an in-order stream that keeps an
// emulator deterministic. Either way a work item whose memory was freed before it ran is skipped
// and fails, and the first failure is the stream's asynchronous error until a drain surfaces it.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "emu_kit/memory.h"

namespace emu_kit {

struct WorkItem {
  std::string name;  // labels its failure
  // 0 or a failure status; on failure it may write a NUL-terminated message into msg.
  std::function<int(char* msg, size_t len)> run;
  std::function<void()> cleanup;  // after it ran or was skipped
  std::vector<AllocRef> allocs;   // the memory it reads or writes, pinned while queued
};

// What an SDK calls the failure of work that outlived its memory.
struct FreedWork {
  int status;               // e.g. ACL_ERROR_RT_AICORE_EXCEPTION
  const char* device_free;  // the SDK's functions that freed it, for the message
  const char* host_free;
};

class Stream {
 public:
  enum class Mode { worker, inline_ };

  Stream(int device, bool is_default, Mode mode, FreedWork freed);
  virtual ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int device() const { return device_; }
  bool is_default() const { return is_default_; }

  // Queues the item (pinning its allocations); an inline stream runs it before returning.
  void push(WorkItem item);
  // Waits for everything pushed so far; returns (and clears) the asynchronous error, its
  // message in *msg.
  int drain(std::string* msg);
  bool idle();
  // The asynchronous error not yet surfaced (0: none), without clearing it.
  int pending_error(std::string* msg);
  // Stops the worker after the queued work (a destroyed stream).
  void shutdown();

 private:
  void loop();
  void run(WorkItem& item);

  const int device_;
  const bool is_default_;
  const Mode mode_;
  const FreedWork freed_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<WorkItem> queue_;
  uint64_t enqueued_ = 0, done_ = 0;
  int error_ = 0;
  std::string error_msg_;
  bool stop_ = false;
  std::thread worker_;
};
using StreamRef = std::shared_ptr<Stream>;

}  // namespace emu_kit
