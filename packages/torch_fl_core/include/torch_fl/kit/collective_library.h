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
