#include "router/box_backend.h"

#include <ATen/ATen.h>
#include <c10/core/TensorImpl.h>

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>

#include "aten/stack_args.h"
#include "glue/caching_allocator.h"
#include "glue/runtime_access.h"
#include "glue/stream_pool.h"

namespace torch_fl {
namespace {

using torch::jit::Stack;

void release_storage_ref(void* ctx) { delete static_cast<c10::Storage*>(ctx); }
void release_grown(void* ctx) { delete static_cast<c10::DataPtr*>(ctx); }

// The allocator of alias storages. When a boxed kernel grows an out= alias
// (resize_ of a result), the new memory comes from the flagos pool of the
// owning device, so the router can hand it back to the flagos tensor without
// a copy.
class GrowAllocator final : public c10::Allocator {
 public:
  GrowAllocator(c10::DeviceIndex flagos_device, c10::Device target)
      : flagos_device_(flagos_device), target_(target) {}

  c10::DataPtr allocate(size_t n) override {
    CurrentDeviceScope scope(flagos_device_);
    auto* inner = new c10::DataPtr(caching_allocator()->allocate(n));
    return {inner->get(), inner, &release_grown, target_};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

 private:
  c10::DeviceIndex flagos_device_;
  c10::Device target_;
};

constexpr size_t kMaxDevices = 64;

// One GrowAllocator per (flagos device, target device type), created on first
// use and kept for the process. Lock-free lookup: this runs for every alias.
c10::Allocator* grow_allocator(c10::DeviceIndex flagos_device, c10::Device target) {
  static std::array<std::atomic<GrowAllocator*>, kMaxDevices * 4> table{};
  TORCH_CHECK(flagos_device >= 0 && static_cast<size_t>(flagos_device) < kMaxDevices,
              "flagos box: device index ", static_cast<int>(flagos_device), " out of range");
  const size_t slot = static_cast<size_t>(flagos_device) * 4 +
                      (target.type() == c10::DeviceType::CPU ? 0 : 1 + (target.index() >= 0 ? 0 : 1));
  GrowAllocator* a = table[slot].load(std::memory_order_acquire);
  if (a) return a;
  auto* fresh = new GrowAllocator(flagos_device, target);
  if (table[slot].compare_exchange_strong(a, fresh)) return fresh;
  delete fresh;  // another thread won
  return a;
}

c10::Device target_device(c10::DeviceType type, c10::DeviceIndex flagos_index) {
  return type == c10::DeviceType::CPU ? c10::Device(c10::DeviceType::CPU)
                                      : c10::Device(type, flagos_index);
}

at::Tensor make_alias(const at::Tensor& t, c10::Device device, c10::DispatchKey key) {
  const c10::Storage& base = t.storage();
  c10::DataPtr dp(base.mutable_data(), new c10::Storage(base), &release_storage_ref, device);
  c10::Storage storage(c10::Storage::use_byte_size_t(), base.nbytes(), std::move(dp),
                       grow_allocator(t.device().index(), device), /*resizable=*/true);
  auto impl =
      c10::make_intrusive<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(key), t.dtype());
  impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  at::Tensor alias(std::move(impl));
  alias._set_conj(t.is_conj());
  alias._set_neg(t.is_neg());
  return alias;
}

// A flagos tensor over `storage` with `like`'s geometry and bits.
at::Tensor flagos_over(c10::Storage storage, const at::Tensor& like) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), like.dtype());
  impl->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  at::Tensor out(std::move(impl));
  out._set_conj(like.is_conj());
  out._set_neg(like.is_neg());
  return out;
}

// The flagos memory of a storage grown through GrowAllocator, taken over.
std::optional<c10::DataPtr> take_grown(const c10::Storage& s) {
  auto* inner = s.data_ptr().cast_context<c10::DataPtr>(&release_grown);
  if (!inner) return std::nullopt;
  return std::move(*inner);
}

class BoxBackend final : public Backend {
 public:
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
    const c10::Device target = target_device(type_, device);
    CurrentDeviceScope scope(device);
    if (type_ == c10::DeviceType::CPU) {
      // A host kernel cannot enqueue on the flagos stream: wait for the
      // stream's earlier work first (ARCHITECTURE.md section 4).
      TFL_CALL(device, stream_synchronize, native_stream(current_stream(device)));
    }
    if (has_generator_argument(schema)) bridge_generators(schema, args_begin, stack->end());

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
    const auto ret_begin = stack->end() - static_cast<std::ptrdiff_t>(num_returns);
    for (size_t i = 0; i < num_returns; ++i) {
      c10::IValue& ret = *(ret_begin + static_cast<std::ptrdiff_t>(i));
      ret = from_target(schema, schema.returns()[i], ret, originals, device);
    }
  }

 private:
  c10::IValue to_target(const c10::IValue& v, c10::Device target) const {
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      return t.defined() && t.device().is_privateuseone() ? make_alias(t, target, key_) : v;
    }
    if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorList().vec()) {
        out.push_back(t.defined() && t.device().is_privateuseone() ? make_alias(t, target, key_) : t);
      }
      return out;
    }
    if (v.isOptionalTensorList()) {
      c10::List<std::optional<at::Tensor>> out;
      for (const auto& t : v.toOptionalTensorList().vec()) {
        out.push_back(t && t->defined() && t->device().is_privateuseone()
                          ? std::optional<at::Tensor>(make_alias(*t, target, key_))
                          : t);
      }
      return out;
    }
    if (v.isDevice() && v.toDevice().is_privateuseone()) return c10::IValue(target);
    return v;
  }

  // An out=/in-place kernel may have resized its output alias; the caller's
  // flagos tensor takes the new geometry (and the grown memory, no copy).
  static void adopt_mutated_arguments(const c10::FunctionSchema& schema,
                                      const std::vector<c10::IValue>& originals,
                                      const std::vector<c10::IValue>& aliases) {
    for (size_t i = 0; i < schema.arguments().size(); ++i) {
      const auto* info = schema.arguments()[i].alias_info();
      if (!info || !info->isWrite()) continue;
      if (originals[i].isTensor() && aliases[i].isTensor()) {
        const at::Tensor& base = originals[i].toTensor();
        if (base.defined() && base.device().is_privateuseone()) {
          adopt_geometry(base, aliases[i].toTensor());
        }
      } else if (originals[i].isTensorList() && aliases[i].isTensorList()) {
        const auto bases = originals[i].toTensorList().vec();
        const auto views = aliases[i].toTensorList().vec();
        for (size_t j = 0; j < bases.size() && j < views.size(); ++j) {
          if (bases[j].defined() && bases[j].device().is_privateuseone()) {
            adopt_geometry(bases[j], views[j]);
          }
        }
      }
    }
  }

  c10::IValue from_target(const c10::FunctionSchema& schema, const c10::Argument& ret,
                          const c10::IValue& v, const std::vector<c10::IValue>& originals,
                          c10::DeviceIndex device) const {
    if (v.isTensor()) return c10::IValue(convert_tensor(schema, ret, v.toTensor(), originals, device));
    if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorList().vec()) {
        out.push_back(convert_tensor(schema, ret, t, originals, device));
      }
      return out;
    }
    return v;
  }

  at::Tensor convert_tensor(const c10::FunctionSchema& schema, const c10::Argument& ret,
                            const at::Tensor& t, const std::vector<c10::IValue>& originals,
                            c10::DeviceIndex device) const {
    if (!t.defined() || t.device().is_privateuseone()) return t;
    const auto* info = ret.alias_info();
    if (info) {
      // Returns that alias an argument: in-place/out= give back the caller's
      // own tensor object; views become flagos views of the caller's storage.
      for (size_t i = 0; i < schema.arguments().size(); ++i) {
        const auto* ainfo = schema.arguments()[i].alias_info();
        if (!ainfo || ainfo->beforeSets() != info->beforeSets()) continue;
        const c10::IValue& orig = originals[i];
        if (orig.isTensor() && orig.toTensor().defined()) {
          const at::Tensor& base = orig.toTensor();
          if (info->isWrite()) return base;  // geometry adopted already
          if (t.storage().data() == base.storage().data()) {
            return flagos_over(base.storage(), t);
          }
        }
        if (orig.isTensorList()) {
          for (const at::Tensor& base : orig.toTensorList().vec()) {
            if (base.defined() && t.storage().data() == base.storage().data()) {
              return info->isWrite() ? base : flagos_over(base.storage(), t);
            }
          }
        }
      }
    }
    // A fresh result: memory the kernel grew through GrowAllocator is already
    // flagos memory; anything else is copied into a flagos allocation.
    if (auto grown = take_grown(t.storage())) {
      c10::Storage s(c10::Storage::use_byte_size_t(), t.storage().nbytes(), std::move(*grown),
                     caching_allocator(), true);
      return flagos_over(std::move(s), t);
    }
    return copy_to_flagos(t, device);
  }

  // The out= alias may have been resized by the kernel (possibly into grown
  // memory): mirror that onto the caller's flagos tensor.
  static void adopt_geometry(const at::Tensor& base, const at::Tensor& alias) {
    c10::TensorImpl* impl = base.unsafeGetTensorImpl();
    const c10::Storage& astorage = alias.storage();
    if (astorage.data() != base.storage().data()) {
      if (auto grown = take_grown(astorage)) {
        c10::Storage s = base.storage();
        s.set_data_ptr_noswap(std::move(*grown));
        s.set_nbytes(astorage.nbytes());
      } else {
        TORCH_CHECK(false, "flagos box: kernel replaced the storage of an output with memory "
                           "that is not flagos memory");
      }
    }
    if (base.sizes() != alias.sizes() || base.strides() != alias.strides() ||
        base.storage_offset() != alias.storage_offset()) {
      impl->set_sizes_and_strides(alias.sizes(), alias.strides(), alias.storage_offset());
    }
  }

  at::Tensor copy_to_flagos(const at::Tensor& t, c10::DeviceIndex device) const {
    at::Tensor src = t;
    at::Tensor out = at::empty_strided(
        src.sizes(), src.is_non_overlapping_and_dense() ? src.strides() : src.contiguous().strides(),
        src.options().device(c10::Device(c10::kPrivateUse1, device)));
    if (!src.is_non_overlapping_and_dense()) src = src.contiguous();
    if (type_ == c10::DeviceType::CPU && has_capability(TFL_CAP_HOST_ADDRESSABLE_MEMORY)) {
      // The stream was synchronized before the kernel ran and nothing was
      // queued since, so a host copy into device memory is ordered.
      if (src.numel() > 0) {
        std::memcpy(out.data_ptr(), src.data_ptr(), src.numel() * src.element_size());
      }
    } else {
      out.copy_(src);
    }
    out._set_conj(t.is_conj());
    out._set_neg(t.is_neg());
    return out;
  }

  c10::DispatchKey key_;
  c10::DeviceType type_;
  std::string name_;
};

}  // namespace

std::shared_ptr<Backend> make_box_backend(c10::DispatchKey target, c10::DeviceType type) {
  return std::make_shared<BoxBackend>(target, type);
}

at::Tensor alias_as(const at::Tensor& t, c10::Device device) {
  TORCH_CHECK(t.device().is_privateuseone(), "alias_as: expected a flagos tensor, got ", t.device());
  const c10::DispatchKey key = c10::computeDispatchKey(std::nullopt, std::nullopt, device);
  const c10::Device target = target_device(device.type(), t.device().index());
  return make_alias(t, target, key);
}

}  // namespace torch_fl
