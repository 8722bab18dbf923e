#include "profiler/route_scope.h"

#include "glue/op_names.h"

namespace torch_fl::profiler {

void RouteScope::begin(at::StepCallbacks callbacks, const std::string& backend,
                       const c10::OperatorHandle& op, c10::DeviceIndex device) {
  rf_ = std::make_unique<at::RecordFunction>(std::move(callbacks));
  if (!rf_->isActive()) {
    rf_.reset();
    return;
  }
  const std::string name = "flagos::" + backend;
  // Why kwinputs: the profiler exports them as trace metadata ("flagos_backend")
  // and FunctionEvent.kwinputs, so tools can read the route of each op.
  std::unordered_map<std::string, c10::IValue> kwargs{
      {"flagos_backend", c10::IValue(backend)},
      {"flagos_op", c10::IValue(full_name(op.operator_name()))}};
  rf_->before(std::string_view(name), &kwargs);
  if (session_recording()) {
    // The device row is named after the operator and its route ("addmm [box:cpu]"), not
    // like the CPU row: key_averages() groups rows by name.
    interval_ =
        interval_begin(short_name(op.operator_name()) + " [" + backend + "]", backend, device);
  }
}

void RouteScope::end() {
  if (interval_ != nullptr) interval_end(interval_);
  rf_.reset();  // runs the end callbacks
}

}  // namespace torch_fl::profiler
