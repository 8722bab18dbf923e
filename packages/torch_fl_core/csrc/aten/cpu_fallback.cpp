// The boxed CPU fallback for every operator flagos has no kernel for (and
// the `cpu` backend of route tables): ATen's cpu_fallback (copy in, compute on
// CPU, copy out) plus what it does not do for us: same-device checks, flagos
// generators, counting and logging.
#include "aten/cpu_fallback.h"

#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <atomic>
#include <iostream>
#include <mutex>

#include "aten/fallback_counter.h"
#include "aten/stack_args.h"
#include "profiler/route_scope.h"
#include "router/backend.h"

namespace torch_fl {
namespace {

std::mutex g_count_mutex;
std::map<std::string, int64_t>* g_counts = new std::map<std::string, int64_t>();
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
  Registrar() { register_backend(std::make_shared<CpuFallbackBackend>()); }
} registrar;

}  // namespace

namespace {

// ATen's cpu_fallback returns results to the device of the FIRST tensor
// argument. When that is a CPU scalar (`1 - t` is sub.Tensor(wrapped 1, t)),
// results would land on the CPU: move such leading CPU 0-dim tensors to the
// call's flagos device first, keeping their wrapped-number flag (type
// promotion treats Python scalars differently from 0-dim tensors).
void move_leading_cpu_scalars(torch::jit::Stack::iterator begin, torch::jit::Stack::iterator end) {
  const auto device = first_flagos_device(begin, end);
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

}  // namespace

void run_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, bool count) {
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  TORCH_INTERNAL_ASSERT(stack->size() >= num_args);
  const auto args_begin = stack->end() - static_cast<std::ptrdiff_t>(num_args);
  check_same_device(op, args_begin, stack->end());
  if (batch_norm_through_legit(op, stack)) return;
  move_leading_cpu_scalars(stack->end() - static_cast<std::ptrdiff_t>(num_args), stack->end());
  if (has_generator_argument(schema)) bridge_generators(schema, args_begin, stack->end());
  if (count) count_fallback(full_name(schema.operator_name()));
  if (g_log.load(std::memory_order_relaxed)) {
    std::cerr << "[flagos fallback] " << short_name(schema.operator_name()) << " -> cpu\n";
  }
  // error_on_views: a view served by copying would silently break aliasing.
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
}

void set_fallback_log(bool on) { g_log.store(on); }

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
