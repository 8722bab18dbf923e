// Reduction shapes as PyTorch defines them, for kernels that hand an SDK a dim list.
//
// A 0-dim input accepts the dims PyTorch accepts for it (0 and -1, checked as PyTorch checks
// them) and reduces its one element: the SDK gets the empty dim list, which every SDK contract
// here reads as "every dimension" whatever rank its descriptor gives a 0-dim tensor.
#ifndef TORCH_FL_KIT_REDUCTION_SHAPE_H_
#define TORCH_FL_KIT_REDUCTION_SHAPE_H_

#include <ATen/WrapDimUtils.h>
#include <ATen/core/Tensor.h>
#include <torch_fl/boxed_call.h>

#include <algorithm>
#include <optional>
#include <vector>

namespace torch_fl::kit {

// The `dim` argument of a reduction (int, int[] or None; absent = None).
inline std::optional<std::vector<int64_t>> dims_arg(const BoxedCall& c) {
  if (!c.has("dim")) return std::nullopt;
  const c10::IValue& v = c.arg("dim");
  if (v.isNone()) return std::nullopt;
  if (v.isInt()) return std::vector<int64_t>{v.toInt()};
  return v.toIntVector();
}

// Reduction dims: normalised, sorted, unique; empty or None -> every dim; a 0-dim input -> {}.
inline std::vector<int64_t> reduce_dims(const at::Tensor& self,
                                        const std::optional<std::vector<int64_t>>& dims) {
  const int64_t rank = self.dim();
  std::vector<bool> red(std::max<int64_t>(rank, 1), !dims || dims->empty());
  if (dims) {
    // maybe_wrap_dim raises PyTorch's IndexError for a dim out of range (a 0-dim input: [-1, 0]).
    for (int64_t d : *dims) red[at::maybe_wrap_dim(d, rank)] = true;
  }
  std::vector<int64_t> out;
  for (int64_t i = 0; i < rank; ++i)
    if (red[i]) out.push_back(i);
  return out;
}

// The result shape of reducing `dims` of `self` (a 0-dim input gives a 0-dim result).
inline std::vector<int64_t> reduced_shape(const at::Tensor& self, const std::vector<int64_t>& dims,
                                          bool keepdim) {
  std::vector<int64_t> shape;
  for (int64_t i = 0; i < self.dim(); ++i) {
    const bool red = std::find(dims.begin(), dims.end(), i) != dims.end();
    if (!red)
      shape.push_back(self.size(i));
    else if (keepdim)
      shape.push_back(1);
  }
  return shape;
}

}  // namespace torch_fl::kit

#endif  // TORCH_FL_KIT_REDUCTION_SHAPE_H_
