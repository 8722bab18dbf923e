// The boxed CPU fallback for every operator flagos has no kernel for (and
// the `cpu` backend of route tables): ATen's cpu_fallback (copy in, compute on
// CPU, copy out) plus what it does not do for us: same-device checks, flagos
// generators, counting and logging, and calls whose arguments share memory.
#include "aten/cpu_fallback.h"

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <atomic>
#include <iostream>

#include "boxing/call_arguments.h"
#include "glue/graph_capture.h"
#include "profiler/route_scope.h"
#include "router/backend.h"
#include "router/fallback_counts.h"

namespace torch_fl {
namespace {

std::atomic<bool> g_log{false};

void flagos_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  // Unrouted operators: the route (the CPU fallback) as a profiler row too.
  static const std::string kBackend = "cpu";
  profiler::RouteScope scope(kBackend, op);
  run_cpu_fallback(op, stack, /*count=*/true);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&flagos_cpu_fallback>());
}

// The `cpu` (alias `none`) backend of route tables: the same fallback, counted
// by the router instead.
class CpuFallbackBackend final : public Backend {
 public:
  const std::string& name() const override { return name_; }
  bool has_kernel(const c10::OperatorHandle&) const override { return true; }
  void call(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) override {
    run_cpu_fallback(op, stack, /*count=*/false);
  }

 private:
  std::string name_ = "cpu";
};

struct Registrar {
  Registrar() {
    register_backend(std::make_shared<CpuFallbackBackend>());
    set_cpu_fallback(&run_cpu_fallback);
  }
} registrar;

// ATen's cpu_fallback returns results to the device of the FIRST tensor
// argument. When that is a CPU scalar (`1 - t` is sub.Tensor(wrapped 1, t)),
// results would land on the CPU: move such leading CPU 0-dim tensors to the
// call's flagos device first, keeping their wrapped-number flag (type
// promotion treats Python scalars differently from 0-dim tensors).
void move_leading_cpu_scalars(torch::jit::Stack::iterator begin, torch::jit::Stack::iterator end) {
  const auto device = boxing::first_flagos_device(begin, end);
  if (!device) return;
  for (auto it = begin; it != end; ++it) {
    if (!it->isTensor()) continue;
    const at::Tensor t = it->toTensor();
    if (!t.defined()) continue;
    if (!t.device().is_cpu() || t.dim() != 0) return;  // the first tensor decides; done
    at::Tensor moved = t.to(c10::Device(c10::kPrivateUse1, *device));
    moved.unsafeGetTensorImpl()->set_wrapped_number(t.unsafeGetTensorImpl()->is_wrapped_number());
    *it = moved;
  }
}

// ATen's fallback copies a `Tensor?[]` argument to the CPU only when the list's element type is
// the one its C++ signature makes (IValue::isOptionalTensorList compares type pointers). A list
// the TorchScript interpreter built (prim::ListConstruct) holds the same elements under its own
// type object, so ATen would pass its flagos tensors to the CPU kernel untouched, and the kernel's
// inner call (index_put_ -> _index_put_impl_) would come back to flagos with CPU arguments beside
// them. Such lists are rebuilt as the typed list the signature names.
void retype_optional_tensor_lists(const c10::FunctionSchema& schema,
                                  torch::jit::Stack::iterator begin,
                                  torch::jit::Stack::iterator end) {
  const auto& args = schema.arguments();
  size_t i = 0;
  for (auto it = begin; it != end && i < args.size(); ++it, ++i) {
    if (!it->isList() || it->isOptionalTensorList() || it->isTensorList()) continue;
    const auto list = args[i].type()->castRaw<c10::ListType>();
    const auto element = list != nullptr ? list->getElementType()->castRaw<c10::OptionalType>()
                                         : nullptr;
    if (element == nullptr || element->getElementType()->kind() != c10::TypeKind::TensorType)
      continue;
    c10::List<std::optional<at::Tensor>> typed;
    for (const c10::IValue& e : it->toListRef()) {
      typed.push_back(e.isNone() ? std::nullopt : std::optional<at::Tensor>(e.toTensor()));
    }
    *it = c10::IValue(std::move(typed));
  }
}

// native_batch_norm updates running_mean/running_var in training without
// declaring it in its schema, so the generic fallback (which copies back only
// declared mutations) would drop the update. _native_batch_norm_legit is the
// same kernel with the mutation declared: serve the call through it.
bool batch_norm_through_legit(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  static const c10::OperatorName name("aten::native_batch_norm", "");
  if (op.operator_name() != name) return false;
  const size_t n = op.schema().arguments().size();
  auto args = stack->end() - static_cast<std::ptrdiff_t>(n);
  // (input, weight?, bias?, running_mean?, running_var?, training, momentum, eps)
  const bool training = args[5].toBool();
  if (!training || args[3].isNone() || args[4].isNone()) return false;
  static const auto legit =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::_native_batch_norm_legit", "");
  legit.callBoxed(stack);  // same arguments, same returns; dispatches to the flagos fallback
  return true;
}

// ---- calls whose arguments share memory ------------------------------------
// ATen's cpu_fallback copies each tensor argument to the CPU on its own, so a
// written argument that overlaps another one (x.add_(x.t()), out= a shifted
// view of the input) would be computed on two unrelated copies: no overlap
// error where CPU raises one, and values CPU would not give. Such calls copy
// each flagos storage to the CPU once and hand the CPU kernel views of those
// copies with the arguments' own geometry, so it sees the aliasing exactly as
// it would natively; written arguments are copied back. One flagos tensor
// passed twice (out= the input) is one host view, as it is one tensor on CPU:
// kernels compare identity (gather(x, 1, i, out=x) raises even when resizing
// `out` empties both) and a resize of `out` is a resize of that input too.
class StorageCopies {
 public:
  explicit StorageCopies(c10::DeviceIndex device) : device_(device) {}

  at::Tensor to_host(const at::Tensor& t) {
    if (!t.defined() || !t.device().is_privateuseone()) return t;
    for (const auto& [impl, host] : views_) {
      if (impl == t.unsafeGetTensorImpl()) return host;
    }
    const c10::Storage& storage = t.storage();
    at::Tensor* bytes = nullptr;
    for (auto& [impl, host] : copies_) {
      if (impl == storage.unsafeGetStorageImpl()) bytes = &host;
    }
    if (bytes == nullptr) {
      const auto nbytes = static_cast<int64_t>(storage.nbytes());
      at::Tensor device_bytes =
          at::empty({0}, t.options().dtype(at::kByte)).set_(storage, 0, {nbytes}, {1});
      copies_.emplace_back(storage.unsafeGetStorageImpl(), device_bytes.to(at::kCPU));
      bytes = &copies_.back().second;
    }
    at::Tensor host = at::empty({0}, t.options().device(at::kCPU))
                          .set_(bytes->storage(), t.storage_offset(), t.sizes(), t.strides());
    if (t.is_conj()) host._set_conj(true);
    if (t.is_neg()) host._set_neg(true);
    views_.emplace_back(t.unsafeGetTensorImpl(), host);
    return host;
  }

  c10::IValue to_host(const c10::IValue& v) {
    return boxing::map_tensors(
        v, [this](const at::Tensor& t) { return to_host(t); }, c10::Device(at::kCPU));
  }

  // A result that is no written argument: views of the copies cannot stand
  // for flagos views (as with error_on_views in the plain fallback).
  at::Tensor back(const at::Tensor& r, const c10::OperatorHandle& op) const {
    if (!r.defined() || !r.device().is_cpu()) return r;
    for (const auto& copy : copies_) {
      TORCH_CHECK(!r.storage().is_alias_of(copy.second.storage()),
                  "flagos: ", full_name(op.operator_name()),
                  " returned a view of an argument, which its CPU fallback cannot serve");
    }
    return r.to(c10::Device(c10::kPrivateUse1, device_));
  }

 private:
  c10::DeviceIndex device_;
  c10::SmallVector<std::pair<const c10::StorageImpl*, at::Tensor>, 4> copies_;
  c10::SmallVector<std::pair<const c10::TensorImpl*, at::Tensor>, 4> views_;
};

// One element per address: a written view with stride-0 dimensions (an
// expanded tensor CPU accepts writing, as fill_ does) is copied back through
// its first index along them, which is the same memory.
at::Tensor one_per_address(at::Tensor t) {
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.stride(d) == 0 && t.size(d) > 1) t = t.narrow(d, 0, 1);
  }
  return t;
}

void write_back(const at::Tensor& original, const at::Tensor& host) {
  if (!original.defined() || !original.device().is_privateuseone()) return;
  if (original.sizes() != host.sizes()) original.resize_(host.sizes());
  const at::Tensor dst = one_per_address(original);
  const at::Tensor src = one_per_address(host);
  TORCH_CHECK(at::has_internal_overlap(dst) != at::MemOverlap::Yes,
              "flagos: cannot write back an output whose elements overlap (", original.sizes(),
              " with strides ", original.strides(), ")");
  dst.copy_(src);
}

bool is_written(const c10::Argument& arg) {
  const auto* info = arg.alias_info();
  return info != nullptr && info->isWrite();
}

// A CPU kernel that raises may already have changed what it writes: cat,
// index_select and gather resize `out` before they find the error, index_put_
// and scatter_ write the elements before a bad index. On CPU (and box:cpu,
// which runs on the same memory) those changes stay; the copies must reach the
// flagos arguments too, or a failed call would leave them as they were. Best
// effort: the kernel's error is the one that propagates, never one from here.
void write_back_after_error(const c10::IValue& original, const c10::IValue& host) noexcept {
  const auto host_copy = [](const at::Tensor& h) { return h.defined() && h.device().is_cpu(); };
  try {
    if (original.isTensor() && host.isTensor()) {
      if (host_copy(host.toTensor())) write_back(original.toTensor(), host.toTensor());
    } else if (original.isTensorList() && host.isTensorList()) {
      const auto o = original.toTensorList().vec();
      const auto h = host.toTensorList().vec();
      if (o.size() != h.size()) return;
      for (size_t j = 0; j < o.size(); ++j) {
        if (host_copy(h[j])) write_back(o[j], h[j]);
      }
    }
  } catch (...) {  // NOLINT(bugprone-empty-catch): the kernel's error wins
  }
}

void run_storage_exact(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t n = schema.arguments().size();
  const auto begin = stack->end() - static_cast<std::ptrdiff_t>(n);
  const auto device = boxing::first_flagos_device(begin, stack->end());
  StorageCopies copies(device.value_or(0));
  std::vector<c10::IValue> originals(begin, stack->end());
  std::vector<c10::IValue> hosts;
  hosts.reserve(n);
  for (auto it = begin; it != stack->end(); ++it) {
    *it = copies.to_host(*it);
    hosts.push_back(*it);
  }
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  } catch (...) {
    for (size_t i = 0; i < n; ++i) {
      if (is_written(schema.arguments()[i])) write_back_after_error(originals[i], hosts[i]);
    }
    throw;
  }
  for (size_t i = 0; i < n; ++i) {
    if (!is_written(schema.arguments()[i])) continue;
    if (originals[i].isTensor()) {
      write_back(originals[i].toTensor(), hosts[i].toTensor());
    } else if (originals[i].isTensorList()) {
      const auto o = originals[i].toTensorList().vec();
      const auto h = hosts[i].toTensorList().vec();
      for (size_t j = 0; j < o.size(); ++j) write_back(o[j], h[j]);
    }
  }
  const auto& returns = schema.returns();
  const auto ret_begin = stack->end() - static_cast<std::ptrdiff_t>(returns.size());
  for (size_t r = 0; r < returns.size(); ++r) {
    c10::IValue& ret = *(ret_begin + static_cast<std::ptrdiff_t>(r));
    const int w = boxing::written_argument(schema, r);
    ret = w >= 0
              ? originals[static_cast<size_t>(w)]
              : boxing::map_tensors(ret, [&](const at::Tensor& t) { return copies.back(t, op); });
  }
}

}  // namespace

void run_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, bool count) {
  const auto& schema = op.schema();
  const auto args_begin = check_fallback_call(op, stack, "routed to the CPU fallback");
  if (batch_norm_through_legit(op, stack)) return;
  retype_optional_tensor_lists(schema, args_begin, stack->end());
  const bool writes = schema.is_mutable();
  const bool aliased = writes && boxing::has_aliased_write(schema, args_begin, stack->end());
  if (!aliased) move_leading_cpu_scalars(args_begin, stack->end());
  if (boxing::has_generator_argument(schema)) {
    boxing::bridge_generators(schema, args_begin, stack->end());
  }
  note_fallback(schema, count, aliased ? " (arguments share memory)" : "");
  if (aliased) {
    run_storage_exact(op, stack);
    return;
  }
  // error_on_views: a view served by copying would silently break aliasing.
  if (!writes) {
    at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
    return;
  }
  // ATen's fallback replaces the written arguments on the stack with its CPU
  // copies and drops its own references to them when it unwinds: hold them
  // for a kernel that raises (write_back_after_error). Out= and in-place calls
  // only, a reference each.
  const auto& args = schema.arguments();
  c10::SmallVector<c10::IValue, 4> written;
  for (size_t i = 0; i < args.size(); ++i) {
    if (is_written(args[i])) written.push_back(args_begin[static_cast<ptrdiff_t>(i)]);
  }
  const size_t height = stack->size();
  try {
    at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
  } catch (...) {
    // A kernel raises before it pops its arguments, so the stack still holds
    // the CPU copies it worked on (flagos tensors there, if copying failed, are
    // passed over). Another height: the kernel had returned; nothing to redo.
    if (stack->size() == height) {
      const size_t base = height - args.size();
      size_t w = 0;
      for (size_t i = 0; i < args.size(); ++i) {
        if (is_written(args[i])) write_back_after_error(written[w++], (*stack)[base + i]);
      }
    }
    throw;
  }
}

void set_fallback_log(bool on) { g_log.store(on); }

torch::jit::Stack::iterator check_fallback_call(const c10::OperatorHandle& op,
                                                torch::jit::Stack* stack, const char* where) {
  const size_t num_args = op.schema().arguments().size();
  TORCH_INTERNAL_ASSERT(stack->size() >= num_args);
  const auto args_begin = stack->end() - static_cast<std::ptrdiff_t>(num_args);
  boxing::check_same_device(op, args_begin, stack->end());
  if (C10_UNLIKELY(capturing_device() >= 0)) {
    check_not_capturing(full_name(op.schema().operator_name()) + " (" + where + ")");
  }
  return args_begin;
}

namespace {
void log_fallback(const std::string& name, const char* note) {
  if (g_log.load(std::memory_order_relaxed)) {
    // One write per line: threads logging at once must not interleave mid-line.
    std::string line = "[flagos fallback] " + name + " -> cpu" + note + "\n";
    std::cerr.write(line.data(), static_cast<std::streamsize>(line.size()));
  }
}
}  // namespace

void note_fallback(const c10::FunctionSchema& schema, bool count, const char* note) {
  if (count) count_fallback(full_name(schema.operator_name()));
  if (g_log.load(std::memory_order_relaxed)) log_fallback(short_name(schema.operator_name()), note);
}

void note_fallback(const std::string& name, const char* note) {
  count_fallback(name);
  log_fallback(name, note);
}

}  // namespace torch_fl
