// A profiler row for each routed call: "flagos::<backend>" with the backend and
// operator as kwinputs (exported as trace metadata), nested under the ATen op
// row the dispatcher records. While a flagos Kineto session records, the scope
// also brackets the call with runtime events on the flagos current stream, so
// the row gets device time (profiler/kineto_session.cpp).
//
// Cost when no profiler is active: one getStepCallbacksUnlessEmpty() check,
// the same test the dispatcher makes for every operator call.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <c10/core/Device.h>

#include <memory>
#include <string>

namespace torch_fl::profiler {

struct DeviceInterval;  // kineto_session.cpp

class RouteScope {
 public:
  // Not at::hasCallbacks(): that copies the global callback list under a
  // mutex on every call, where this reads a thread-local cache.
  RouteScope(const std::string& backend, const c10::OperatorHandle& op,
             c10::DeviceIndex device = -1) {
    auto callbacks = at::getStepCallbacksUnlessEmpty(at::RecordScope::FUNCTION);
    if (C10_UNLIKELY(callbacks.has_value())) begin(std::move(*callbacks), backend, op, device);
  }
  ~RouteScope() {
    if (C10_UNLIKELY(rf_ != nullptr)) end();
  }
  RouteScope(const RouteScope&) = delete;
  RouteScope& operator=(const RouteScope&) = delete;

 private:
  void begin(at::StepCallbacks callbacks, const std::string& backend, const c10::OperatorHandle& op,
             c10::DeviceIndex device);
  void end();
  std::unique_ptr<at::RecordFunction> rf_;
  DeviceInterval* interval_ = nullptr;
};

// ---- device intervals (kineto_session.cpp) ----
// Whether a flagos Kineto session is recording (device intervals wanted).
bool session_recording() noexcept;
// Records a start event on `device`'s current stream; nullptr when not recording.
DeviceInterval* interval_begin(const std::string& name, const std::string& backend,
                               c10::DeviceIndex device);
void interval_end(DeviceInterval* interval);
// Whether this build has the Kineto activity profiler (torch >= 2.12 with Kineto headers).
bool kineto_session_available() noexcept;
// Whether a Kineto trace may start a flagos session (default true). Off where
// a native activity of torch (CUPTI) already times the vendor's device work.
void set_kineto_session_enabled(bool enabled) noexcept;
bool kineto_session_enabled() noexcept;

}  // namespace torch_fl::profiler
