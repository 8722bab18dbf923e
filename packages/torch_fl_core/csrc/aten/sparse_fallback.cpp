// Sparse operators (COO and the compressed layouts) flagos has no kernel for: the ones whose CPU
// and CUDA kernels differ (_coalesce, add.out and mul.out of sparse tensors, addmm with a sparse
// matrix, ...); the kernels ATen writes once for both are registered from
// tools/gen_sparse_kernels.py. Each such call runs on the CPU: every flagos tensor (sparse ones as
// indices and values) is copied there, the CPU's kernel runs, written arguments get the answer back
// through copy_ (sparse copy_ is one of the generic kernels) and other results are copied to the
// caller's flagos device. Counted and logged as any CPU fallback.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <optional>
#include <vector>

#include "aten/cpu_fallback.h"
#include "boxing/call_arguments.h"
#include "profiler/route_scope.h"

namespace torch_fl {
namespace {

void sparse_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  static const std::string kBackend = "cpu";
  profiler::RouteScope scope(kBackend, op);
  const auto& schema = op.schema();
  const auto args_begin = check_fallback_call(op, stack, "sparse, on the CPU fallback");
  note_fallback(schema, /*count=*/true, " (sparse)");

  std::optional<c10::Device> device;
  std::vector<c10::IValue> originals(args_begin, stack->end());
  for (auto it = args_begin; it != stack->end(); ++it) {
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
    if (device) {
      *ret = boxing::map_tensors(*ret, [&](const at::Tensor& t) {
        return t.defined() && t.device().is_cpu() ? t.to(*device) : t;
      });
    }
  }
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_cpu_fallback>());
}

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_cpu_fallback>());
}

}  // namespace
}  // namespace torch_fl
