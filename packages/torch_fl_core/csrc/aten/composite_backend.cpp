#include "aten/composite_backend.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <memory>

#include "glue/op_names.h"
#include "router/backend.h"
#include "router/router.h"

namespace torch_fl {
namespace {

struct Entry {
  std::vector<c10::ScalarType> dtypes;
  CompositeKernel kernel;
};

// Written only by static initialisers (each kernel file's Registrar), before
// any call can read it: lookups take no lock.
std::map<std::string, Entry>& registry() {
  static auto* r = new std::map<std::string, Entry>();
  return *r;
}

const Entry* find_entry(const c10::OperatorHandle& op) {
  auto it = registry().find(full_name(op.operator_name()));
  return it == registry().end() ? nullptr : &it->second;
}

class CompositeBackend final : public Backend {
 public:
  const std::string& name() const override { return name_; }
  bool has_kernel(const c10::OperatorHandle& op) const override {
    return find_entry(op) != nullptr;
  }
  void call(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) override {
    const Entry* entry = find_entry(op);
    TORCH_CHECK(entry != nullptr, "flagos backend 'composite' has no kernel for ",
                full_name(op.operator_name()));
    const auto dtype = first_tensor_dtype(op, *stack);  // what the router chose by
    const bool served = dtype && std::find(entry->dtypes.begin(), entry->dtypes.end(), *dtype) !=
                                     entry->dtypes.end();
    if (!served) {
      call_cpu_fallback(op, stack, /*counted=*/true);
      return;
    }
    entry->kernel(op, stack);
  }

 private:
  std::string name_ = "composite";
};

struct Registrar {
  Registrar() { register_backend(std::make_shared<CompositeBackend>()); }
} registrar;

}  // namespace

void register_composite_kernel(const std::string& op, std::vector<c10::ScalarType> dtypes,
                               CompositeKernel kernel) {
  registry()[op] = Entry{std::move(dtypes), kernel};
}

std::vector<std::pair<std::string, std::vector<std::string>>> composite_kernels() {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const auto& [op, entry] : registry()) {
    std::vector<std::string> names;
    for (auto t : entry.dtypes) names.emplace_back(c10::getDtypeNames(t).first);
    out.emplace_back(op, std::move(names));
  }
  return out;
}

}  // namespace torch_fl
