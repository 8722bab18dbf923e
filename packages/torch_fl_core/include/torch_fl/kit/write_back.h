// Writing a kernel's result into an out= or in-place target, as PyTorch's structured kernels do.
//
// A result computed into a fresh tensor is cast into the target's dtype (only where PyTorch
// allows that cast), out= is resized to the result's shape (resize_output: with its warning for
// a non-empty out of another shape), an in-place target must already have it. A result that IS
// the target (the kernel wrote it directly, see direct_target) needs nothing.
#ifndef TORCH_FL_KIT_WRITE_BACK_H_
#define TORCH_FL_KIT_WRITE_BACK_H_

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>

#include <algorithm>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace torch_fl::kit {

// How an aten overload returns its result: a fresh tensor, into out=, or into self.
enum class Form { Functional, Out, Inplace };

// Writes `result` into `dst` (out= when `out`, else in-place); `op` names the overload in errors.
inline void write_back(const at::Tensor& dst, const at::Tensor& result, bool out,
                       const std::string& op) {
  if (result.is_same(dst)) return;
  TORCH_CHECK(at::canCast(result.scalar_type(), dst.scalar_type()), "result type ",
              result.scalar_type(), " can't be cast to the desired output type ", dst.scalar_type(),
              " (", op, ")");
  if (out) {
    at::native::resize_output(dst, result.sizes());
  } else {
    TORCH_CHECK(dst.sizes() == result.sizes(), "output with shape ", dst.sizes(),
                " doesn't match the broadcast shape ", result.sizes(), " (", op, ")");
  }
  dst.copy_(result);
}

// Whether no two elements of `t` share memory. ATen proves it only for dense tensors (TooHard
// otherwise); a strided view (a column, every other row) is proved here too: with its dims sorted
// by stride, each stride steps past everything the smaller dims span. Zero strides and
// interleaved layouts stay unproved.
inline bool no_internal_overlap(const at::Tensor& t) {
  const at::MemOverlap status = at::has_internal_overlap(t);
  if (status != at::MemOverlap::TooHard) return status == at::MemOverlap::No;
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of dims with size > 1
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) <= 1) continue;
    if (t.stride(d) <= 0) return false;
    dims.emplace_back(t.stride(d), t.size(d));
  }
  std::sort(dims.begin(), dims.end());
  int64_t span = 1;  // elements covered by the dims so far, from the first one's start
  for (const auto& [stride, size] : dims) {
    if (stride < span) return false;
    span += stride * (size - 1);
  }
  return true;
}

// Whether a kernel that honours strides may write a result of `shape` and `dtype` straight into
// the out= / in-place target `dst` (resizing out= first where that is safe): right dtype, a plain
// flagos tensor, no internal overlap, and no overlap with an input except the full overlap an
// elementwise op allows. False: compute into a fresh tensor and write_back() it.
inline bool direct_target(at::Tensor& dst, at::IntArrayRef shape, at::ScalarType dtype, Form form,
                          bool elementwise, std::initializer_list<at::Tensor> inputs) {
  // A target with a lazy conj/neg bit holds the negation (or conjugate) of what it reads as: the
  // SDK would write raw values into it, so the result goes through copy_, which honours bits.
  if (dst.scalar_type() != dtype || !dst.device().is_privateuseone() || dst.is_neg() ||
      dst.is_conj())
    return false;
  if (dst.sizes() != shape) {
    if (form != Form::Out) return false;  // write_back raises PyTorch's shape error
    // Resizing an out= that an input shares would change that input first.
    for (const at::Tensor& in : inputs) {
      if (in.defined() && at::get_overlap_status(dst, in) != at::MemOverlapStatus::No) return false;
    }
    at::native::resize_output(dst, shape);
  }
  if (!no_internal_overlap(dst)) return false;
  for (const at::Tensor& in : inputs) {
    if (!in.defined()) continue;
    const auto st = at::get_overlap_status(dst, in);
    // An elementwise op may read and write the same elements (in-place); nothing else may.
    if (st == at::MemOverlapStatus::Partial || (!elementwise && st == at::MemOverlapStatus::Full))
      return false;
  }
  return true;
}

}  // namespace torch_fl::kit

#endif  // TORCH_FL_KIT_WRITE_BACK_H_
