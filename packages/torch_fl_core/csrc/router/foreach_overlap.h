// CPU's memory-overlap checks for in-place foreach ops, made by the router
// before any backend runs.
//
// Why: CPU (and CUDA's per-tensor fallback) runs `_foreach_add_(self, other)`
// as one `add_` per index, so a written tensor that partially overlaps its
// input, or overlaps itself, raises ATen's overlap error. CUDA's fused foreach
// kernels (and a vendor's or FlagGems' own) check nothing and compute a
// result that depends on the order the kernel wrote it in. The checks are
// those the per-index op makes: internal overlap of self[i] (not for
// `_foreach_zero_`: zero_ accepts an expanded tensor) and partial overlap of
// self[i] with the i-th tensor of every other list. A single Tensor argument
// is not checked: CPU reads some as a scalar (`_foreach_add_.Tensor`) and
// others as a tensor (`_foreach_mul_.Tensor`). `_foreach_copy_` skips an index
// whose source is the same data as self[i], as copy_ returns before its checks
// there. Unlike CPU, a call that fails a check writes nothing (CPU has written
// the indices before the failing one).
#pragma once

#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <optional>

#include "boxing/same_data.h"

namespace torch_fl::foreach_overlap {

enum class Checks : uint8_t { kNone, kPartial, kInternalAndPartial, kCopy };

// What an operator is checked for: in-place foreach overloads (a written
// Tensor[] first argument) get kInternalAndPartial, `_foreach_zero_` kPartial,
// `_foreach_copy_` kCopy (both checks, where the source is other data).
Checks checks_for(const c10::FunctionSchema& schema);

// The boxed call's arguments (the last schema.arguments().size() on the stack).
void check_stack(Checks checks, const c10::FunctionSchema& schema, const torch::jit::Stack& stack);

// The unboxed call's arguments: the first tensor list is the written one.
class Checker {
 public:
  explicit Checker(Checks checks)
      : internal_(checks == Checks::kInternalAndPartial), copy_(checks == Checks::kCopy) {}

  // ATen's checks run only where they can fail: a tensor that is
  // non-overlapping and dense has no internal overlap, and two tensors over
  // different memory (neither the same storage nor the same data) do not
  // overlap (ATen's get_overlap_status answers the same for both). The list
  // calls of an optimizer pass one such test per tensor.
  void see(at::TensorList list) {
    if (!has_self_) {
      has_self_ = true;
      self_ = list;
      if (internal_) {
        for (const at::Tensor& t : list) check_internal(t);
      }
    } else if (list.size() == self_.size()) {
      for (size_t i = 0; i < list.size(); ++i) {
        const at::Tensor& self = self_[i];
        if (copy_) {
          if (boxing::same_data(self, list[i])) continue;
          check_internal(self);
        }
        if (may_share_memory(self, list[i])) at::assert_no_partial_overlap(self, list[i]);
      }
    }
  }
  template <class T>
  void see(const T&) {}

 private:
  static void check_internal(const at::Tensor& t) {
    if (!t.defined() || !t.unsafeGetTensorImpl()->is_non_overlapping_and_dense()) {
      at::assert_no_internal_overlap(t);
    }
  }
  static bool may_share_memory(const at::Tensor& a, const at::Tensor& b) {
    if (!a.defined() || !b.defined()) return true;  // ATen's own answer for these
    const c10::StorageImpl* sa = a.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
    const c10::StorageImpl* sb = b.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
    return sa == sb || sa == nullptr || sb == nullptr || sa->data() == sb->data();
  }
  bool internal_;
  bool copy_;
  // A flag beside a plain list, not std::optional: GCC's -Wmaybe-uninitialized
  // misreads the optional's storage here.
  bool has_self_ = false;
  at::TensorList self_;
};

}  // namespace torch_fl::foreach_overlap
