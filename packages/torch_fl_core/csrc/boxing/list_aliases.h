// The aliases of a whole list argument, kept per thread for the next call
// that passes the same memory.
//
// Why: an optimizer passes the same lists of parameters, gradients and states
// to every `_foreach_*` call of every step. Aliasing them one tensor at a time
// (a pool lookup, an argument-table entry, reference counts, a converted
// vector) cost about 600 instructions per tensor on sim, which made a foreach
// over 150 tensors 1.4x native on the H200. A kept set is checked tensor by
// tensor against the list (memory, size, dtype, free) and handed to the kernel
// as it is: no per-tensor table work, no vector, no reference counting.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DispatchKey.h>

#include <cstdint>
#include <vector>

#include "boxing/pointer_index.h"

namespace torch_fl::boxing {

class ListAliases {
 public:
  // Lists shorter than this go tensor by tensor (their aliases come from the
  // pool's short lists, which is as cheap).
  static constexpr size_t kMinLength = 8;

  // The kept set for `l`: with kFound its aliases are checked and pointed at
  // l's memory and geometry; kInUse: a call on this thread holds it already
  // (untouched; only that call may use it again, for the same list twice);
  // kNone: no set for this memory, or l differs from it.
  enum class Found { kNone, kFound, kInUse };
  static ListAliases* find(at::TensorList l, c10::Device target, c10::DispatchKey key,
                           Found& found);
  // Holds a found set for the calling call, until give_back().
  void hold();
  // A list that went tensor by tensor and has no set: once the same memory
  // comes back, a set is kept for it.
  static void note(at::TensorList l, c10::Device target, c10::DispatchKey key);
  // Counts a long list that went tensor by tensor.
  static void missed();
  // Gives a held set back for the next call.
  void give_back() { in_use_ = false; }

  at::TensorList aliases() const { return aliases_; }
  // The memory of each list tensor, in list order.
  const std::vector<const void*>& data() const { return data_; }
  // The position of the list tensor whose memory starts at `data`, or -1.
  int64_t find_data(const void* data) const { return data_index_.find(data, 0); }

  struct Stats {
    uint64_t served = 0;  // lists handed to a kernel as a kept set
    uint64_t built = 0;   // sets built
    uint64_t missed = 0;  // long lists that went tensor by tensor
  };
  static Stats stats();

  ListAliases(uint64_t kind, at::TensorList l, c10::Device target, c10::DispatchKey key);

 private:
  friend struct ListAliasTable;
  bool matches(at::TensorList l, c10::Device target);

  uint64_t kind_;
  std::vector<const void*> data_;
  std::vector<size_t> nbytes_;
  std::vector<at::Tensor> aliases_;
  PointerIndex data_index_;  // data_ -> position; valid while data_ holds
  uint64_t used_ = 0;
  bool in_use_ = false;
};

}  // namespace torch_fl::boxing
