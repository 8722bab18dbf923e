// Version counters of written list arguments. A kernel that writes list
// elements bumps their version counters itself (CUDA's foreach kernels call
// increment_version; CPU's loops run in-place operators), but it is handed
// aliases, whose counters are their own, and the autograd layer above the
// router bumps no list element (it does bump a written Tensor). So the versions
// of a written list's aliases are read before the kernel, and each original
// then takes the bumps its alias got: flagos counts as the backend it runs on
// counts natively, for whatever that kernel does. Unboxed routes apply them
// once the kernel returned; boxed calls also after it failed (what it wrote by
// then was bumped, as natively).
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace torch_fl::boxing {

class WrittenListVersions {
 public:
  WrittenListVersions() = default;
  ~WrittenListVersions();
  WrittenListVersions(const WrittenListVersions&) = delete;
  WrittenListVersions& operator=(const WrittenListVersions&) = delete;

  // One element of a written list: the caller's tensor and its alias.
  void watch(const at::Tensor& original, const at::Tensor& alias);
  // A whole written list; `distinct`: no alias in it appears twice (a kept set).
  void watch(at::TensorList originals, at::TensorList aliases, bool distinct);
  // Elements watched one by one may share aliases.
  void may_repeat() { distinct_ = false; }
  // Each original takes the bumps its alias got since watch(); an alias seen
  // several times (the same tensor twice in the call) counts once.
  void apply();

  struct Entry {
    c10::TensorImpl* original;
    c10::TensorImpl* alias;
    uint32_t version;
  };

 private:
  // A buffer of the thread's, taken at the first watch and given back after:
  // a steady-state list call allocates nothing (calls may nest, each has its own).
  std::vector<Entry>* entries_ = nullptr;
  size_t lists_ = 0;
  bool distinct_ = true;
};

}  // namespace torch_fl::boxing
