// The tensor kinds whose operators flagos serves on CPU copies, where it has no kernel:
// - sparse (COO and the compressed layouts): the operators whose CPU and CUDA kernels differ
//   (_coalesce, add.out and mul.out of sparse tensors, addmm with a sparse matrix, ...); the
//   kernels ATen writes once for both are registered from tools/gen_sparse_kernels.py;
// - quantized: every operator that computes (dequantize, quantized arithmetic, comparisons, ...);
//   making, viewing and copying one is quantized_tensors.cpp.
// Each such call runs on the CPU: every flagos tensor (sparse ones as indices and values,
// quantized ones as integers and quantizer) is copied there, the CPU's kernel runs, written
// arguments get the answer back through copy_ and other results are copied to the caller's flagos
// device. Counted and logged as any CPU fallback.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aten/cpu_fallback.h"
#include "aten/layout_fallback.h"
#include "boxing/call_arguments.h"
#include "profiler/route_scope.h"

namespace torch_fl {
namespace {

void run_on_cpu_copies(const c10::OperatorHandle& op, torch::jit::Stack* stack, const char* kind,
                       const char* note) {
  static const std::string kBackend = "cpu";
  profiler::RouteScope scope(kBackend, op);
  const auto& schema = op.schema();
  const auto args_begin = check_fallback_call(op, stack, kind);
  note_fallback(schema, /*count=*/true, note);

  std::optional<c10::Device> device;
  std::vector<c10::IValue> originals(args_begin, stack->end());
  for (auto it = args_begin; it != stack->end(); ++it) {
    // A factory names its device (empty_like(x, layout=torch.sparse_coo) on flagos): the CPU
    // makes it, and it comes back to that device; without this the call would come back here.
    if (it->isDevice() && it->toDevice().is_privateuseone()) {
      if (!device) device = it->toDevice();
      *it = c10::IValue(c10::Device(c10::kCPU));
      continue;
    }
    *it = boxing::map_tensors(*it, [&](const at::Tensor& t) {
      if (!t.defined() || !t.device().is_privateuseone()) return t;
      if (!device) device = t.device();
      at::Tensor copy = t.cpu();
      // Some kernels decide what to compute from it (_sparse_mm_reduce_impl
      // keeps amax/amin's argmax only for a backward): the copy must say so too.
      if (t.requires_grad()) copy.requires_grad_(true);
      return copy;
    });
  }
  // Nothing on flagos to move: calling again would dispatch here again, without end.
  TORCH_CHECK_NOT_IMPLEMENTED(device.has_value(), "Could not run '",
                              c10::toString(schema.operator_name()),
                              "' on flagos: it reached flagos's ", kind,
                              " with no flagos tensor or device among its arguments");
  op.callBoxed(stack);

  const size_t num_returns = schema.returns().size();
  TORCH_INTERNAL_ASSERT(stack->size() >= num_returns);
  auto ret = stack->end() - static_cast<std::ptrdiff_t>(num_returns);
  for (size_t r = 0; r < num_returns; ++r, ++ret) {
    const int w = boxing::written_argument(schema, r);
    if (w >= 0) {
      // out= and in-place: the caller's tensor takes the answer and is the result.
      const c10::IValue& original = originals[static_cast<size_t>(w)];
      if (original.isTensor() && ret->isTensor()) {
        at::Tensor target = original.toTensor();
        const at::Tensor& answer = ret->toTensor();
        if (!target.is_same(answer)) {
          // The CPU kernel resized its copy of an out= tensor (sparse copy_ resizes itself).
          if (!target.is_sparse() && target.sizes() != answer.sizes()) {
            target.resize_(answer.sizes());
          }
          target.copy_(answer);
        }
        *ret = target;
        continue;
      }
    }
    const auto* alias = schema.returns()[r].alias_info();
    TORCH_CHECK(alias == nullptr || ret->isNone(),
                "flagos: ", c10::toString(schema.operator_name()),
                " returns a view of an argument, which its CPU fallback (", kind,
                ") cannot serve: a copy would not share memory with it");
    if (device) {
      *ret = boxing::map_tensors(*ret, [&](const at::Tensor& t) {
        return t.defined() && t.device().is_cpu() ? t.to(*device) : t;
      });
    }
  }
}

void sparse_on_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  run_on_cpu_copies(op, stack, "sparse, on the CPU fallback", " (sparse)");
}

void quantized_on_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  run_on_cpu_copies(op, stack, "quantized, on the CPU fallback", " (quantized)");
}

}  // namespace

void register_quantized_cpu_kernels() {
  // Leaked: the dispatcher keeps what they registered for the life of the process.
  static auto* libraries = new std::map<std::string, std::unique_ptr<torch::Library>>();
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const auto& name : dispatcher.getAllOpNames()) {
    const auto op = dispatcher.findOp(name);
    if (!op || !op->hasKernelForDispatchKey(c10::DispatchKey::QuantizedCPU) ||
        op->hasKernelForDispatchKey(c10::DispatchKey::QuantizedPrivateUse1)) {
      continue;
    }
    const auto ns = name.getNamespace();
    if (!ns) continue;
    const std::string space(*ns);
    auto& library = (*libraries)[space];
    if (!library) {
      library = std::make_unique<torch::Library>(
          torch::Library::IMPL, space, c10::DispatchKey::QuantizedPrivateUse1, __FILE__, __LINE__);
    }
    std::string full = name.name.substr(space.size() + 2);
    if (!name.overload_name.empty()) full += "." + name.overload_name;
    library->impl(full.c_str(), torch::CppFunction::makeFromBoxedFunction<&quantized_on_cpu>());
  }
}

namespace {

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_on_cpu>());
}

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_on_cpu>());
}

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&quantized_on_cpu>());
}

}  // namespace
}  // namespace torch_fl
