// The c10d backend of the `vendor` tier (docs/distributed.md): every
// operation of a flagos process group through the vendor's collective
// library (include/torch_fl/collective.h), on flagos memory, no host copies.
//
// As ProcessGroupNCCL does: the communicator is created on the first
// operation (its id made by rank 0 and sent through the group's store),
// operations run on the communicator's own stream ordered after the caller's
// current stream, their tensors are recorded on that stream for the caching
// allocator, and a Work completes on an event of that stream.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/communicator.h"

namespace torch_fl::distributed {

class VendorBackend : public c10d::Backend {
 public:
  VendorBackend(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                std::chrono::milliseconds timeout, const std::string& library_path,
                std::string vendor);
  ~VendorBackend() override;

  const std::string getBackendName() const override { return "flagos-vendor"; }
  void eagerConnectSingleDevice(at::Device device) override;
  // dist._coalescing_manager(device=...): the operations issued in between are enqueued as
  // they come (in order, on the communicator's stream), and endCoalescing's work completes
  // after all of them.
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void abort() override;
  void shutdown() override;

  // Operations this backend issued through the library (for tests and
  // FLAGOS_LOG=dist): each is one library call, never a host copy.
  uint64_t library_calls() const { return library_calls_.load(); }

 private:
  using Body = std::function<void(Communicator&)>;
  // Runs `body` on the communicator's stream, ordered after the current
  // stream of the tensors' device, inside a library group when `grouped`.
  c10::intrusive_ptr<c10d::Work> run(const char* op, c10d::OpType type,
                                     const std::vector<at::Tensor>& tensors,
                                     std::vector<at::Tensor> outputs, bool grouped,
                                     const Body& body);
  // all_reduce of each tensor in place (in one library group when `grouped`).
  c10::intrusive_ptr<c10d::Work> all_reduce_each(const char* name, c10d::OpType type,
                                                 std::vector<at::Tensor>& tensors, int op,
                                                 bool grouped);
  Communicator& communicator(c10::DeviceIndex device);
  // Every rank announces itself in the store before the library's init, which blocks until all
  // ranks joined (NCCL-style ones with no timeout of their own): a rank that never arrives is a
  // DistBackendError naming it within the group's timeout, never a hang.
  void join_or_throw(c10::DeviceIndex device);
  c10::DeviceIndex device_of(const char* op, const std::vector<at::Tensor>& tensors) const;
  void call(Communicator& comm, tfl_status status, const char* name);
  // A reduction's library call. Where the library lacks it (TFL_ERROR_NOT_SUPPORTED): AVG is
  // the sum, then `result` divided by the group size; a type it cannot reduce is `input`
  // all-gathered and reduced on the device, `result` the elements from `keep_from` of that
  // (where this rank `holds_result`).
  void reduce_call(Communicator& comm, int op, const char* name,
                   const std::function<tfl_status(int)>& issue, const at::Tensor& result,
                   bool holds_result, const at::Tensor& input, int64_t keep_from = 0);

  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
  const CollectiveLibrary& library_;
  std::string vendor_;
  std::mutex mutex_;
  std::shared_ptr<Communicator> comm_;
  std::atomic<uint64_t> library_calls_{0};
  bool coalescing_ = false;  // guarded by mutex_
  std::vector<at::Tensor> coalesced_;
};

}  // namespace torch_fl::distributed
