// The dispatch router: one PrivateUse1 kernel per routed overload, calling
// the backend its route table chose (per dtype of the first tensor argument).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/ScalarType.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace torch_fl {

// (dtype names, backend) rules; later rules win.
using DtypeRule = std::pair<std::vector<std::string>, std::string>;
// (operator full name "aten::add.out", default backend, dtype rules).
using RouteSpec = std::tuple<std::string, std::string, std::vector<DtypeRule>>;

// Replaces every installed route. The caller (torch_fl.routing) has validated
// the table; this still refuses unknown ops/backends and core-native ops.
void router_install(const std::vector<RouteSpec>& routes, bool unboxed = true);
std::vector<RouteSpec> router_routes();

class Backend;
class RouteState;
// The backend the installed table picks for one operator ("aten::convolution_backward")
// and a first tensor argument of a dtype, for ATen's device-type decision points
// (convolution, attention), which must follow the table instead of naming a device.
// They ask on every call, so the lookup is remembered until the next table
// install: no install lock, std::string or hash lookup per call. The backends
// and states of installed routes live for the process, so the pointers stay
// valid.
class RouteProbe {
 public:
  explicit constexpr RouteProbe(const char* op) : op_(op) {}
  // The backend, or nullptr when `op` is not routed.
  Backend* peek(std::optional<c10::ScalarType> dtype);
  // The same, counted as a call of the route (dispatch counts, the dispatch log).
  Backend* pick(std::optional<c10::ScalarType> dtype);

 private:
  RouteState* state();
  const char* op_;
  std::atomic<uint64_t> generation_{0};  // 0: not looked up yet
  std::atomic<RouteState*> state_{nullptr};
};

// The dtype routes choose by: that of a boxed call's first tensor argument (a
// tensor list's first element); std::nullopt without one.
std::optional<c10::ScalarType> first_tensor_dtype(const c10::OperatorHandle& op,
                                                  const torch::jit::Stack& stack);

// op full name -> backend -> calls since the last reset (the unrouted CPU
// fallback is reported as backend "cpu").
std::map<std::string, std::map<std::string, int64_t>> dispatch_counts();
void reset_dispatch_counts();
// "[flagos dispatch] <op> -> <backend>" once per (op, backend) pair.
void set_dispatch_log(bool on);

}  // namespace torch_fl
