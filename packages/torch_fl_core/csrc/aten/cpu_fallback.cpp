// The boxed CPU fallback for every operator flagos has no kernel for:
// ATen's cpu_fallback (copy in, compute on CPU, copy out) plus what it does
// not do for us: same-device checks, flagos generators, counting.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <cstdlib>
#include <iostream>
#include <mutex>
#include <unordered_set>

#include "aten/fallback_counter.h"
#include "glue/generator.h"

namespace torch_fl {
namespace {

std::mutex g_count_mutex;
std::map<std::string, int64_t>* g_counts = new std::map<std::string, int64_t>();

bool log_fallbacks() {
  static const bool on = [] {
    const char* v = std::getenv("FLAGOS_LOG");
    return v && std::string(v).find("fallback") != std::string::npos;
  }();
  return on;
}

// Ops whose CUDA kernels accept CPU index tensors beside device tensors.
bool accepts_cpu_tensors(const std::string& name) {
  static const std::unordered_set<std::string> ops = {
      "aten::index.Tensor", "aten::index_put_", "aten::_index_put_impl_", "aten::index_put"};
  return ops.count(name) > 0;
}

void check_devices(const c10::OperatorHandle& op, const torch::jit::Stack& args) {
  std::optional<c10::Device> flagos_device;
  std::optional<c10::Device> cpu_seen;
  auto visit = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    if (t.device().is_privateuseone()) {
      TORCH_CHECK(!flagos_device || *flagos_device == t.device(),
                  "Expected all tensors to be on the same device, but found at least two devices, ",
                  *flagos_device, " and ", t.device(), "! (when checking arguments for ",
                  op.schema().operator_name(), ")");
      flagos_device = t.device();
    } else if (t.device().is_cpu() && t.dim() > 0) {
      cpu_seen = t.device();
    }
  };
  for (const auto& v : args) {
    if (v.isTensor()) {
      visit(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList().vec()) visit(t);
    } else if (v.isOptionalTensorList()) {
      for (const auto& t : v.toOptionalTensorList().vec()) {
        if (t) visit(*t);
      }
    }
  }
  if (flagos_device && cpu_seen) {
    std::string name = op.schema().operator_name().name;
    if (!op.schema().overload_name().empty()) name += "." + op.schema().overload_name();
    TORCH_CHECK(accepts_cpu_tensors(name),
                "Expected all tensors to be on the same device, but found at least two devices, ",
                *flagos_device, " and cpu! (when checking arguments for ",
                op.schema().operator_name(), ")");
  }
}

// RNG ops take `Generator?`. The CPU kernel needs a CPU generator, so derive
// one deterministically from the flagos generator's (seed, offset) and advance
// the offset: a seeded flagos run is reproducible and get/set_rng_state work.
void substitute_generators(const c10::FunctionSchema& schema, torch::jit::Stack& args) {
  std::optional<c10::DeviceIndex> device;
  int64_t numel = 0;
  for (const auto& v : args) {
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().device().is_privateuseone()) {
      if (!device) device = v.toTensor().device().index();
      numel = std::max<int64_t>(numel, v.toTensor().numel());
    }
  }
  for (size_t i = 0; i < schema.arguments().size() && i < args.size(); ++i) {
    const auto& type = schema.arguments()[i].type();
    const bool is_gen = type->kind() == c10::TypeKind::GeneratorType ||
                        (type->kind() == c10::TypeKind::OptionalType &&
                         type->castRaw<c10::OptionalType>()->getElementType()->kind() ==
                             c10::TypeKind::GeneratorType);
    if (!is_gen) continue;
    at::Generator gen;
    if (args[i].isNone()) {
      // Factory-style RNG ops (randperm) without flagos tensor inputs: use the
      // current device's generator.
      gen = default_generator(device.value_or(-1));
    } else {
      gen = args[i].toGenerator();
      if (gen.device().is_cpu()) continue;
      TORCH_CHECK(gen.device().is_privateuseone(), "flagos: expected a flagos or CPU generator for ",
                  schema.operator_name(), ", got one for ", gen.device());
    }
    uint64_t seed = 0, offset = 0;
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      std::tie(seed, offset) =
          gen.get<FlagosGeneratorImpl>()->philox_engine_inputs(static_cast<uint64_t>(numel));
    }
    // splitmix64 of (seed, offset): distinct offsets give unrelated streams.
    uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (offset + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    args[i] = c10::IValue(at::make_generator<at::CPUGeneratorImpl>(z));
  }
}

void flagos_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  TORCH_INTERNAL_ASSERT(stack->size() >= num_args);
  std::string name = schema.operator_name().name;
  if (!schema.overload_name().empty()) name += "." + schema.overload_name();
  {
    torch::jit::Stack args(stack->end() - num_args, stack->end());
    check_devices(op, args);
  }
  for (const auto& arg : schema.arguments()) {
    if (arg.type()->kind() == c10::TypeKind::GeneratorType ||
        (arg.type()->kind() == c10::TypeKind::OptionalType &&
         arg.type()->castRaw<c10::OptionalType>()->getElementType()->kind() ==
             c10::TypeKind::GeneratorType)) {
      torch::jit::Stack args(stack->end() - num_args, stack->end());
      substitute_generators(schema, args);
      std::copy(args.begin(), args.end(), stack->end() - num_args);
      break;
    }
  }
  count_fallback(name);
  if (log_fallbacks()) std::cerr << "[flagos fallback] " << name << " -> cpu\n";
  // error_on_views: a view served by copying would silently break aliasing.
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&flagos_cpu_fallback>());
}

}  // namespace

void count_fallback(const std::string& op) {
  std::lock_guard<std::mutex> lock(g_count_mutex);
  ++(*g_counts)[op];
}

std::map<std::string, int64_t> fallback_counts() {
  std::lock_guard<std::mutex> lock(g_count_mutex);
  return *g_counts;
}

void reset_fallback_counts() {
  std::lock_guard<std::mutex> lock(g_count_mutex);
  g_counts->clear();
}

}  // namespace torch_fl
