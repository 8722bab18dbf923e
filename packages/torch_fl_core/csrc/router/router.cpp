#include "router/router.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/ScalarType.h>
#include <torch/library.h>

#include <atomic>
#include <iostream>
#include <memory>
#include <mutex>
#include <set>

#include "aten/fallback_counter.h"
#include "router/backend.h"

namespace torch_fl {
namespace {

std::atomic<bool> g_dispatch_log{false};
std::mutex g_logged_mutex;
std::set<std::pair<std::string, std::string>>* g_logged =
    new std::set<std::pair<std::string, std::string>>();

c10::ScalarType parse_dtype(const std::string& name) {
  static const std::map<std::string, c10::ScalarType> table = [] {
    std::map<std::string, c10::ScalarType> t;
#define TFL_DTYPE_ENTRY(_, n) t[c10::toString(c10::ScalarType::n)] = c10::ScalarType::n;
    AT_FORALL_SCALAR_TYPES_WITH_COMPLEX_AND_QINTS(TFL_DTYPE_ENTRY)
#undef TFL_DTYPE_ENTRY
    // Python spellings (torch.float32, ...).
    const std::pair<const char*, c10::ScalarType> py[] = {
        {"uint8", c10::kByte},        {"int8", c10::kChar},          {"int16", c10::kShort},
        {"int32", c10::kInt},         {"int64", c10::kLong},         {"float16", c10::kHalf},
        {"float32", c10::kFloat},     {"float64", c10::kDouble},     {"complex32", c10::kComplexHalf},
        {"complex64", c10::kComplexFloat}, {"complex128", c10::kComplexDouble},
        {"bool", c10::kBool},         {"bfloat16", c10::kBFloat16},  {"half", c10::kHalf},
        {"float", c10::kFloat},       {"double", c10::kDouble},      {"long", c10::kLong},
        {"int", c10::kInt},           {"short", c10::kShort},        {"uint16", c10::kUInt16},
        {"uint32", c10::kUInt32},     {"uint64", c10::kUInt64},
        {"float8_e4m3fn", c10::kFloat8_e4m3fn}, {"float8_e5m2", c10::kFloat8_e5m2}};
    for (const auto& kv : py) t[kv.first] = kv.second;
    return t;
  }();
  auto it = table.find(name);
  TORCH_CHECK(it != table.end(), "flagos router: unknown dtype '", name, "'");
  return it->second;
}

struct Target {
  std::shared_ptr<Backend> backend;
  std::atomic<int64_t> calls{0};
};

// The kernel registered for one routed overload.
class RouteKernel final : public c10::OperatorKernel {
 public:
  RouteKernel(std::string op, std::shared_ptr<Backend> fallback_backend,
              std::vector<std::pair<std::vector<c10::ScalarType>, std::shared_ptr<Backend>>> rules,
              RouteSpec spec)
      : op_(std::move(op)), spec_(std::move(spec)) {
    targets_.emplace_back(std::make_unique<Target>());
    targets_.back()->backend = std::move(fallback_backend);
    by_dtype_.fill(0);
    for (auto& [dtypes, backend] : rules) {
      size_t slot = slot_for(backend);
      for (c10::ScalarType st : dtypes) by_dtype_[static_cast<size_t>(st)] = slot;
      has_rules_ = true;
    }
  }

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                  torch::jit::Stack* stack) {
    Target& target = *targets_[has_rules_ ? choose(op, *stack) : 0];
    target.calls.fetch_add(1, std::memory_order_relaxed);
    if (C10_UNLIKELY(g_dispatch_log.load(std::memory_order_relaxed))) log(op, target);
    target.backend->call(op, keys, stack);
  }

  const std::string& op() const { return op_; }
  const RouteSpec& spec() const { return spec_; }
  void collect(std::map<std::string, std::map<std::string, int64_t>>& out) const {
    for (const auto& t : targets_) {
      const int64_t n = t->calls.load();
      if (n > 0) out[op_][t->backend->name()] += n;
    }
  }
  void reset() {
    for (auto& t : targets_) t->calls.store(0);
  }

 private:
  size_t slot_for(const std::shared_ptr<Backend>& backend) {
    for (size_t i = 0; i < targets_.size(); ++i) {
      if (targets_[i]->backend == backend) return i;
    }
    targets_.emplace_back(std::make_unique<Target>());
    targets_.back()->backend = backend;
    return targets_.size() - 1;
  }

  // The dtype of the first tensor argument (a tensor list's first element)
  // decides; docs/routing.md documents the rule.
  size_t choose(const c10::OperatorHandle& op, const torch::jit::Stack& stack) const {
    const size_t n = op.schema().arguments().size();
    for (size_t i = stack.size() - n; i < stack.size(); ++i) {
      const c10::IValue& v = stack[i];
      if (v.isTensor()) {
        if (v.toTensor().defined()) return by_dtype_[static_cast<size_t>(v.toTensor().scalar_type())];
      } else if (v.isTensorList()) {
        const auto list = v.toTensorList();
        if (!list.empty()) {
          return by_dtype_[static_cast<size_t>(static_cast<at::Tensor>(list.get(0)).scalar_type())];
        }
      }
    }
    return 0;
  }

  void log(const c10::OperatorHandle& op, const Target& target) const {
    std::lock_guard<std::mutex> lock(g_logged_mutex);
    if (g_logged->emplace(op_, target.backend->name()).second) {
      std::cerr << "[flagos dispatch] " << short_name(op.operator_name()) << " -> "
                << target.backend->name() << std::endl;
    }
  }

  std::string op_;
  RouteSpec spec_;
  std::vector<std::unique_ptr<Target>> targets_;
  std::array<size_t, static_cast<size_t>(c10::ScalarType::NumOptions)> by_dtype_{};
  bool has_rules_ = false;
};

std::mutex g_install_mutex;
// The registrations live as long as this Library; replacing it deregisters
// every route kernel at once.
std::unique_ptr<torch::Library>* g_library = new std::unique_ptr<torch::Library>();
std::vector<RouteKernel*>* g_kernels = new std::vector<RouteKernel*>();

std::shared_ptr<Backend> backend_or_throw(const std::string& name, const std::string& op) {
  auto b = find_backend(name);
  if (!b) {
    std::string valid;
    for (const auto& n : backend_names()) valid += (valid.empty() ? "" : ", ") + n;
    TORCH_CHECK(false, "flagos router: unknown backend '", name, "' for ", op,
                " (valid backends: ", valid, ", none)");
  }
  return b;
}

}  // namespace

void router_install(const std::vector<RouteSpec>& routes) {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  const auto& native = core_native_ops();  // before any route registers
  const std::set<std::string> native_set(native.begin(), native.end());
  auto library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                                  c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  std::vector<RouteKernel*> kernels;
  for (const auto& spec : routes) {
    const auto& [op, default_backend, rules] = spec;
    TORCH_CHECK(native_set.count(op) == 0, "flagos router: ", op,
                " is served natively by core and cannot be routed");
    const auto dot = op.find('.', op.find("::") + 2);
    c10::OperatorName name(op.substr(0, dot), dot == std::string::npos ? "" : op.substr(dot + 1));
    auto handle = c10::Dispatcher::singleton().findOp(name);
    TORCH_CHECK(handle.has_value(), "flagos router: unknown operator ", op);
    auto fallback = backend_or_throw(default_backend, op);
    TORCH_CHECK(fallback->has_kernel(*handle), "flagos router: backend '", fallback->name(),
                "' has no kernel for ", op);
    std::vector<std::pair<std::vector<c10::ScalarType>, std::shared_ptr<Backend>>> parsed;
    for (const auto& [dtypes, backend_name] : rules) {
      auto backend = backend_or_throw(backend_name, op);
      TORCH_CHECK(backend->has_kernel(*handle), "flagos router: backend '", backend->name(),
                  "' has no kernel for ", op);
      std::vector<c10::ScalarType> sts;
      for (const auto& d : dtypes) sts.push_back(parse_dtype(d));
      parsed.emplace_back(std::move(sts), std::move(backend));
    }
    auto kernel = std::make_unique<RouteKernel>(op, std::move(fallback), std::move(parsed), spec);
    kernels.push_back(kernel.get());
    // Registered by full name with overload: "add.out"; the default overload by bare name.
    const std::string reg = name.overload_name.empty() ? name.name.substr(6)
                                                       : name.name.substr(6) + "." + name.overload_name;
    library->impl(reg.c_str(),
                  torch::CppFunction::makeFromBoxedKernel(c10::BoxedKernel::makeFromFunctor(std::move(kernel))));
  }
  // Deregister the old set first: one kernel per (op, key) at a time.
  g_library->reset();
  *g_library = std::move(library);
  *g_kernels = std::move(kernels);
}

std::vector<RouteSpec> router_routes() {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  std::vector<RouteSpec> out;
  for (const RouteKernel* k : *g_kernels) out.push_back(k->spec());
  return out;
}

std::map<std::string, std::map<std::string, int64_t>> dispatch_counts() {
  std::map<std::string, std::map<std::string, int64_t>> out;
  {
    std::lock_guard<std::mutex> lock(g_install_mutex);
    for (const RouteKernel* k : *g_kernels) k->collect(out);
  }
  for (const auto& [op, n] : fallback_counts()) out[op]["cpu"] += n;
  return out;
}

void reset_dispatch_counts() {
  {
    std::lock_guard<std::mutex> lock(g_install_mutex);
    for (RouteKernel* k : *g_kernels) k->reset();
  }
  reset_fallback_counts();
}

void set_dispatch_log(bool on) { g_dispatch_log.store(on); }

}  // namespace torch_fl
