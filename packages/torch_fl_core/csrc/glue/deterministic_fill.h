// torch.use_deterministic_algorithms(True) with fill_uninitialized_memory: new
// flagos memory (empty, empty_strided, resize_ growing a storage) is filled as
// CPU and CUDA fill it.
#pragma once

#include <ATen/Context.h>

namespace torch_fl {

// Whether this thread is filling new memory for deterministic algorithms.
bool& deterministic_fill_active();

// torch.use_deterministic_algorithms(True) with fill_uninitialized_memory (the
// default): new memory reads as NaN or the integer maximum, as CPU's and CUDA's
// empty and resize_ leave it, never as what a freed block held. `fill` runs once
// per user-visible allocation: a vendor's fill_ kernel may allocate workspaces
// with at::empty, which must not be filled (and call fill_ again) themselves.
template <class Fill>
void fill_if_deterministic(Fill&& fill) {
  if (C10_LIKELY(!at::globalContext().deterministicAlgorithms() ||
                 !at::globalContext().deterministicFillUninitializedMemory())) {
    return;
  }
  bool& active = deterministic_fill_active();
  if (active) return;
  active = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{active};
  fill();
}

}  // namespace torch_fl
