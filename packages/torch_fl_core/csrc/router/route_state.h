// The state behind one routed overload, shared by its boxed kernel (every op)
// and its generated unboxed kernel (ops torchgen emitted a wrapper for).
#pragma once

#include <ATen/core/boxing/BoxedKernel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/ScalarType.h>

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "router/backend.h"
#include "router/foreach_overlap.h"
#include "router/router.h"

namespace torch_fl {

// What a routed call reads first comes first (one cache line per call).
struct RouteTarget {
  std::atomic<int64_t> calls{0};
  // Set for box:<key> backends, which unboxed kernels run without boxing
  // (Undefined: call `boxed`).
  c10::DispatchKey box_key = c10::DispatchKey::Undefined;
  c10::DeviceType box_type = c10::DeviceType::CPU;
  c10::DispatchKeySet box_keys;       // {box_key}: built once, not per call
  const std::string* name = nullptr;  // backend->name(), read without a virtual call
  c10::BoxedKernel boxed;             // calls backend->call; used by unboxed kernels
  std::shared_ptr<Backend> backend;
};

class RouteState {
 public:
  RouteState(std::string op, c10::OperatorHandle handle, RouteSpec spec,
             std::shared_ptr<Backend> default_backend,
             std::vector<std::pair<std::vector<c10::ScalarType>, std::shared_ptr<Backend>>> rules);

  const std::string& op() const { return op_; }
  const c10::OperatorHandle& handle() const { return handle_; }
  const RouteSpec& spec() const { return spec_; }
  bool has_rules() const { return has_rules_; }
  // CPU's overlap checks the router makes for this op (in-place foreach ops).
  foreach_overlap::Checks overlap_checks() const { return overlap_checks_; }
  // Whether the op writes a tensor argument (out=, in-place).
  bool writes_tensor() const { return writes_tensor_; }

  // The target for a call whose first tensor argument has `dtype`
  // (std::nullopt: no tensor argument, the default route).
  RouteTarget& pick(std::optional<c10::ScalarType> dtype) {
    RouteTarget& t = C10_LIKELY(!has_rules_ || !dtype)
                         ? *first_
                         : *targets_[by_dtype_[static_cast<size_t>(*dtype)]];
    t.calls.fetch_add(1, std::memory_order_relaxed);
    if (C10_UNLIKELY(log_enabled())) log(t);
    return t;
  }

  // The backend pick() would choose, without counting or logging.
  const std::shared_ptr<Backend>& peek(std::optional<c10::ScalarType> dtype) const {
    return targets_[dtype && has_rules_ ? by_dtype_[static_cast<size_t>(*dtype)] : 0]->backend;
  }

  void collect(std::map<std::string, std::map<std::string, int64_t>>& out) const;
  void reset();

  static bool log_enabled();

 private:
  void log(const RouteTarget& t) const;
  size_t slot_for(const std::shared_ptr<Backend>& backend);

  // What every routed call reads first: the default target, whether dtype
  // rules apply, the operator.
  RouteTarget* first_ = nullptr;  // targets_[0], the default route
  bool has_rules_ = false;
  foreach_overlap::Checks overlap_checks_ = foreach_overlap::Checks::kNone;
  bool writes_tensor_ = false;
  c10::OperatorHandle handle_;
  std::array<uint8_t, static_cast<size_t>(c10::ScalarType::NumOptions)> by_dtype_{};
  std::string op_;
  RouteSpec spec_;
  std::vector<std::unique_ptr<RouteTarget>> targets_;
};

}  // namespace torch_fl
