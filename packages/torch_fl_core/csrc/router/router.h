// The dispatch router: one PrivateUse1 kernel per routed overload, calling
// the backend its route table chose (per dtype of the first tensor argument).
#pragma once

#include <cstdint>
#include <map>
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

// op full name -> backend -> calls since the last reset (the unrouted CPU
// fallback is reported as backend "cpu").
std::map<std::string, std::map<std::string, int64_t>> dispatch_counts();
void reset_dispatch_counts();
// "[flagos dispatch] <op> -> <backend>" once per (op, backend) pair.
void set_dispatch_log(bool on);

}  // namespace torch_fl
