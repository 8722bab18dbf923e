#include "router/router.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/ScalarType.h>
#include <torch/library.h>

#include <atomic>
#include <iostream>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>

#include "router/fallback_counts.h"
#include "boxing/call_arguments.h"
#include "profiler/route_scope.h"
#include "router/backend.h"
#include "router/route_state.h"
#include "router/unboxed_registry.h"

namespace torch_fl {
namespace {

std::atomic<bool> g_dispatch_log{false};
std::mutex g_logged_mutex;
auto* g_logged = new std::set<std::pair<std::string, std::string>>();

c10::ScalarType parse_dtype(const std::string& name) {
  static const std::map<std::string, c10::ScalarType> table = [] {
    std::map<std::string, c10::ScalarType> t;
#define TFL_DTYPE_ENTRY(_, n) t[c10::toString(c10::ScalarType::n)] = c10::ScalarType::n;
    AT_FORALL_SCALAR_TYPES_WITH_COMPLEX_AND_QINTS(TFL_DTYPE_ENTRY)
#undef TFL_DTYPE_ENTRY
    // Python spellings (torch.float32, ...).
    const std::pair<const char*, c10::ScalarType> py[] = {{"uint8", c10::kByte},
                                                          {"int8", c10::kChar},
                                                          {"int16", c10::kShort},
                                                          {"int32", c10::kInt},
                                                          {"int64", c10::kLong},
                                                          {"float16", c10::kHalf},
                                                          {"float32", c10::kFloat},
                                                          {"float64", c10::kDouble},
                                                          {"complex32", c10::kComplexHalf},
                                                          {"complex64", c10::kComplexFloat},
                                                          {"complex128", c10::kComplexDouble},
                                                          {"bool", c10::kBool},
                                                          {"bfloat16", c10::kBFloat16},
                                                          {"half", c10::kHalf},
                                                          {"float", c10::kFloat},
                                                          {"double", c10::kDouble},
                                                          {"long", c10::kLong},
                                                          {"int", c10::kInt},
                                                          {"short", c10::kShort},
                                                          {"uint16", c10::kUInt16},
                                                          {"uint32", c10::kUInt32},
                                                          {"uint64", c10::kUInt64},
                                                          {"float8_e4m3fn", c10::kFloat8_e4m3fn},
                                                          {"float8_e5m2", c10::kFloat8_e5m2}};
    for (const auto& kv : py) t[kv.first] = kv.second;
    return t;
  }();
  auto it = table.find(name);
  TORCH_CHECK(it != table.end(), "flagos router: unknown dtype '", name, "'");
  return it->second;
}

// Runs a routed call on `backend`. A box:<key> backend sees the arguments'
// aliasing as natively (the call mapper shares alias storages). Other backends
// are handed each argument on its own (native SDK kernels, FlagGems, the CPU
// fallback's per-argument copies): a call whose written argument overlaps
// another argument there would give no overlap error where CPU raises one, or
// values CPU would not give, so it is served by the CPU fallback's
// storage-exact path, which raises or computes exactly as CPU does.
void call_backend(Backend& backend, const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                  torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  if (!backend.box_target() && schema.is_mutable()) {
    const auto begin = stack->end() - static_cast<std::ptrdiff_t>(schema.arguments().size());
    if (boxing::has_aliased_write(schema, begin, stack->end())) {
      call_cpu_fallback(op, stack, /*counted=*/false);
      return;
    }
  }
  backend.call(op, keys, stack);
}

// Boxed entry of one backend, for unboxed kernels that box only when the
// chosen backend needs it.
class BackendCaller final : public c10::OperatorKernel {
 public:
  explicit BackendCaller(std::shared_ptr<Backend> b) : backend_(std::move(b)) {}
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* s) {
    profiler::RouteScope scope(backend_->name(), op);  // the route as a profiler row
    call_backend(*backend_, op, ks, s);
  }

 private:
  std::shared_ptr<Backend> backend_;
};

// The boxed kernel registered for routed overloads without a generated
// unboxed wrapper.
class RouteKernel final : public c10::OperatorKernel {
 public:
  explicit RouteKernel(RouteState* state) : state_(state) {}
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                  torch::jit::Stack* stack) {
    route_boxed(*state_, op, keys, stack);
  }

 private:
  RouteState* state_;
};

// The dispatcher warns when a kernel is registered over another for the same
// operator and key, which a route change does on purpose; other warnings pass.
class QuietKernelOverride final : public c10::WarningHandler {
 public:
  QuietKernelOverride() : previous_(c10::WarningUtils::get_warning_handler()) {
    c10::WarningUtils::set_warning_handler(this);
  }
  ~QuietKernelOverride() override { c10::WarningUtils::set_warning_handler(previous_); }
  QuietKernelOverride(const QuietKernelOverride&) = delete;
  QuietKernelOverride& operator=(const QuietKernelOverride&) = delete;
  void process(const c10::Warning& warning) override {
    if (warning.msg().find("Overriding a previously registered kernel") != std::string::npos) {
      return;
    }
    previous_->process(warning);
  }

 private:
  c10::WarningHandler* previous_;
};

std::mutex g_install_mutex;
std::atomic<uint64_t> g_generation{1};  // bumped by every install (RouteProbe)
// The registrations live as long as this Library; replacing it deregisters
// every route kernel at once. States are kept for the process: a call still
// in flight on another thread may hold one.
auto* g_library = new std::unique_ptr<torch::Library>();
// The generated (unboxed) kernels, registered with the dispatcher directly.
auto* g_unboxed = new std::vector<c10::RegistrationHandleRAII>();
auto* g_states = new std::vector<RouteState*>();
auto* g_retired = new std::vector<std::unique_ptr<RouteState>>();
auto* g_by_name = new std::unordered_map<std::string, RouteState*>();

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

std::unordered_map<std::string, UnboxedFactory>& factories() {
  static auto* m = new std::unordered_map<std::string, UnboxedFactory>();
  return *m;
}

}  // namespace

// ---- RouteState ----

RouteState::RouteState(
    std::string op, c10::OperatorHandle handle, RouteSpec spec,
    std::shared_ptr<Backend> default_backend,
    std::vector<std::pair<std::vector<c10::ScalarType>, std::shared_ptr<Backend>>> rules)
    : overlap_checks_(foreach_overlap::checks_for(handle.schema())),
      writes_tensor_(boxing::writes_tensor(handle.schema())),
      handle_(std::move(handle)),
      op_(std::move(op)),
      spec_(std::move(spec)) {
  slot_for(default_backend);
  first_ = targets_.front().get();
  for (auto& [dtypes, backend] : rules) {
    const size_t slot = slot_for(backend);
    for (c10::ScalarType st : dtypes)
      by_dtype_[static_cast<size_t>(st)] = static_cast<uint8_t>(slot);
    has_rules_ = true;
  }
}

size_t RouteState::slot_for(const std::shared_ptr<Backend>& backend) {
  for (size_t i = 0; i < targets_.size(); ++i) {
    if (targets_[i]->backend == backend) return i;
  }
  auto t = std::make_unique<RouteTarget>();
  t->backend = backend;
  t->name = &backend->name();
  t->boxed = c10::BoxedKernel::makeFromFunctor(std::make_unique<BackendCaller>(backend));
  if (const auto box = backend->box_target()) {
    t->box_key = box->first;
    t->box_keys = c10::DispatchKeySet(box->first);
    t->box_type = box->second;
  }
  targets_.push_back(std::move(t));
  TORCH_CHECK(targets_.size() < 256, "flagos router: too many backends for ", op_);
  return targets_.size() - 1;
}

void RouteState::collect(std::map<std::string, std::map<std::string, int64_t>>& out) const {
  for (const auto& t : targets_) {
    const int64_t n = t->calls.load();
    if (n > 0) out[op_][t->backend->name()] += n;
  }
}

void RouteState::reset() {
  for (auto& t : targets_) t->calls.store(0);
}

bool RouteState::log_enabled() { return g_dispatch_log.load(std::memory_order_relaxed); }

void RouteState::log(const RouteTarget& t) const {
  std::lock_guard<std::mutex> lock(g_logged_mutex);
  if (g_logged->emplace(op_, t.backend->name()).second) {
    // One write per line: threads logging at once must not interleave mid-line.
    const std::string line = "[flagos dispatch] " + short_name(handle_.operator_name()) + " -> " +
                             t.backend->name() + "\n";
    std::cerr.write(line.data(), static_cast<std::streamsize>(line.size()));
    std::cerr.flush();
  }
}

std::optional<c10::ScalarType> first_tensor_dtype(const c10::OperatorHandle& op,
                                                  const torch::jit::Stack& stack) {
  const size_t n = op.schema().arguments().size();
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (v.isTensor()) {
      if (v.toTensor().defined()) return v.toTensor().scalar_type();
    } else if (v.isTensorList()) {
      const auto list = v.toTensorList();
      if (!list.empty()) return static_cast<at::Tensor>(list.get(0)).scalar_type();
    }
  }
  return std::nullopt;
}

void route_boxed(RouteState& state, const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                 torch::jit::Stack* stack) {
  foreach_overlap::check_stack(state.overlap_checks(), op.schema(), *stack);
  // Before any backend: a written CPU tensor is an error whoever serves the call.
  if (state.writes_tensor()) boxing::check_written_not_cpu(op, *stack);
  std::optional<c10::ScalarType> dtype;
  if (state.has_rules()) dtype = first_tensor_dtype(op, *stack);
  Backend& backend = *state.pick(dtype).backend;
  profiler::RouteScope scope(backend.name(), op);  // the route as a profiler row
  call_backend(backend, op, keys, stack);
}

// ---- unboxed factories ----

void register_unboxed_factory(const char* op_full_name, UnboxedFactory factory) {
  factories()[op_full_name] = factory;
}

UnboxedFactory find_unboxed_factory(const std::string& op_full_name) {
  auto it = factories().find(op_full_name);
  return it == factories().end() ? nullptr : it->second;
}

size_t unboxed_factory_count() { return factories().size(); }

// ---- installation ----

void router_install(const std::vector<RouteSpec>& routes, bool unboxed) {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  const auto& native = core_native_ops();  // before any route registers
  const std::set<std::string> native_set(native.begin(), native.end());
  auto library = std::make_unique<torch::Library>(
      torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  std::vector<std::unique_ptr<RouteState>> states;
  std::vector<std::pair<std::string, torch::CppFunction>> kernels;
  std::vector<std::pair<c10::OperatorName, UnboxedKernel>> unboxed_kernels;
  for (const auto& spec : routes) {
    const auto& [op, default_backend, rules] = spec;
    TORCH_CHECK(native_set.count(op) == 0, "flagos router: ", op,
                " is served natively by core and cannot be routed");
    TORCH_CHECK(op.rfind("aten::", 0) == 0, "flagos router: only aten operators are routed, got ",
                op);
    const auto dot = op.find('.', 6);
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
    auto state =
        std::make_unique<RouteState>(op, *handle, spec, std::move(fallback), std::move(parsed));
    const std::string reg = op.substr(6);  // "add.out", "abs"
    UnboxedFactory factory = unboxed ? find_unboxed_factory(op) : nullptr;
    if (factory) {
      unboxed_kernels.emplace_back(name, factory(state.get()));
    } else {
      kernels.emplace_back(
          reg, torch::CppFunction::makeFromBoxedKernel(
                   c10::BoxedKernel::makeFromFunctor(std::make_unique<RouteKernel>(state.get()))));
    }
    states.push_back(std::move(state));
  }
  // The new set is registered on top of the old one, then the old one is
  // dropped: a thread calling meanwhile runs the old route or the new one,
  // never an unrouted operator (the dispatcher keeps a stack of kernels per
  // operator and key, the latest registered in use).
  std::vector<c10::RegistrationHandleRAII> unboxed_handles;
  {
    QuietKernelOverride quiet;
    for (auto& [reg, fn] : kernels) library->impl(reg.c_str(), std::move(fn));
    for (auto& [name, k] : unboxed_kernels) {
      unboxed_handles.push_back(c10::Dispatcher::singleton().registerImpl(
          name, c10::DispatchKey::PrivateUse1, std::move(k.kernel), k.signature,
          /*inferred_function_schema=*/nullptr, "torch_fl router (generated unboxed kernel)"));
    }
  }
  g_library->reset();
  g_unboxed->clear();
  *g_library = std::move(library);
  *g_unboxed = std::move(unboxed_handles);
  for (RouteState* s : *g_states) g_retired->emplace_back(s);
  g_states->clear();
  g_by_name->clear();
  for (auto& s : states) {
    g_by_name->emplace(s->op(), s.get());
    g_states->push_back(s.release());
  }
  g_generation.fetch_add(1, std::memory_order_acq_rel);
}

RouteState* RouteProbe::state() {
  const uint64_t now = g_generation.load(std::memory_order_acquire);
  if (C10_LIKELY(generation_.load(std::memory_order_acquire) == now)) {
    return state_.load(std::memory_order_acquire);
  }
  std::lock_guard<std::mutex> lock(g_install_mutex);
  auto it = g_by_name->find(op_);
  RouteState* s = it == g_by_name->end() ? nullptr : it->second;
  state_.store(s, std::memory_order_release);
  generation_.store(g_generation.load(std::memory_order_relaxed), std::memory_order_release);
  return s;
}

Backend* RouteProbe::peek(std::optional<c10::ScalarType> dtype) {
  RouteState* s = state();
  return s ? s->peek(dtype).get() : nullptr;
}

Backend* RouteProbe::pick(std::optional<c10::ScalarType> dtype) {
  RouteState* s = state();
  return s ? s->pick(dtype).backend.get() : nullptr;
}

std::vector<RouteSpec> router_routes() {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  std::vector<RouteSpec> out;
  for (const RouteState* s : *g_states) out.push_back(s->spec());
  return out;
}

std::map<std::string, std::map<std::string, int64_t>> dispatch_counts() {
  std::map<std::string, std::map<std::string, int64_t>> out;
  {
    std::lock_guard<std::mutex> lock(g_install_mutex);
    for (const RouteState* s : *g_states) s->collect(out);
    // Replaced tables' counts: a route change (override, load_routes) keeps
    // what was counted, including calls still running on the old routes.
    for (const auto& s : *g_retired) s->collect(out);
  }
  for (const auto& [op, n] : fallback_counts()) out[op]["cpu"] += n;
  for (const auto& [op, backends] : served_counts()) {
    for (const auto& [backend, n] : backends) out[op][backend] += n;
  }
  return out;
}

void reset_dispatch_counts() {
  {
    std::lock_guard<std::mutex> lock(g_install_mutex);
    for (RouteState* s : *g_states) s->reset();
    for (auto& s : *g_retired) s->reset();
  }
  reset_fallback_counts();
}

void set_dispatch_log(bool on) { g_dispatch_log.store(on); }

}  // namespace torch_fl
