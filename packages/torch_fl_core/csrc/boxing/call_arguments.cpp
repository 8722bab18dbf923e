#include "boxing/call_arguments.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/MemoryOverlap.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>

#include "glue/generator.h"
#include "glue/runtime_access.h"

namespace torch_fl::boxing {

bool is_generator_type(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::GeneratorType) return true;
  return type->kind() == c10::TypeKind::OptionalType &&
         type->castRaw<c10::OptionalType>()->getElementType()->kind() ==
             c10::TypeKind::GeneratorType;
}

namespace {

// Overload -> the arguments CUDA's kernel accepts as CPU tensors. Read only
// on the rare path (a CPU tensor beside flagos ones); replaced whole.
std::mutex g_rules_mutex;
std::shared_ptr<const std::map<std::string, std::vector<std::string>>> g_rules =
    std::make_shared<const std::map<std::string, std::vector<std::string>>>();

bool accepts_cpu_tensor(const c10::FunctionSchema& schema, size_t position) {
  std::shared_ptr<const std::map<std::string, std::vector<std::string>>> rules;
  {
    std::lock_guard<std::mutex> lock(g_rules_mutex);
    rules = g_rules;
  }
  const auto& name = schema.operator_name();
  const std::string full =
      name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
  const auto it = rules->find(full);
  if (it == rules->end() || position >= schema.arguments().size()) return false;
  const std::string& arg = schema.arguments()[position].name();
  return std::find(it->second.begin(), it->second.end(), arg) != it->second.end();
}

template <typename F>
void for_each_tensor(torch::jit::Stack::const_iterator begin, torch::jit::Stack::const_iterator end,
                     F&& f) {
  for (auto it = begin; it != end; ++it) {
    const c10::IValue& v = *it;
    if (v.isTensor()) {
      f(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList().vec()) f(t);
    } else if (v.isOptionalTensorList()) {
      for (const auto& t : v.toOptionalTensorList().vec()) {
        if (t) f(*t);
      }
    }
  }
}

}  // namespace

bool has_generator_argument(const c10::FunctionSchema& schema) {
  for (const auto& arg : schema.arguments()) {
    if (is_generator_type(arg.type())) return true;
  }
  return false;
}

void throw_two_devices(const c10::OperatorHandle& op, c10::DeviceIndex a, c10::DeviceIndex b) {
  TORCH_CHECK(false,
              "Expected all tensors to be on the same device, but found at least two devices, "
              "flagos:",
              static_cast<int>(a), " and flagos:", static_cast<int>(b),
              "! (when checking arguments for ", op.schema().operator_name(), ")");
}

bool has_aliased_write(const c10::FunctionSchema& schema, torch::jit::Stack::const_iterator begin,
                       torch::jit::Stack::const_iterator end) {
  // Every flagos tensor argument with its storage, marked when written; then
  // only tensors that share a storage are compared (sorted: a foreach over a
  // model's parameters stays n log n, not n^2).
  struct Arg {
    const c10::StorageImpl* storage;
    c10::TensorImpl* impl;
    bool written;
  };
  c10::SmallVector<Arg, 8> flagos;
  const auto& args = schema.arguments();
  bool any_written = false;
  size_t i = 0;
  for (auto it = begin; it != end; ++it, ++i) {
    const auto* info = i < args.size() ? args[i].alias_info() : nullptr;
    const bool written = info != nullptr && info->isWrite();
    for_each_tensor(it, it + 1, [&](const at::Tensor& t) {
      if (!t.defined() || !t.device().is_privateuseone() || t.numel() == 0) return;
      c10::TensorImpl* impl = t.unsafeGetTensorImpl();
      flagos.push_back(Arg{impl->unsafe_storage().unsafeGetStorageImpl(), impl, written});
      any_written = any_written || written;
    });
  }
  if (!any_written) return false;
  for (const Arg& a : flagos) {
    if (a.written && at::has_internal_overlap(a.impl) == at::MemOverlap::Yes) return true;
  }
  if (flagos.size() < 2) return false;
  std::sort(flagos.begin(), flagos.end(),
            [](const Arg& x, const Arg& y) { return x.storage < y.storage; });
  for (size_t lo = 0; lo < flagos.size();) {
    size_t hi = lo + 1;
    while (hi < flagos.size() && flagos[hi].storage == flagos[lo].storage) ++hi;
    for (size_t w = lo; w < hi; ++w) {
      if (!flagos[w].written) continue;
      for (size_t o = lo; o < hi; ++o) {
        // The same tensor as a written argument and an input counts too: ops
        // that refuse any overlap (scatter_(0, i, self), gather(..., out=self))
        // and kernels that read what they write (addmm_(a, a)) need CPU to see
        // one memory, as the storage-exact path gives it.
        if (o != w &&
            at::get_overlap_status(flagos[w].impl, flagos[o].impl) != at::MemOverlapStatus::No) {
          return true;
        }
      }
    }
    lo = hi;
  }
  return false;
}

void check_same_device(const c10::OperatorHandle& op, torch::jit::Stack::const_iterator begin,
                       torch::jit::Stack::const_iterator end) {
  std::optional<c10::Device> flagos_device;
  uint64_t cpu_positions = 0;
  bool cpu_written = false;
  const auto& args = op.schema().arguments();
  size_t i = 0;
  for (auto it = begin; it != end; ++it, ++i) {
    const auto* info = i < args.size() ? args[i].alias_info() : nullptr;
    const bool written = info != nullptr && info->isWrite();
    for_each_tensor(it, it + 1, [&](const at::Tensor& t) {
      if (!t.defined()) return;
      if (t.device().is_privateuseone()) {
        TORCH_CHECK(!flagos_device || *flagos_device == t.device(),
                    "Expected all tensors to be on the same device, but found at least two "
                    "devices, ",
                    *flagos_device, " and ", t.device(), "! (when checking arguments for ",
                    op.schema().operator_name(), ")");
        flagos_device = t.device();
      } else if (t.device().is_cpu()) {
        // A 0-dim CPU tensor is a scalar operand, as on CUDA; written, it is
        // a CPU output of a device computation, which CUDA refuses.
        cpu_written = cpu_written || written;
        if (t.dim() > 0) cpu_positions |= argument_bit(i);
      }
    });
  }
  if (flagos_device && cpu_written) throw_flagos_and_cpu(op, flagos_device->index());
  if (flagos_device && cpu_positions != 0) {
    check_cpu_tensors_allowed(op, flagos_device->index(), cpu_positions);
  }
}

std::optional<c10::DeviceIndex> first_flagos_device(torch::jit::Stack::const_iterator begin,
                                                    torch::jit::Stack::const_iterator end) {
  std::optional<c10::DeviceIndex> device;
  for_each_tensor(begin, end, [&](const at::Tensor& t) {
    if (!device && t.defined() && t.device().is_privateuseone()) device = t.device().index();
  });
  return device;
}

void bridge_generator_value(const c10::FunctionSchema& schema, c10::IValue& value,
                            std::optional<c10::DeviceIndex> device, int64_t numel) {
  at::Generator gen;
  if (value.isNone()) {
    // Factory-style RNG ops (randperm.out) may have no flagos tensor input
    // but an output on flagos; the device's default generator serves them.
    gen = default_generator(device.value_or(-1));
  } else {
    gen = value.toGenerator();
    // As on CUDA: a draw for flagos tensors needs a flagos generator, and a
    // flagos generator cannot serve a draw on another device.
    TORCH_CHECK(!device || gen.device().is_privateuseone(),
                "Expected a 'flagos' device type for generator but found '", gen.device().type(),
                "' (", schema.operator_name(), ")");
    TORCH_CHECK(device || !gen.device().is_privateuseone(),
                "Expected a 'cpu' device type for generator but found 'flagos' (",
                schema.operator_name(), ")");
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
  value = c10::IValue(at::make_generator<at::CPUGeneratorImpl>(z));
}

void bridge_generators(const c10::FunctionSchema& schema, torch::jit::Stack::iterator begin,
                       torch::jit::Stack::iterator end) {
  std::optional<c10::DeviceIndex> device;
  int64_t numel = 0;
  for_each_tensor(begin, end, [&](const at::Tensor& t) {
    if (t.defined() && t.device().is_privateuseone()) {
      if (!device) device = t.device().index();
      numel = std::max<int64_t>(numel, t.numel());
    }
  });
  for (auto it = begin; it != end && !device; ++it) {
    // Factories (normal.float_float(..., device=flagos)) name the device.
    if (it->isDevice() && it->toDevice().is_privateuseone()) {
      device = it->toDevice().has_index() ? it->toDevice().index() : current_device();
    }
  }
  const auto& args = schema.arguments();
  size_t i = 0;
  for (auto it = begin; it != end && i < args.size(); ++it, ++i) {
    if (is_generator_type(args[i].type())) bridge_generator_value(schema, *it, device, numel);
  }
}

void mirror_generator_value(c10::IValue& value) {
  if (value.isNone()) return;
  at::Generator gen = value.toGenerator();
  if (!gen.device().is_privateuseone()) return;  // the kernel's own device check reports it
  const at::Generator& mirror = gen.get<FlagosGeneratorImpl>()->mirror();
  TORCH_CHECK(mirror.defined(), "flagos: generator of ", gen.device(),
              " has no mirrored generator (the runtime is not a delegate runtime)");
  value = c10::IValue(mirror);
}

void mirror_generators(const c10::FunctionSchema& schema, torch::jit::Stack::iterator begin,
                       torch::jit::Stack::iterator end) {
  const auto& args = schema.arguments();
  size_t i = 0;
  for (auto it = begin; it != end && i < args.size(); ++it, ++i) {
    if (is_generator_type(args[i].type())) mirror_generator_value(*it);
  }
}

bool writes_tensor(const c10::FunctionSchema& schema) {
  for (const auto& arg : schema.arguments()) {
    if (arg.alias_info() != nullptr && arg.alias_info()->isWrite()) return true;
  }
  return false;
}

void check_written_not_cpu(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const auto& args = op.schema().arguments();
  const auto begin = stack.end() - static_cast<std::ptrdiff_t>(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const auto* info = args[i].alias_info();
    if (info == nullptr || !info->isWrite()) continue;
    const c10::IValue& v = *(begin + static_cast<std::ptrdiff_t>(i));
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().device().is_cpu()) {
      // Only beside flagos tensors: a flagos generator for a CPU draw gets the
      // generator's own error from the backend.
      if (const auto device = first_flagos_device(begin, stack.end())) {
        throw_flagos_and_cpu(op, *device);
      }
    }
  }
}

void throw_flagos_and_cpu(const c10::OperatorHandle& op, c10::DeviceIndex device) {
  TORCH_CHECK(false,
              "Expected all tensors to be on the same device, but found at least two devices, "
              "flagos:",
              static_cast<int>(device), " and cpu! (when checking arguments for ",
              op.schema().operator_name(), ")");
}

void check_cpu_tensors_allowed(const c10::OperatorHandle& op, c10::DeviceIndex device,
                               uint64_t positions) {
  const auto& schema = op.schema();
  for (size_t i = 0; i < 64 && positions != 0; ++i) {
    if ((positions & argument_bit(i)) == 0) continue;
    positions &= ~argument_bit(i);
    if (i == 63 || !accepts_cpu_tensor(schema, i)) throw_flagos_and_cpu(op, device);
  }
}

void set_cpu_argument_rules(std::map<std::string, std::vector<std::string>> rules) {
  auto fresh =
      std::make_shared<const std::map<std::string, std::vector<std::string>>>(std::move(rules));
  std::lock_guard<std::mutex> lock(g_rules_mutex);
  g_rules = std::move(fresh);
}

}  // namespace torch_fl::boxing
