#include "distributed/vendor_work.h"

#include <c10/util/Exception.h>

#include <thread>

#include "glue/stream_pool.h"

namespace torch_fl::distributed {

VendorWork::VendorWork(std::shared_ptr<Communicator> comm, int rank, c10d::OpType type,
                       const char* op, std::vector<at::Tensor> outputs, c10::Event end,
                       c10::intrusive_ptr<c10::ivalue::Future> future)
    : c10d::Work(rank, type, op),
      comm_(std::move(comm)),
      op_(op),
      outputs_(std::move(outputs)),
      end_(std::move(end)),
      future_(std::move(future)) {}

void VendorWork::fail(const std::string& message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!exception_) {
    exception_ = std::make_exception_ptr(
        c10::DistBackendError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, message));
  }
  completed_ = true;
}

bool VendorWork::isCompleted() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_) return true;
  }
  const std::string error = comm_->async_error();
  if (!error.empty()) {
    fail(comm_->where(op_) + ": " + error);
    return true;
  }
  if (!end_.query()) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  completed_ = true;
  return true;
}

bool VendorWork::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr VendorWork::exception() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return exception_;
}

void VendorWork::host_wait(std::chrono::milliseconds timeout) {
  const auto limit = timeout == kNoTimeout ? comm_->timeout() : timeout;
  const auto start = std::chrono::steady_clock::now();
  auto pause = std::chrono::microseconds(20);
  while (!isCompleted()) {
    if (limit.count() > 0 && std::chrono::steady_clock::now() - start > limit) {
      comm_->abort();  // its peers' waits end too: never a hang
      fail(comm_->where(op_) + ": timed out after " + std::to_string(limit.count()) +
           " ms (the group's timeout); the communicator is "
           "aborted");
      break;
    }
    std::this_thread::sleep_for(pause);
    if (pause < std::chrono::milliseconds(2)) pause *= 2;
  }
  // The end event completes even when the operation failed in the library.
  const std::string error = comm_->async_error();
  if (!error.empty()) fail(comm_->where(op_) + ": " + error);
  std::lock_guard<std::mutex> lock(mutex_);
  if (exception_) std::rethrow_exception(exception_);
}

void VendorWork::synchronize() { host_wait(kNoTimeout); }

void VendorWork::blockCurrentStream() { end_.block(current_stream(comm_->device())); }

bool VendorWork::wait(std::chrono::milliseconds timeout) {
  if (blocking_wait_requested()) {
    host_wait(timeout);
  } else {
    // Ask the library without blocking: a failure known by now is raised.
    const std::string error = comm_->async_error();
    if (!error.empty()) {
      fail(comm_->where(op_) + ": " + error);
      std::lock_guard<std::mutex> lock(mutex_);
      std::rethrow_exception(exception_);
    }
  }
  blockCurrentStream();
  return true;
}

void VendorWork::abort() { comm_->abort(); }

}  // namespace torch_fl::distributed
