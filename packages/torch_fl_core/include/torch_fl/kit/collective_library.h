// For a vendor's collective library (collective.h) over its SDK's collective
// calls (NCCL, HCCL, ECCL): the runtime core attaches (v1.1 attach_runtime),
// which gives the SDK stream behind a tfl_stream and selects the device a
// communicator is made on, and the rules every SDK mapping shares. Plain C++
// over collective.h and runtime.h: the library includes it with its SDK only.
#pragma once

#include <torch_fl/collective.h>
#include <torch_fl/kit/runtime_errors.h>

#include <atomic>
#include <cstddef>
#include <mutex>
#include <string>

namespace torch_fl::kit {

class AttachedRuntime {
 public:
  // attach_runtime: the runtime must give SDK streams (runtime ABI v1.2).
  tfl_status attach(const tfl_runtime_v1* runtime, const char* library) {
    if (runtime == nullptr) return fail(TFL_ERROR_INVALID_VALUE, "tfl_attach_runtime: NULL");
    if (!TFL_RUNTIME_HAS(runtime, native_stream)) {
      return fail(TFL_ERROR_NOT_SUPPORTED,
                  std::string("tfl_attach_runtime: runtime '") +
                      (runtime->name ? runtime->name : "?") +
                      "' has no native_stream (runtime ABI v1.2): " + library +
                      " needs the SDK stream behind each flagos stream");
    }
    runtime_.store(runtime);
    return TFL_OK;
  }

  const tfl_runtime_v1* get() const { return runtime_.load(); }

  // Every call but attach needs it: TFL_ERROR_NOT_INITIALIZED naming `fn` otherwise.
  tfl_status require(const char* fn) const {
    if (get() != nullptr) return TFL_OK;
    return fail(TFL_ERROR_NOT_INITIALIZED, std::string(fn) +
                                               ": no runtime attached (core calls "
                                               "attach_runtime before any other call)");
  }

  // The SDK stream (cudaStream_t, aclrtStream, ...) behind `stream` on `device`.
  tfl_status sdk_stream(const char* fn, tfl_stream stream, int device, void** out,
                        const std::string& who) const {
    const tfl_runtime_v1* rt = get();
    const tfl_status st = rt->native_stream(stream, device, out);
    if (st == TFL_OK) return TFL_OK;
    const char* why = rt->last_error ? rt->last_error() : "";
    return fail(st, std::string(fn) + ": " + who +
                        ": the runtime gives no SDK stream for it: " + (why ? why : ""));
  }

  // Runs `body()` (a tfl_status) with `device` current, then restores the thread's device.
  template <class Body>
  tfl_status on_device(const char* fn, int device, Body&& body) const {
    const tfl_runtime_v1* rt = get();
    int previous = 0;
    tfl_status st = rt->get_device(&previous);
    if (st == TFL_OK) st = rt->set_device(device);
    if (st != TFL_OK) {
      const char* why = rt->last_error ? rt->last_error() : "";
      return fail(st, std::string(fn) + ": cannot select device " + std::to_string(device) + ": " +
                          (why ? why : ""));
    }
    const tfl_status result = body();
    rt->set_device(previous);
    return result;
  }

 private:
  std::atomic<const tfl_runtime_v1*> runtime_{nullptr};
};

// One rank's communicator as a collective library keeps it beside its SDK's
// handle: who it is (for messages), whether it was aborted, and the first
// failure of its queued work, which fails every later operation at once.
// `Handle` is the SDK's communicator type (ncclComm_t, HcclComm).
template <class Handle>
struct CommRecord {
  Handle sdk{};
  int rank = 0;
  int nranks = 0;
  int device = 0;
  const char* library = "";  // "NCCL", "HCCL"
  std::atomic<bool> aborted{false};
  std::mutex mutex;
  std::atomic<int> first_error{TFL_OK};
  std::string first_message;  // written once, before first_error is published

  // "rank 0 of 2 (flagos:0, HCCL)".
  std::string who() const {
    return "rank " + std::to_string(rank) + " of " + std::to_string(nranks) +
           " (flagos:" + std::to_string(device) + ", " + library + ")";
  }

  // An operation may run: TFL_OK, or the abort or the earlier failure, worded for `fn`.
  tfl_status usable(const char* fn) const {
    if (aborted.load())
      return fail(TFL_ERROR_ABORTED, std::string(fn) + ": " + who() + " was aborted");
    const int first = first_error.load();
    if (first == TFL_OK) return TFL_OK;
    return fail(static_cast<tfl_status>(first),
                std::string(fn) + ": " + who() + " failed earlier: " + first_message);
  }

  // Keeps `status` (this thread's last error its message) as the first failure, once.
  void keep_first_failure(tfl_status status) {
    std::lock_guard<std::mutex> lock(mutex);
    if (first_error.load() != TFL_OK) return;
    first_message = thread_error();
    first_error.store(status);
  }

  // comm_async_error's answer from what is kept (the SDK asked before, by the caller).
  tfl_status answer_async_error(tfl_status* error) const {
    if (aborted.load()) {
      *error = TFL_ERROR_ABORTED;
      fail(TFL_ERROR_ABORTED, who() + " was aborted");
      return TFL_OK;
    }
    const int first = first_error.load();
    *error = static_cast<tfl_status>(first);
    if (first != TFL_OK) thread_error() = first_message;
    return TFL_OK;
  }

  // comm_info (any out-parameter may be NULL).
  tfl_status info(int* out_rank, int* out_nranks, int* out_device) const {
    if (out_rank) *out_rank = rank;
    if (out_nranks) *out_nranks = nranks;
    if (out_device) *out_device = device;
    return TFL_OK;
  }
};

// comm_init's arguments, checked as every library checks them; TFL_OK or the failure.
inline tfl_status check_comm_init(const tfl_comm* out, int nranks, const tfl_comm_id* id,
                                  int rank) {
  if (out == nullptr || id == nullptr) {
    return fail(TFL_ERROR_INVALID_VALUE, "tfl_comm_init: comm or id is NULL");
  }
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return fail(TFL_ERROR_INVALID_VALUE,
                "tfl_comm_init: rank " + std::to_string(rank) + " of " + std::to_string(nranks));
  }
  return TFL_OK;
}

// A new record for comm_init, its identity filled (the caller makes the SDK communicator).
template <class Record>
Record* new_record(const char* library, int rank, int nranks, int device) {
  auto* r = new Record();
  r->library = library;
  r->rank = rank;
  r->nranks = nranks;
  r->device = device;
  return r;
}

// The record behind a tfl_comm, or TFL_ERROR_INVALID_HANDLE naming `fn`.
template <class Record>
tfl_status comm_record(const char* fn, tfl_comm handle, Record** out) {
  if (handle == nullptr) {
    return fail(TFL_ERROR_INVALID_HANDLE, std::string(fn) + ": communicator is NULL");
  }
  *out = reinterpret_cast<Record*>(handle);
  return TFL_OK;
}

// collective.h's bool is one byte of 0 or 1 reduced logically; an SDK without
// bool reduces it as unsigned bytes: "or" (SUM, MAX) is MAX, "and" (PROD,
// MIN) is MIN. AVG is not defined for it.
inline bool bool_reduces_as_max(int op) { return op == TFL_REDUCE_SUM || op == TFL_REDUCE_MAX; }

// Bytes of one element of a tfl_dtype (0 for an unknown one).
inline size_t dtype_bytes(int dtype) {
  static const size_t kBytes[TFL_DTYPE_COUNT] = {2, 2, 4, 8, 1, 1, 4, 8, 1};
  return dtype >= 0 && dtype < TFL_DTYPE_COUNT ? kBytes[dtype] : 0;
}

}  // namespace torch_fl::kit
