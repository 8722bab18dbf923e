#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>

#include "router/backend.h"

namespace torch_fl {
namespace {

std::mutex g_mutex;
std::atomic<CpuFallbackFn> g_cpu_fallback{nullptr};
std::unordered_map<std::string, std::shared_ptr<Backend>>& registry() {
  static auto* r = new std::unordered_map<std::string, std::shared_ptr<Backend>>();
  return *r;
}

}  // namespace

std::string canonical_backend_name(const std::string& name) {
  return name == "none" ? "cpu" : name;
}

void register_backend(std::shared_ptr<Backend> backend) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const std::string name = backend->name();
  TORCH_CHECK(name != "none", "flagos: 'none' is reserved (an alias of the cpu backend)");
  registry()[name] = std::move(backend);
}

std::shared_ptr<Backend> find_backend(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = registry().find(canonical_backend_name(name));
  return it == registry().end() ? nullptr : it->second;
}

std::vector<std::string> backend_names() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<std::string> names;
  for (const auto& kv : registry()) names.push_back(kv.first);
  std::sort(names.begin(), names.end());
  return names;
}

const std::vector<std::string>& core_native_ops() {
  // Whatever has a PrivateUse1 kernel before the router installs anything is
  // core's own (csrc/aten/*). The router computes this before its first
  // registration (router_install calls it first), so routes never shadow it.
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> out;
    for (const auto& name : c10::Dispatcher::singleton().getAllOpNames()) {
      auto handle = c10::Dispatcher::singleton().findOp(name);
      // Only aten: torch itself registers c10d ops for PrivateUse1.
      if (name.name.rfind("aten::", 0) == 0 && handle &&
          handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) {
        out.push_back(full_name(name));
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }();
  return ops;
}

void set_cpu_fallback(CpuFallbackFn fn) { g_cpu_fallback.store(fn, std::memory_order_release); }

void call_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, bool counted) {
  const CpuFallbackFn fn = g_cpu_fallback.load(std::memory_order_acquire);
  TORCH_INTERNAL_ASSERT(fn != nullptr, "flagos: the CPU fallback is not registered");
  fn(op, stack, counted);
}

}  // namespace torch_fl
