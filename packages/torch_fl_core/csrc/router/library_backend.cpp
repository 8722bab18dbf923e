#include "router/library_backend.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "router/producer_order.h"

namespace torch_fl {
namespace {

class LibraryBackend final : public Backend {
 public:
  LibraryBackend(std::string name, std::string ns) : name_(std::move(name)), ns_(std::move(ns)) {}

  const std::string& name() const override { return name_; }

  bool has_kernel(const c10::OperatorHandle& op) const override { return lookup(op).has_value(); }

  void call(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) override {
    auto target = lookup(op);
    TORCH_CHECK(target.has_value(), "flagos backend '", name_, "' has no kernel ", ns_,
                "::", short_name(op.operator_name()), " for ", full_name(op.operator_name()));
    // No capture check: a vendor kernel drawing random numbers takes its seed through
    // torch_fl/philox.h, which gives it device words in a capture or refuses it by name.
    // A native producer: earlier unordered-producer work on the streams of
    // its devices must be done first (router/producer_order.h).
    order_native_producer_for_stack(op, *stack);
    // A kernel may decline a call it cannot serve (a dtype its SDK lacks) by
    // throwing c10::NotImplementedError before it has any effect; core then
    // serves the call with the CPU fallback, counted and logged like any
    // other fallback, so a census lists it.
    const size_t n = op.schema().arguments().size();
    std::vector<c10::IValue> args(stack->end() - static_cast<std::ptrdiff_t>(n), stack->end());
    try {
      target->redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), stack);
    } catch (const c10::NotImplementedError&) {
      torch::jit::drop(*stack, std::min(n, stack->size()));
      for (auto& a : args) stack->push_back(std::move(a));
      call_cpu_fallback(op, stack, /*counted=*/true);
    }
  }

 private:
  // The vendor's operator for `op`, if it exists with a PrivateUse1 kernel and
  // the same argument and return counts (it is registered with aten's schema).
  std::optional<c10::OperatorHandle> lookup(const c10::OperatorHandle& op) const {
    const std::string key = full_name(op.operator_name());
    {
      std::shared_lock<std::shared_mutex> lock(mutex_);
      auto it = cache_.find(key);
      if (it != cache_.end()) return it->second;
    }
    std::optional<c10::OperatorHandle> found;
    const auto& aten = op.operator_name();
    const auto sep = aten.name.find("::");
    const std::string base = sep == std::string::npos ? aten.name : aten.name.substr(sep + 2);
    auto handle = c10::Dispatcher::singleton().findOp(
        c10::OperatorName(ns_ + "::" + base, aten.overload_name));
    if (handle && handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1) &&
        handle->hasSchema() && op.hasSchema()) {
      const auto& a = op.schema();
      const auto& b = handle->schema();
      bool same =
          a.arguments().size() == b.arguments().size() && a.returns().size() == b.returns().size();
      for (size_t i = 0; same && i < a.arguments().size(); ++i) {
        same = a.arguments()[i].type()->str() == b.arguments()[i].type()->str();
      }
      if (same) found = *handle;
    }
    std::unique_lock<std::shared_mutex> lock(mutex_);
    cache_[key] = found;
    return found;
  }

  std::string name_;
  std::string ns_;
  mutable std::shared_mutex mutex_;
  mutable std::unordered_map<std::string, std::optional<c10::OperatorHandle>> cache_;
};

std::mutex& namespaces_mutex() {
  static std::mutex m;
  return m;
}
std::atomic<size_t>& namespace_count() {
  static std::atomic<size_t> n{0};
  return n;
}
std::vector<std::string>& namespaces() {
  static auto* v = new std::vector<std::string>();  // leaked: read during exit
  return *v;
}

}  // namespace

std::shared_ptr<Backend> make_library_backend(const std::string& name, const std::string& ns) {
  TORCH_CHECK(name.rfind("box:", 0) != 0 && name != "cpu" && name != "none",
              "flagos: backend name '", name, "' is reserved");
  TORCH_CHECK(!ns.empty() && ns != "aten" && ns.find("::") == std::string::npos,
              "flagos: a library backend needs an operator namespace of its own, got '", ns, "'");
  {
    std::lock_guard<std::mutex> lock(namespaces_mutex());
    namespaces().push_back(ns);
    namespace_count().store(namespaces().size(), std::memory_order_release);
  }
  return std::make_shared<LibraryBackend>(name, ns);
}

size_t library_namespace_count() { return namespace_count().load(std::memory_order_acquire); }

std::vector<std::string> library_namespaces() {
  std::lock_guard<std::mutex> lock(namespaces_mutex());
  return namespaces();
}

}  // namespace torch_fl
