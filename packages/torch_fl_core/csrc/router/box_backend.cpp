#include "router/box_backend.h"

#include <ATen/ATen.h>

#include "aten/stack_args.h"
#include "glue/runtime_access.h"
#include "glue/stream_pool.h"
#include "router/box_alias.h"

namespace torch_fl {
namespace {

using torch::jit::Stack;

class BoxBackend final : public Backend {
 public:
  std::optional<std::pair<c10::DispatchKey, c10::DeviceType>> box_target() const override {
    return std::make_pair(key_, type_);
  }

  BoxBackend(c10::DispatchKey key, c10::DeviceType type)
      : key_(key), type_(type), name_("box:" + std::string(c10::DeviceTypeName(type, true))) {}

  const std::string& name() const override { return name_; }

  // Composite kernels that serve the key count: redispatching to it runs them
  // on the alias views (e.g. abs -> abs.out on CPU).
  bool has_kernel(const c10::OperatorHandle& op) const override {
    return op.hasComputedKernelForDispatchKey(key_);
  }

  void call(const c10::OperatorHandle& op, c10::DispatchKeySet, Stack* stack) override {
    const auto& schema = op.schema();
    const size_t num_args = schema.arguments().size();
    const auto args_begin = stack->end() - static_cast<std::ptrdiff_t>(num_args);
    check_same_device(op, args_begin, stack->end());
    const std::optional<c10::DeviceIndex> found = first_flagos_device(args_begin, stack->end());
    const c10::DeviceIndex device = found ? *found : current_device();
    const c10::Device target = box::target_device(type_, device);
    CurrentDeviceScope scope(device);
    std::optional<box::HostResultScope> results;
    if (type_ == c10::DeviceType::CPU) {
      // A host kernel cannot enqueue on the flagos stream: wait for the
      // stream's earlier work first (ARCHITECTURE.md section 4).
      const c10::Stream stream = current_stream(device);
      TFL_CALL(device, stream_synchronize, native_stream(stream));
      // Its fresh results come from the flagos pool, on this stream (passed
      // on so the allocation does not look it up a second time).
      results.emplace(device, stream.id());
    }
    if (has_generator_argument(schema)) {
      if (type_ == c10::DeviceType::CPU) {
        bridge_generators(schema, args_begin, stack->end());
      } else {
        mirror_generators(schema, args_begin, stack->end());
      }
    }

    // Originals are kept for the return mapping; the stack gets alias views.
    std::vector<c10::IValue> originals(args_begin, stack->end());
    std::vector<c10::IValue> aliases;
    aliases.reserve(num_args);
    for (auto it = args_begin; it != stack->end(); ++it) {
      *it = to_target(*it, target);
      aliases.push_back(*it);
    }

    op.redispatchBoxed(c10::DispatchKeySet(key_), stack);

    const size_t num_returns = schema.returns().size();
    TORCH_INTERNAL_ASSERT(stack->size() >= num_returns);
    adopt_mutated_arguments(schema, originals, aliases);
    std::vector<const at::Tensor*> bases;
    for (const auto& v : originals) {
      if (v.isTensor()) bases.push_back(&v.toTensor());
    }
    const auto ret_begin = stack->end() - static_cast<std::ptrdiff_t>(num_returns);
    for (size_t i = 0; i < num_returns; ++i) {
      c10::IValue& ret = *(ret_begin + static_cast<std::ptrdiff_t>(i));
      ret = from_target(schema, schema.returns()[i], ret, originals, bases, device);
    }
  }

 private:
  c10::IValue to_target(const c10::IValue& v, c10::Device target) const {
    auto alias = [&](const at::Tensor& t) {
      return t.defined() && t.device().is_privateuseone() ? box::call_alias(t, target, key_) : t;
    };
    if (v.isTensor()) return alias(v.toTensor());
    if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorList().vec()) out.push_back(alias(t));
      return out;
    }
    if (v.isOptionalTensorList()) {
      c10::List<std::optional<at::Tensor>> out;
      for (const auto& t : v.toOptionalTensorList().vec()) {
        out.push_back(t ? std::optional<at::Tensor>(alias(*t)) : t);
      }
      return out;
    }
    if (v.isDevice() && v.toDevice().is_privateuseone()) return c10::IValue(target);
    return v;
  }

  static void adopt_mutated_arguments(const c10::FunctionSchema& schema,
                                      const std::vector<c10::IValue>& originals,
                                      const std::vector<c10::IValue>& aliases) {
    for (size_t i = 0; i < schema.arguments().size(); ++i) {
      const auto* info = schema.arguments()[i].alias_info();
      if (!info || !info->isWrite()) continue;
      if (originals[i].isTensor() && aliases[i].isTensor()) {
        const at::Tensor& base = originals[i].toTensor();
        if (base.defined() && base.device().is_privateuseone()) {
          box::adopt_geometry(base, aliases[i].toTensor());
        }
      } else if (originals[i].isTensorList() && aliases[i].isTensorList()) {
        const auto bases = originals[i].toTensorList().vec();
        const auto views = aliases[i].toTensorList().vec();
        for (size_t j = 0; j < bases.size() && j < views.size(); ++j) {
          if (bases[j].defined() && bases[j].device().is_privateuseone()) {
            box::adopt_geometry(bases[j], views[j]);
          }
        }
      }
    }
  }

  c10::IValue from_target(const c10::FunctionSchema& schema, const c10::Argument& ret,
                          const c10::IValue& v, const std::vector<c10::IValue>& originals,
                          const std::vector<const at::Tensor*>& bases,
                          c10::DeviceIndex device) const {
    auto convert = [&](const at::Tensor& t) -> at::Tensor {
      if (!t.defined() || t.device().is_privateuseone()) return t;
      if (const auto* info = ret.alias_info(); info && info->isWrite()) {
        // In-place/out= returns give back the caller's own tensor object.
        for (size_t i = 0; i < schema.arguments().size(); ++i) {
          const auto* ainfo = schema.arguments()[i].alias_info();
          if (ainfo && ainfo->beforeSets() == info->beforeSets() && originals[i].isTensor()) {
            return originals[i].toTensor();
          }
        }
      }
      return box::view_of_input_or_fresh(t, bases.data(), bases.size(), device, type_);
    };
    if (v.isTensor()) return convert(v.toTensor());
    if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorList().vec()) out.push_back(convert(t));
      return out;
    }
    return v;
  }

  c10::DispatchKey key_;
  c10::DeviceType type_;
  std::string name_;
};

}  // namespace

std::shared_ptr<Backend> make_box_backend(c10::DispatchKey target, c10::DeviceType type) {
  return std::make_shared<BoxBackend>(target, type);
}

}  // namespace torch_fl
