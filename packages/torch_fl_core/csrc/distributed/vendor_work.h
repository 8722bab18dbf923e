// The Work of one operation of the vendor backend: done when the end event
// recorded after it on the communicator's stream has completed, failed when
// the library reported an asynchronous failure by then.
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/Event.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <memory>
#include <string>
#include <vector>

#include "distributed/communicator.h"

namespace torch_fl::distributed {

class VendorWork : public c10d::Work {
 public:
  // `end` was recorded on the communicator's stream after the operation;
  // `future` is already completed with `outputs` (its events on that stream).
  VendorWork(std::shared_ptr<Communicator> comm, int rank, c10d::OpType type, const char* op,
             std::vector<at::Tensor> outputs, c10::Event end,
             c10::intrusive_ptr<c10::ivalue::Future> future);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override { return outputs_; }
  // Blocks the host until the operation finished (or failed, or the group's
  // timeout passed: then the communicator is aborted) and raises its failure.
  void synchronize() override;
  // Orders the caller's current stream after the operation; with blocking
  // wait (TORCH_NCCL_BLOCKING_WAIT=1) synchronizes first, within `timeout`.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void blockCurrentStream() override;
  void abort() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  void host_wait(std::chrono::milliseconds timeout);
  void fail(const std::string& message);

  std::shared_ptr<Communicator> comm_;
  const char* op_;
  std::vector<at::Tensor> outputs_;
  c10::Event end_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace torch_fl::distributed
