#include "distributed/vendor_backend.h"

#include <ATen/ATen.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <cstring>

#include "distributed/vendor_work.h"
#include "glue/runtime_access.h"
#include "glue/stream_pool.h"

namespace torch_fl::distributed {
namespace {

constexpr c10::DeviceType kFlagos = c10::DeviceType::PrivateUse1;

// One tensor as the library sees it: a base pointer, an element count and a
// tfl_dtype (complex as pairs of its real type, as ProcessGroupNCCL does).
struct Flat {
  void* ptr;
  size_t count;
  int dtype;
};

int tfl_dtype_of(at::ScalarType type) {
  switch (type) {
    case at::kHalf:
      return TFL_DTYPE_F16;
    case at::kBFloat16:
      return TFL_DTYPE_BF16;
    case at::kFloat:
      return TFL_DTYPE_F32;
    case at::kDouble:
      return TFL_DTYPE_F64;
    case at::kChar:
      return TFL_DTYPE_I8;
    case at::kByte:
      return TFL_DTYPE_U8;
    case at::kInt:
      return TFL_DTYPE_I32;
    case at::kLong:
      return TFL_DTYPE_I64;
    case at::kBool:
      return TFL_DTYPE_BOOL;
    default:
      return -1;
  }
}

int tfl_reduce_of(const c10d::ReduceOp& op, const char* name) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return TFL_REDUCE_SUM;
    case c10d::ReduceOp::PRODUCT:
      return TFL_REDUCE_PROD;
    case c10d::ReduceOp::MIN:
      return TFL_REDUCE_MIN;
    case c10d::ReduceOp::MAX:
      return TFL_REDUCE_MAX;
    case c10d::ReduceOp::AVG:
      return TFL_REDUCE_AVG;
    default:
      break;
  }
  const char* names[] = {"SUM",  "AVG", "PRODUCT", "MIN",       "MAX",
                         "BAND", "BOR", "BXOR",    "PREMUL_SUM"};
  const auto index = static_cast<size_t>(op.op_);
  TORCH_CHECK_VALUE(false, "flagos ", name, ": the vendor collective library has no reduction ",
                    index < sizeof(names) / sizeof(names[0]) ? names[index] : "UNUSED",
                    " (it has SUM, PRODUCT, MIN, MAX and AVG; BAND, BOR, BXOR and PREMUL_SUM "
                    "are refused as ProcessGroupNCCL refuses the bitwise ones)");
}

// `reduce`: the tfl_reduce_op applied to the tensor, or -1 for none.
Flat flat(const at::Tensor& t, const char* op, int reduce = -1, bool contiguous = false) {
  TORCH_CHECK_VALUE(t.layout() == c10::kStrided, "flagos ", op, ": ", t.layout(),
                    " tensors are not supported by the vendor collective library");
  TORCH_CHECK_VALUE(contiguous ? t.is_contiguous() : t.is_non_overlapping_and_dense(), "flagos ",
                    op, ": tensors must be ", contiguous ? "contiguous" : "dense", " (got sizes ",
                    t.sizes(), ", strides ", t.strides(), ")");
  at::ScalarType type = t.scalar_type();
  size_t count = static_cast<size_t>(t.numel());
  if (at::isComplexType(type)) {
    TORCH_CHECK_VALUE(reduce < 0 || reduce == TFL_REDUCE_SUM || reduce == TFL_REDUCE_AVG, "flagos ",
                      op, ": ", type, " tensors can only be summed or averaged (as on NCCL)");
    type = c10::toRealValueType(type);
    count *= 2;
  }
  const int dtype = tfl_dtype_of(type);
  TORCH_CHECK_VALUE(dtype >= 0, "flagos ", op, ": the vendor collective library has no ",
                    t.scalar_type(), " type");
  return {t.data_ptr(), count, dtype};
}

std::vector<at::Tensor> flatten(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<at::Tensor> all;
  for (const auto& list : lists) all.insert(all.end(), list.begin(), list.end());
  return all;
}

std::vector<at::Tensor> concat(std::vector<at::Tensor> a, const std::vector<at::Tensor>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Work that must wait until one run()'s operations were issued (after group_end in a library
// group): AVG's division where the library has no AVG, the local reduction where it cannot
// reduce a type. Each goes on the communicator's stream behind the operations.
struct Deferred {
  bool grouped = false;
  std::vector<std::function<void()>> after;
};
thread_local Deferred* t_deferred = nullptr;

void after_issue(std::function<void()> work) {
  if (t_deferred != nullptr && t_deferred->grouped) {
    t_deferred->after.push_back(std::move(work));
  } else {
    work();
  }
}

// The rows of `gathered` (one per rank, in rank order) reduced with `op`, in `type`.
at::Tensor reduce_rows(const at::Tensor& gathered, int op, int64_t ranks) {
  const at::ScalarType type = gathered.scalar_type();
  switch (op) {
    case TFL_REDUCE_SUM:
      return at::sum(gathered, {0}, false, type);
    case TFL_REDUCE_AVG:
      return at::sum(gathered, {0}, false, type).div_(ranks);
    case TFL_REDUCE_PROD:
      return at::prod(gathered, 0, false, type);
    case TFL_REDUCE_MIN:
      return at::amin(gathered, {0});
    default:
      return at::amax(gathered, {0});
  }
}

char* byte_at(void* base, int64_t elements, const at::Tensor& t) {
  return static_cast<char*>(base) + elements * static_cast<int64_t>(t.element_size());
}

}  // namespace

VendorBackend::VendorBackend(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                             std::chrono::milliseconds timeout, const std::string& library_path,
                             std::string vendor)
    : c10d::Backend(rank, size),
      store_(std::move(store)),
      timeout_(timeout),
      library_(CollectiveLibrary::load(library_path)),
      vendor_(std::move(vendor)) {
  library_.attach(runtime());
}

VendorBackend::~VendorBackend() = default;

void VendorBackend::call(Communicator& comm, tfl_status status, const char* name) {
  comm.check(status, name);
  library_calls_.fetch_add(1, std::memory_order_relaxed);
}

void VendorBackend::reduce_call(Communicator& comm, int op, const char* name,
                                const std::function<tfl_status(int)>& issue,
                                const at::Tensor& result, bool holds_result,
                                const at::Tensor& input, int64_t keep_from) {
  tfl_status status = issue(op);
  const auto type = result.scalar_type();
  if (status == TFL_ERROR_NOT_SUPPORTED && op == TFL_REDUCE_AVG &&
      (at::isFloatingType(type) || at::isComplexType(type))) {
    // The library has no AVG (HCCL): the sum, then divided by the group size on the
    // communicator's stream, after the operation was issued.
    status = issue(TFL_REDUCE_SUM);
    if (status != TFL_ERROR_NOT_SUPPORTED) {
      call(comm, status, name);
      if (holds_result) {
        at::Tensor r = result;
        const int64_t ranks = size_;
        after_issue([r, ranks]() mutable { r.div_(ranks); });
      }
      return;
    }
  }
  if (status != TFL_ERROR_NOT_SUPPORTED || !input.defined()) {
    call(comm, status, name);
    return;
  }
  // The library cannot reduce this type (ECCL's 64-bit types): every rank's input all-gathered
  // as bytes, then reduced here in rank order, on the communicator's stream. No host copy.
  const at::Tensor source = input.is_contiguous() ? input : input.contiguous();
  const int64_t n = source.numel();
  at::Tensor gathered = at::empty({size_, n}, source.options());
  call(comm,
       comm.table().all_gather(source.data_ptr(), gathered.data_ptr(),
                               static_cast<size_t>(n) * source.element_size(), TFL_DTYPE_U8,
                               comm.handle(), comm.native()),
       "all_gather");
  if (!holds_result) return;
  at::Tensor r = result;
  const int64_t ranks = size_;
  after_issue([r, gathered, op, ranks, keep_from]() mutable {
    const at::Tensor whole = reduce_rows(gathered, op, ranks);
    r.copy_(whole.narrow(0, keep_from, r.numel()).view(r.sizes()));
  });
}

Communicator& VendorBackend::communicator(c10::DeviceIndex device) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (comm_) {
    TORCH_CHECK_VALUE(comm_->device() == device, "flagos vendor collective ", comm_->where(),
                      ": this group's communicator is on flagos:", comm_->device(),
                      ", and an operation named flagos:", device,
                      "; a group uses one device per process, as with NCCL (create the group "
                      "after torch.flagos.set_device, or pass device_id)");
    return *comm_;
  }
  tfl_comm_id id{};
  const std::string key = "flagos_vendor_comm_id";
  if (rank_ == 0) {
    const tfl_status st = library_.table().unique_id(&id);
    if (st != TFL_OK) {
      C10_THROW_ERROR(DistBackendError, "flagos vendor collective rank 0 (vendor '" + vendor_ +
                                            "'): " + library_.describe(st, "unique_id"));
    }
    store_->set(key, std::vector<uint8_t>(id.bytes, id.bytes + TFL_COMM_ID_SIZE));
  } else {
    const std::vector<uint8_t> bytes = store_->get(key);
    TORCH_CHECK(bytes.size() == TFL_COMM_ID_SIZE, "flagos vendor collective: rank ", rank_,
                " got a communicator id of ", bytes.size(), " bytes from the store, not ",
                TFL_COMM_ID_SIZE);
    std::memcpy(id.bytes, bytes.data(), TFL_COMM_ID_SIZE);
  }
  join_or_throw(device);
  comm_ = std::make_shared<Communicator>(library_, id, rank_, size_, device, timeout_, vendor_);
  comm_->start_watchdog();
  return *comm_;
}

void VendorBackend::join_or_throw(c10::DeviceIndex device) {
  const std::string prefix = "flagos_vendor_comm_joined_";
  store_->set(prefix + std::to_string(rank_), std::vector<uint8_t>{1});
  std::vector<std::string> keys;
  for (int r = 0; r < size_; ++r) keys.push_back(prefix + std::to_string(r));
  try {
    store_->wait(keys, timeout_);
  } catch (const std::exception&) {
    std::string missing;
    for (int r = 0; r < size_; ++r) {
      bool present = false;
      try {
        present = store_->check({keys[r]});
      } catch (const std::exception&) {
      }
      if (!present) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    C10_THROW_ERROR(DistBackendError,
                    "flagos vendor collective rank " + std::to_string(rank_) + "/" +
                        std::to_string(size_) + " on flagos:" + std::to_string(device) +
                        " (vendor '" + vendor_ + "', tier vendor, library " + library_.name() +
                        "): rank(s) " + (missing.empty() ? std::string("?") : missing) +
                        " never joined the communicator within " +
                        std::to_string(timeout_.count()) + " ms (the group's timeout)");
  }
}

c10::DeviceIndex VendorBackend::device_of(const char* op,
                                          const std::vector<at::Tensor>& tensors) const {
  TORCH_CHECK_VALUE(!tensors.empty(), "flagos ", op, ": no tensors");
  const at::Device device = tensors.front().device();
  for (const auto& t : tensors) {
    TORCH_CHECK_VALUE(t.device() == device && device.type() == kFlagos, "flagos ", op,
                      ": every tensor must be on one flagos device (got ", device, " and ",
                      t.device(), ")");
  }
  return device.has_index() ? device.index() : static_cast<c10::DeviceIndex>(0);
}

void VendorBackend::eagerConnectSingleDevice(at::Device device) {
  if (device.type() == kFlagos) communicator(device.has_index() ? device.index() : 0);
}

c10::intrusive_ptr<c10d::Work> VendorBackend::run(const char* op, c10d::OpType type,
                                                  const std::vector<at::Tensor>& tensors,
                                                  std::vector<at::Tensor> outputs, bool grouped,
                                                  const Body& body) {
  const c10::DeviceIndex device = device_of(op, tensors);
  Communicator& comm = communicator(device);
  std::shared_ptr<Communicator> keep;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    keep = comm_;
  }
  comm.check_async();  // a communicator that failed fails every later operation at once
  const c10::impl::VirtualGuardImpl impl(kFlagos);
  const c10::Stream& stream = comm.stream();
  c10::Event ready(kFlagos);
  ready.record(current_stream(device));
  ready.block(stream);
  // The caller may free these while the operation is queued: the allocator
  // then keeps their blocks until the communicator's stream passed it.
  for (const auto& t : tensors) impl.recordDataPtrOnStream(t.storage().data_ptr(), stream);
  {
    c10::StreamGuard guard(stream);  // temporaries and copies of `body` go on that stream
    Deferred deferred;
    deferred.grouped = grouped;
    Deferred* const outer = t_deferred;
    t_deferred = &deferred;
    try {
      const Communicator::InLibrary in_library(comm, op);
      if (grouped) call(comm, comm.table().group_start(), "group_start");
      try {
        body(comm);
      } catch (...) {
        if (grouped) comm.table().group_end();
        throw;
      }
      if (grouped) call(comm, comm.table().group_end(), "group_end");
    } catch (...) {
      t_deferred = outer;
      throw;
    }
    t_deferred = outer;
    for (auto& work : deferred.after) work();
  }
  c10::Event end(kFlagos);
  end.record(stream);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (coalescing_) coalesced_.insert(coalesced_.end(), outputs.begin(), outputs.end());
  }
  auto future = c10::make_intrusive<c10::ivalue::Future>(
      c10::ListType::create(c10::TensorType::get()),
      std::vector<c10::Device>{c10::Device(kFlagos, device)});
  {
    // The future's events go on the communicator's stream: a consumer that
    // waits on it is ordered after the operation, not after the host.
    c10::StreamGuard guard(stream);
    future->markCompleted(c10::IValue(outputs));
  }
  return c10::make_intrusive<VendorWork>(keep, rank_, type, op, std::move(outputs), std::move(end),
                                         std::move(future));
}

void VendorBackend::startCoalescing() {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(!coalescing_, "flagos vendor backend: startCoalescing while coalescing already");
  coalescing_ = true;
  coalesced_.clear();
}

c10::intrusive_ptr<c10d::Work> VendorBackend::endCoalescing() {
  std::vector<at::Tensor> outputs;
  std::shared_ptr<Communicator> comm;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(coalescing_, "flagos vendor backend: endCoalescing without startCoalescing");
    coalescing_ = false;
    outputs.swap(coalesced_);
    comm = comm_;
  }
  if (!comm) {
    // Nothing was issued: a work that is already done.
    auto future =
        c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
    future->markCompleted(c10::IValue(std::vector<at::Tensor>{}));
    return c10d::Work::create_from_future(future);
  }
  const c10::Stream& stream = comm->stream();
  c10::Event end(kFlagos);
  end.record(stream);
  auto future = c10::make_intrusive<c10::ivalue::Future>(
      c10::ListType::create(c10::TensorType::get()),
      std::vector<c10::Device>{c10::Device(kFlagos, comm->device())});
  {
    c10::StreamGuard guard(stream);
    future->markCompleted(c10::IValue(outputs));
  }
  return c10::make_intrusive<VendorWork>(comm, rank_, c10d::OpType::COALESCED, "coalesced",
                                         std::move(outputs), std::move(end), std::move(future));
}

c10::intrusive_ptr<c10d::Work> VendorBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                        const c10d::BroadcastOptions& opts) {
  const int root = static_cast<int>(opts.rootRank);
  return run(
      "broadcast", c10d::OpType::BROADCAST, tensors, tensors, tensors.size() > 1,
      [&](Communicator& c) {
        for (auto& t : tensors) {
          const Flat f = flat(t, "broadcast");
          call(c, c.table().broadcast(f.ptr, f.ptr, f.count, f.dtype, root, c.handle(), c.native()),
               "broadcast");
        }
      });
}

c10::intrusive_ptr<c10d::Work> VendorBackend::all_reduce_each(const char* name, c10d::OpType type,
                                                              std::vector<at::Tensor>& tensors,
                                                              int op, bool grouped) {
  return run(name, type, tensors, tensors, grouped, [&](Communicator& c) {
    for (auto& t : tensors) {
      const Flat f = flat(t, name, op);
      reduce_call(
          c, op, "all_reduce",
          [&](int o) {
            return c.table().all_reduce(f.ptr, f.ptr, f.count, f.dtype, o, c.handle(), c.native());
          },
          t, true, t);
    }
  });
}

c10::intrusive_ptr<c10d::Work> VendorBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::AllreduceOptions& opts) {
  return all_reduce_each("all_reduce", c10d::OpType::ALLREDUCE, tensors,
                         tfl_reduce_of(opts.reduceOp, "all_reduce"), tensors.size() > 1);
}

c10::intrusive_ptr<c10d::Work> VendorBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  return all_reduce_each("all_reduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED, tensors,
                         tfl_reduce_of(opts.reduceOp, "all_reduce_coalesced"), true);
}

c10::intrusive_ptr<c10d::Work> VendorBackend::reduce(std::vector<at::Tensor>& tensors,
                                                     const c10d::ReduceOptions& opts) {
  const int op = tfl_reduce_of(opts.reduceOp, "reduce");
  const int root = static_cast<int>(opts.rootRank);
  return run("reduce", c10d::OpType::REDUCE, tensors, tensors, tensors.size() > 1,
             [&](Communicator& c) {
               for (auto& t : tensors) {
                 const Flat f = flat(t, "reduce", op);
                 reduce_call(
                     c, op, "reduce",
                     [&](int o) {
                       return c.table().reduce(f.ptr, rank_ == root ? f.ptr : nullptr, f.count,
                                               f.dtype, o, root, c.handle(), c.native());
                     },
                     t, rank_ == root, t);
               }
             });
}

c10::intrusive_ptr<c10d::Work> VendorBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                              const c10d::AllgatherOptions&) {
  TORCH_CHECK_VALUE(
      output.numel() == input.numel() * size_ && output.scalar_type() == input.scalar_type(),
      "flagos all_gather_into_tensor: the output must hold ", size_, " x ", input.numel(), " ",
      input.scalar_type(), " elements (got ", output.numel(), " ", output.scalar_type(), ")");
  return run(
      "all_gather_into_tensor", c10d::OpType::_ALLGATHER_BASE, {output, input}, {output}, false,
      [&](Communicator& c) {
        const Flat in = flat(input, "all_gather_into_tensor", -1, true);
        const Flat out = flat(output, "all_gather_into_tensor", -1, true);
        call(c, c.table().all_gather(in.ptr, out.ptr, in.count, in.dtype, c.handle(), c.native()),
             "all_gather");
      });
}

c10::intrusive_ptr<c10d::Work> VendorBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(),
                    "flagos all_gather_into_tensor_coalesced: ", outputs.size(), " outputs for ",
                    inputs.size(), " inputs");
  return run(
      "all_gather_into_tensor_coalesced", c10d::OpType::COALESCED, concat(outputs, inputs), outputs,
      true, [&](Communicator& c) {
        for (size_t i = 0; i < inputs.size(); ++i) {
          TORCH_CHECK_VALUE(outputs[i].numel() == inputs[i].numel() * size_,
                            "flagos all_gather_into_tensor_coalesced: output ", i, " must hold ",
                            size_, " x ", inputs[i].numel(), " elements");
          const Flat in = flat(inputs[i], "all_gather_into_tensor_coalesced", -1, true);
          const Flat out = flat(outputs[i], "all_gather_into_tensor_coalesced", -1, true);
          call(c, c.table().all_gather(in.ptr, out.ptr, in.count, in.dtype, c.handle(), c.native()),
               "all_gather");
        }
      });
}

c10::intrusive_ptr<c10d::Work> VendorBackend::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  TORCH_CHECK_VALUE(
      inputs.size() == 1 && outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_),
      "flagos all_gather: one input and a list of ", size_, " outputs");
  at::Tensor& input = inputs[0];
  for (const auto& o : outputs[0]) {
    TORCH_CHECK_VALUE(o.numel() == input.numel() && o.scalar_type() == input.scalar_type(),
                      "flagos all_gather: every output must be like the input (",
                      input.scalar_type(), input.sizes(), "), got ", o.scalar_type(), o.sizes());
  }
  return run(
      "all_gather", c10d::OpType::ALLGATHER, concat(flatten(outputs), inputs), outputs[0], false,
      [&](Communicator& c) {
        at::Tensor gathered = at::empty({size_ * input.numel()}, input.options());
        const Flat in = flat(input.contiguous(), "all_gather");
        const Flat out = flat(gathered, "all_gather");
        call(c, c.table().all_gather(in.ptr, out.ptr, in.count, in.dtype, c.handle(), c.native()),
             "all_gather");
        for (int r = 0; r < size_; ++r) {
          auto& o = outputs[0][r];
          o.copy_(gathered.narrow(0, r * input.numel(), input.numel()).view(o.sizes()));
        }
      });
}

c10::intrusive_ptr<c10d::Work> VendorBackend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  TORCH_CHECK_VALUE(outputs.size() == static_cast<size_t>(size_),
                    "flagos all_gather_coalesced: one output list per rank");
  std::vector<at::Tensor> all = concat(flatten(outputs), inputs);
  return run(
      "all_gather_coalesced", c10d::OpType::ALLGATHER_COALESCED, all, all, false,
      [&](Communicator& c) {
        for (size_t i = 0; i < inputs.size(); ++i) {
          const at::Tensor in_c = inputs[i].contiguous();
          at::Tensor gathered = at::empty({size_ * in_c.numel()}, in_c.options());
          const Flat in = flat(in_c, "all_gather_coalesced");
          const Flat out = flat(gathered, "all_gather_coalesced");
          call(c, c.table().all_gather(in.ptr, out.ptr, in.count, in.dtype, c.handle(), c.native()),
               "all_gather");
          for (int r = 0; r < size_; ++r) {
            auto& o = outputs[r][i];
            o.copy_(gathered.narrow(0, r * in_c.numel(), in_c.numel()).view(o.sizes()));
          }
        }
      });
}

c10::intrusive_ptr<c10d::Work> VendorBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const int op = tfl_reduce_of(opts.reduceOp, "reduce_scatter_tensor");
  TORCH_CHECK_VALUE(
      input.numel() == output.numel() * size_ && output.scalar_type() == input.scalar_type(),
      "flagos reduce_scatter_tensor: the input must hold ", size_, " x ", output.numel(), " ",
      output.scalar_type(), " elements (got ", input.numel(), " ", input.scalar_type(), ")");
  return run("reduce_scatter_tensor", c10d::OpType::_REDUCE_SCATTER_BASE, {output, input}, {output},
             false, [&](Communicator& c) {
               const Flat in = flat(input, "reduce_scatter_tensor", op, true);
               const Flat out = flat(output, "reduce_scatter_tensor", op, true);
               reduce_call(
                   c, op, "reduce_scatter",
                   [&](int o) {
                     return c.table().reduce_scatter(in.ptr, out.ptr, out.count, out.dtype, o,
                                                     c.handle(), c.native());
                   },
                   output, true, input, rank_ * output.numel());
             });
}

c10::intrusive_ptr<c10d::Work> VendorBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const int op = tfl_reduce_of(opts.reduceOp, "reduce_scatter_tensor_coalesced");
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(),
                    "flagos reduce_scatter_tensor_coalesced: ", outputs.size(), " outputs for ",
                    inputs.size(), " inputs");
  return run("reduce_scatter_tensor_coalesced", c10d::OpType::COALESCED, concat(outputs, inputs),
             outputs, true, [&](Communicator& c) {
               for (size_t i = 0; i < inputs.size(); ++i) {
                 TORCH_CHECK_VALUE(inputs[i].numel() == outputs[i].numel() * size_,
                                   "flagos reduce_scatter_tensor_coalesced: input ", i,
                                   " must hold ", size_, " x ", outputs[i].numel(), " elements");
                 const Flat in = flat(inputs[i], "reduce_scatter_tensor_coalesced", op, true);
                 const Flat out = flat(outputs[i], "reduce_scatter_tensor_coalesced", op, true);
                 reduce_call(
                     c, op, "reduce_scatter",
                     [&](int o) {
                       return c.table().reduce_scatter(in.ptr, out.ptr, out.count, out.dtype, o,
                                                       c.handle(), c.native());
                     },
                     outputs[i], true, inputs[i], rank_ * outputs[i].numel());
               }
             });
}

c10::intrusive_ptr<c10d::Work> VendorBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const int op = tfl_reduce_of(opts.reduceOp, "reduce_scatter");
  TORCH_CHECK_VALUE(
      outputs.size() == 1 && inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_),
      "flagos reduce_scatter: one output and a list of ", size_, " inputs");
  at::Tensor& output = outputs[0];
  return run("reduce_scatter", c10d::OpType::REDUCE_SCATTER, concat(outputs, flatten(inputs)),
             outputs, false, [&](Communicator& c) {
               std::vector<at::Tensor> rows;
               for (const auto& t : inputs[0]) rows.push_back(t.reshape({-1}));
               const at::Tensor packed = at::cat(rows);
               TORCH_CHECK_VALUE(packed.numel() == output.numel() * size_,
                                 "flagos reduce_scatter: every input must have the output's ",
                                 output.numel(), " elements");
               const bool direct = output.is_contiguous();
               at::Tensor target = direct ? output : at::empty({output.numel()}, output.options());
               const Flat in = flat(packed, "reduce_scatter", op);
               const Flat out = flat(target, "reduce_scatter", op);
               reduce_call(
                   c, op, "reduce_scatter",
                   [&](int o) {
                     return c.table().reduce_scatter(in.ptr, out.ptr, out.count, out.dtype, o,
                                                     c.handle(), c.native());
                   },
                   target, true, packed, rank_ * target.numel());
               if (!direct) output.copy_(target.view(output.sizes()));
             });
}

c10::intrusive_ptr<c10d::Work> VendorBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                            std::vector<int64_t>& output_splits,
                                                            std::vector<int64_t>& input_splits,
                                                            const c10d::AllToAllOptions&) {
  if (output_splits.empty() && input_splits.empty()) {
    TORCH_CHECK_VALUE(input.numel() % size_ == 0 && output.numel() == input.numel(),
                      "flagos all_to_all_single: input and output must hold the same number of "
                      "elements, divisible by the world size ",
                      size_, " (got ", input.numel(), " and ", output.numel(), ")");
    return run("all_to_all_single", c10d::OpType::ALLTOALL_BASE, {output, input}, {output}, false,
               [&](Communicator& c) {
                 const Flat in = flat(input, "all_to_all_single", -1, true);
                 const Flat out = flat(output, "all_to_all_single", -1, true);
                 call(c,
                      c.table().all_to_all(in.ptr, out.ptr, in.count / size_, in.dtype, c.handle(),
                                           c.native()),
                      "all_to_all");
               });
  }
  // Uneven splits: one send and one receive per peer, in one library group.
  auto splits = [&](const std::vector<int64_t>& given, const at::Tensor& t) {
    if (!given.empty()) {
      TORCH_CHECK_VALUE(given.size() == static_cast<size_t>(size_),
                        "flagos all_to_all_single: ", given.size(), " split sizes for ", size_,
                        " ranks");
      return given;
    }
    TORCH_CHECK_VALUE(t.dim() > 0 && t.size(0) % size_ == 0,
                      "flagos all_to_all_single: ", t.sizes(), " does not split evenly over ",
                      size_, " ranks");
    return std::vector<int64_t>(size_, t.size(0) / size_);
  };
  const std::vector<int64_t> outs = splits(output_splits, output);
  const std::vector<int64_t> ins = splits(input_splits, input);
  return run("all_to_all_single", c10d::OpType::ALLTOALL_BASE, {output, input}, {output}, true,
             [&](Communicator& c) {
               const Flat in = flat(input, "all_to_all_single", -1, true);
               const Flat out = flat(output, "all_to_all_single", -1, true);
               const int64_t in_row =
                   input.dim() > 0 && input.size(0) > 0 ? input.numel() / input.size(0) : 0;
               const int64_t out_row =
                   output.dim() > 0 && output.size(0) > 0 ? output.numel() / output.size(0) : 0;
               const int64_t per = at::isComplexType(input.scalar_type()) ? 2 : 1;
               int64_t in_at = 0;
               int64_t out_at = 0;
               for (int p = 0; p < size_; ++p) {
                 const int64_t n_in = ins[p] * in_row;
                 const int64_t n_out = outs[p] * out_row;
                 if (p == rank_) {
                   TORCH_CHECK_VALUE(n_in == n_out, "flagos all_to_all_single: rank ", rank_,
                                     " sends itself ", n_in, " elements but expects ", n_out);
                   output.view({-1})
                       .narrow(0, out_at, n_out)
                       .copy_(input.view({-1}).narrow(0, in_at, n_in));
                 } else {
                   call(c,
                        c.table().send(byte_at(in.ptr, in_at, input), n_in * per, in.dtype, p,
                                       c.handle(), c.native()),
                        "send");
                   call(c,
                        c.table().recv(byte_at(out.ptr, out_at, output), n_out * per, out.dtype, p,
                                       c.handle(), c.native()),
                        "recv");
                 }
                 in_at += n_in;
                 out_at += n_out;
               }
             });
}

c10::intrusive_ptr<c10d::Work> VendorBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                       std::vector<at::Tensor>& inputs,
                                                       const c10d::AllToAllOptions&) {
  TORCH_CHECK_VALUE(
      outputs.size() == static_cast<size_t>(size_) && inputs.size() == static_cast<size_t>(size_),
      "flagos all_to_all: one input and one output per rank (", size_, ")");
  return run(
      "all_to_all", c10d::OpType::ALLTOALL, concat(outputs, inputs), outputs, true,
      [&](Communicator& c) {
        for (int p = 0; p < size_; ++p) {
          if (p == rank_) {
            outputs[p].copy_(inputs[p]);
            continue;
          }
          const Flat in = flat(inputs[p], "all_to_all", -1, true);
          const Flat out = flat(outputs[p], "all_to_all", -1, true);
          call(c, c.table().send(in.ptr, in.count, in.dtype, p, c.handle(), c.native()), "send");
          call(c, c.table().recv(out.ptr, out.count, out.dtype, p, c.handle(), c.native()), "recv");
        }
      });
}

c10::intrusive_ptr<c10d::Work> VendorBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::GatherOptions& opts) {
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK_VALUE(inputs.size() == 1, "flagos gather: one input tensor");
  const bool is_root = rank_ == root;
  TORCH_CHECK_VALUE(
      !is_root || (outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_)),
      "flagos gather: the root takes a list of ", size_, " outputs");
  std::vector<at::Tensor> results = is_root ? outputs[0] : std::vector<at::Tensor>{};
  return run(
      "gather", c10d::OpType::GATHER, concat(flatten(outputs), inputs), results, true,
      [&](Communicator& c) {
        if (!is_root) {
          const Flat in = flat(inputs[0], "gather", -1, true);
          call(c, c.table().send(in.ptr, in.count, in.dtype, root, c.handle(), c.native()), "send");
          return;
        }
        for (int p = 0; p < size_; ++p) {
          if (p == rank_) {
            outputs[0][p].copy_(inputs[0]);
            continue;
          }
          const Flat out = flat(outputs[0][p], "gather", -1, true);
          call(c, c.table().recv(out.ptr, out.count, out.dtype, p, c.handle(), c.native()), "recv");
        }
      });
}

c10::intrusive_ptr<c10d::Work> VendorBackend::scatter(std::vector<at::Tensor>& outputs,
                                                      std::vector<std::vector<at::Tensor>>& inputs,
                                                      const c10d::ScatterOptions& opts) {
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK_VALUE(outputs.size() == 1, "flagos scatter: one output tensor");
  const bool is_root = rank_ == root;
  TORCH_CHECK_VALUE(
      !is_root || (inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_)),
      "flagos scatter: the root takes a list of ", size_, " inputs");
  return run(
      "scatter", c10d::OpType::SCATTER, concat(outputs, flatten(inputs)), outputs, true,
      [&](Communicator& c) {
        if (!is_root) {
          const Flat out = flat(outputs[0], "scatter", -1, true);
          call(c, c.table().recv(out.ptr, out.count, out.dtype, root, c.handle(), c.native()),
               "recv");
          return;
        }
        for (int p = 0; p < size_; ++p) {
          if (p == rank_) {
            outputs[0].copy_(inputs[0][p]);
            continue;
          }
          const Flat in = flat(inputs[0][p], "scatter", -1, true);
          call(c, c.table().send(in.ptr, in.count, in.dtype, p, c.handle(), c.native()), "send");
        }
      });
}

c10::intrusive_ptr<c10d::Work> VendorBackend::send(std::vector<at::Tensor>& tensors, int dst_rank,
                                                   int /*tag: in issue order, as NCCL*/) {
  TORCH_CHECK_VALUE(tensors.size() == 1, "flagos send: one tensor");
  return run("send", c10d::OpType::SEND, tensors, tensors, false, [&](Communicator& c) {
    const Flat f = flat(tensors[0], "send", -1, true);
    call(c, c.table().send(f.ptr, f.count, f.dtype, dst_rank, c.handle(), c.native()), "send");
  });
}

c10::intrusive_ptr<c10d::Work> VendorBackend::recv(std::vector<at::Tensor>& tensors, int src_rank,
                                                   int /*tag*/) {
  TORCH_CHECK_VALUE(tensors.size() == 1, "flagos recv: one tensor");
  return run("recv", c10d::OpType::RECV, tensors, tensors, false, [&](Communicator& c) {
    const Flat f = flat(tensors[0], "recv", -1, true);
    call(c, c.table().recv(f.ptr, f.count, f.dtype, src_rank, c.handle(), c.native()), "recv");
  });
}

c10::intrusive_ptr<c10d::Work> VendorBackend::barrier(const c10d::BarrierOptions& opts) {
  c10::DeviceIndex device = -1;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (comm_) device = comm_->device();
  }
  if (device < 0) {
    device = opts.device_ids.empty() ? c10::impl::VirtualGuardImpl(kFlagos).getDevice().index()
                                     : static_cast<c10::DeviceIndex>(opts.device_ids.front());
  }
  std::vector<at::Tensor> token{at::zeros({1}, at::TensorOptions().device(kFlagos, device))};
  c10d::AllreduceOptions all;
  auto work = allreduce(token, all);
  work->synchronize();  // a barrier holds the host, as ProcessGroupNCCL's does
  return work;
}

void VendorBackend::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (comm_) comm_->abort();
}

void VendorBackend::shutdown() {
  std::shared_ptr<Communicator> comm;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    comm = std::move(comm_);
  }
  // Destroyed once no Work holds it: the library then releases it after its
  // queued operations.
}

}  // namespace torch_fl::distributed
