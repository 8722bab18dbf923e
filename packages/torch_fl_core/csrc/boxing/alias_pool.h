// Call-scoped aliases from a per-thread pool: building an alias (a StorageImpl
// and a TensorImpl) per operand is most of the router's own cost per call on
// small tensors, so aliases nobody holds any more are re-pointed at the next
// operand instead.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DispatchKey.h>

#include <cstdint>

namespace torch_fl::boxing {

// An alias of t typed as `device` with dispatch key `key`, for the duration of
// one call: non-owning (the caller holds t), taken from the calling thread's
// pool. Kernels must not keep it past the call. `long_call`: the call already
// holds many aliases (a cat, a foreach over a model's parameters); its
// operands are looked up by memory in a table of their own, which keeps the
// aliases of such calls for the next one (an optimizer's lists come back
// every step) without lengthening the short per-kind lists ordinary calls scan.
// The reference is the pool's, valid until the calling thread's next
// pooled_alias: copy it to keep it.
const at::Tensor& pooled_alias(const at::Tensor& t, c10::Device device, c10::DispatchKey key,
                               bool long_call = false);

// What pooled_alias did on the calling thread since it started: a pooled alias
// that already viewed the operand's memory, a pooled alias re-pointed at it, or
// a new alias (diagnostics for benchmarks and tests).
struct AliasPoolStats {
  uint64_t hits = 0;
  uint64_t rebinds = 0;
  uint64_t builds = 0;
};
AliasPoolStats alias_pool_stats();

}  // namespace torch_fl::boxing
