// One rank of a vendor-library communicator, as a flagos process group uses
// it: the library's tfl_comm on one device, the stream its operations run on
// (ordered after the caller's current stream, as ProcessGroupNCCL's are), and
// the checks that turn a library status into a DistBackendError naming the
// rank, device, vendor and library.
#pragma once

#include <c10/core/Stream.h>
#include <torch_fl/collective.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "distributed/collective_library.h"

namespace torch_fl::distributed {

class Communicator {
 public:
  // Joins the communicator named by `id` (every rank calls this); throws
  // naming the ranks that never joined when the library times out.
  Communicator(const CollectiveLibrary& library, const tfl_comm_id& id, int rank, int size,
               c10::DeviceIndex device, std::chrono::milliseconds timeout, std::string vendor);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  const tfl_collective_v1& table() const { return library_.table(); }
  tfl_comm handle() const { return comm_; }
  c10::DeviceIndex device() const { return device_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // The stream every operation of this communicator is enqueued on.
  const c10::Stream& stream() const { return stream_; }
  tfl_stream native() const { return native_; }
  // "rank 0/2 on flagos:0 (vendor 'sim', library sim)".
  const std::string& where() const { return where_; }
  // What an error of operation `op` starts with, as the flagos group words its own:
  // "flagos all_reduce on flagos:0 (vendor 'sim', tier vendor, library sim, rank 0/2)".
  std::string where(const char* op) const;

  // Throws a DistBackendError for a failed `call` (TIMEOUT and ABORTED keep
  // their names in the message); no-op for TFL_OK.
  void check(tfl_status status, const char* call) const;
  // Throws when the library reported an asynchronous failure; never blocks.
  void check_async() const;
  // The asynchronous failure's message, or "" while there is none.
  std::string async_error() const;

  // Ends every wait of the communicator now (comm_abort); idempotent.
  void abort();
  bool aborted() const { return aborted_.load(); }

  // Starts the thread that, as ProcessGroupNCCL's watchdog does, takes the
  // process down once the library reports an asynchronous failure (unless
  // blocking wait or TORCH_NCCL_ASYNC_ERROR_HANDLING=0 asked otherwise), and
  // aborts the communicator when a library call stalls (InLibrary).
  void start_watchdog();

  // A library call in flight for operation `op`. A library whose operations
  // run at submission (the TopsRider emulator's ECCL) or otherwise block
  // returns only once every rank arrived: the watchdog aborts the
  // communicator when a call has been in flight longer than the timeout, so a
  // dead peer is an error within the timeout there too, never a hang.
  class InLibrary {
   public:
    InLibrary(Communicator& comm, const char* op);
    ~InLibrary();
    InLibrary(const InLibrary&) = delete;
    InLibrary& operator=(const InLibrary&) = delete;

   private:
    Communicator& comm_;
  };

 private:
  void watch();
  // Aborts the communicator once a call has been in flight too long (watch_mutex_ held).
  void abort_stalled_call(std::unique_lock<std::mutex>& lock);

  const CollectiveLibrary& library_;
  tfl_comm comm_ = nullptr;
  int rank_;
  int size_;
  c10::DeviceIndex device_;
  std::chrono::milliseconds timeout_;
  c10::Stream stream_;
  tfl_stream native_ = nullptr;
  std::string where_;
  std::string vendor_;
  std::atomic<bool> aborted_{false};
  bool teardown_ = false;  // the watchdog takes the process down on an asynchronous failure
  std::atomic<int> in_library_{0};
  std::atomic<int64_t> in_library_since_ns_{0};
  std::atomic<const char*> in_library_op_{nullptr};
  mutable std::mutex stall_mutex_;
  std::string stall_;  // why the watchdog aborted (guarded by stall_mutex_)
  std::mutex watch_mutex_;
  std::condition_variable watch_cv_;
  bool stopping_ = false;
  std::thread watchdog_;
};

// TORCH_NCCL_BLOCKING_WAIT (or NCCL_BLOCKING_WAIT): Work.wait() blocks the
// host until the operation finished and raises its failure, within the
// group's timeout, instead of only ordering the current stream.
bool blocking_wait_requested();

}  // namespace torch_fl::distributed
