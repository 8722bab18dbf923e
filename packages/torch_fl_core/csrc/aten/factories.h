// The flagos factories every flagos tensor is born from (empty.memory_format
// and empty_strided register them for PrivateUse1).
#pragma once

#include <ATen/Context.h>
#include <ATen/core/Tensor.h>

namespace torch_fl {

// An uninitialised strided tensor on the current flagos device, without a
// dispatcher call: what Inductor's generated code allocates its buffers with
// (as empty_strided_cuda does for CUDA).
at::Tensor empty_strided_on_current_device(c10::IntArrayRef size, c10::IntArrayRef stride,
                                           c10::ScalarType dtype);

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
