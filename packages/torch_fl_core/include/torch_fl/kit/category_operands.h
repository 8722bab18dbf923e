// The operands and result of an ops-table category, made once for every SDK.
//
// A native vendor's category routine (gcu's topsaten, ascend's ACLNN, musa's muDNN categories)
// does two things: what PyTorch's semantics ask of the call (the compute dtype and whether the
// kernel serves it, the declines that leave PyTorch's own errors to the CPU, the result's shape
// and dtype, the operands on the device) and what its SDK asks (descriptors, the launch). The
// first part is the same for every SDK and lives here, so a semantic fix is made once; the
// vendor's routine describes the tensors to its SDK and launches:
//
//   c10::DeviceGuard guard(c.device());
//   const auto p = torch_fl::kit::unary(c, sdk, kind);
//   if (p.runs()) launch(..., p.in[0], p.out);
//   c.finish(p.out);
//
// Two tensor forms cover the SDKs: kStrided kernels honour sizes, strides and offsets (operands
// are views, a broadcast one a zero-stride expansion; the result may be the out= / in-place
// target itself, see KernelCall::output); kDense kernels read contiguous row-major memory only
// (operands are materialised at the result's shape, results are fresh contiguous tensors that
// finish() writes back).
#ifndef TORCH_FL_KIT_CATEGORY_OPERANDS_H_
#define TORCH_FL_KIT_CATEGORY_OPERANDS_H_

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/TypeProperties.h>
#include <torch_fl/kit/dtype_set.h>
#include <torch_fl/kit/kernel_call.h>
#include <torch_fl/kit/operands.h>
#include <torch_fl/kit/type_promotion.h>

#include <cmath>
#include <initializer_list>
#include <optional>
#include <vector>

namespace torch_fl::kit {

enum class TensorForm { kStrided, kDense };

// The SDK kernel one call runs: how it takes tensors, its name in messages and the compute
// dtypes it serves. `to_device` brings an operand onto the call's device in a dtype
// (on_device, or on_device_filled where the SDK's streams capture graphs).
struct SdkKernel {
  using ToDevice = at::Tensor (*)(const BoxedCall&, const at::Tensor&, at::ScalarType);

  TensorForm form;
  const char* fn;
  const DtypeSet& dtypes;
  ToDevice to_device = &on_device;

  // Declines the call unless the kernel computes in `t`.
  void need(const KernelCall& c, at::ScalarType t) const { need_dtype(c, dtypes, t, fn); }

  // `t` on the device in `dt` at `shape` (its own shape when empty), as the kernel reads it.
  at::Tensor input(const KernelCall& c, const at::Tensor& t, at::ScalarType dt,
                   std::optional<at::IntArrayRef> shape = std::nullopt) const {
    at::Tensor x = to_device(c, t, dt);
    if (shape && x.sizes() != *shape) x = x.expand(*shape);
    return form == TensorForm::kDense ? x.contiguous() : x;
  }

  // Where the kernel writes a result of `shape` and `dtype`.
  at::Tensor result(KernelCall& c, at::IntArrayRef shape, at::ScalarType dt, bool elementwise,
                    std::initializer_list<at::Tensor> inputs = {}) const {
    if (form == TensorForm::kDense) {
      c.need_out_dtype(dt);
      return empty_result(c, shape, dt);
    }
    return c.output(shape, dt, elementwise, inputs);
  }
};

// One call's operands as the kernel reads them and where it writes.
struct Operands {
  at::ScalarType dtype = at::kFloat;  // the compute dtype
  std::vector<at::Tensor> in;         // in the category's order
  at::Tensor out;                     // finish() writes it back where it is not the target
  at::Scalar alpha = 1;               // binary_alpha's, checked
  bool runs() const { return out.numel() > 0; }
};

// ---- elementwise ----------------------------------------------------------------------------

// f(self): the compute and result dtypes as `kind` promotes them.
inline Operands unary(KernelCall& c, const SdkKernel& k, UnaryKind kind) {
  const at::Tensor self = c.tensor("self");
  if (kind == UnaryKind::FloatOnly && !at::isFloatingType(self.scalar_type()))
    c.decline("a non-floating input (PyTorch's error)");
  const auto [dt, out_dt] = unary_dtypes(self.scalar_type(), kind);
  k.need(c, dt);
  const at::Tensor x = k.input(c, self, dt);
  return {dt, {x}, k.result(c, self.sizes(), out_dt, true, {x})};
}

// a OP b, either a Scalar in some overloads (a wrapped number, promoted as PyTorch does),
// broadcast to one shape.
inline Operands binary(KernelCall& c, const SdkKernel& k, BinaryKind kind, const char* a = "self",
                       const char* b = "other") {
  const at::Tensor ta = operand(c, a), tb = operand(c, b);
  const auto [dt, out_dt] = binary_dtypes(at::result_type(ta, tb), kind);
  k.need(c, dt);
  const std::vector<int64_t> shape = at::infer_size(ta.sizes(), tb.sizes());
  const at::Tensor x = k.input(c, ta, dt, shape), y = k.input(c, tb, dt, shape);
  return {dt, {x, y}, k.result(c, shape, out_dt, true, {x, y})};
}

// a OP s for kernels that take the Scalar `s` as a value (it is not brought to the device).
inline Operands tensor_scalar(KernelCall& c, const SdkKernel& k, BinaryKind kind,
                              const char* a = "self", const char* s = "other") {
  const at::Tensor self = c.tensor(a);
  const auto [dt, out_dt] = binary_dtypes(at::result_type(self, c.scalar(s)), kind);
  k.need(c, dt);
  const at::Tensor x = k.input(c, self, dt);
  return {dt, {x}, k.result(c, self.sizes(), out_dt, true, {x})};
}

// A subtraction with a bool operand is PyTorch's error (sub_check): SDKs subtract bools as
// integers, so it is declined for the CPU to raise.
inline void need_no_bool_subtraction(const KernelCall& c, const at::Tensor& a,
                                     const at::Tensor& b) {
  const std::string& op = c.name();
  const bool subtraction = op.rfind("aten::sub", 0) == 0 || op.rfind("aten::rsub", 0) == 0;
  if (subtraction && (a.scalar_type() == at::kBool || b.scalar_type() == at::kBool))
    c.decline("a bool operand of a subtraction (PyTorch's error)");
}

// self +- alpha * other (checked_alpha's). `scalar_other`: the kernel takes `other` as a value
// (in = {self}).
inline Operands binary_alpha(KernelCall& c, const SdkKernel& k, bool scalar_other = false) {
  const at::Tensor a = operand(c, "self"), b = operand(c, "other");
  need_no_bool_subtraction(c, a, b);
  const at::ScalarType dt = at::result_type(a, b);
  k.need(c, dt);
  const at::Scalar alpha = checked_alpha(c, dt);
  if (scalar_other) {
    const at::Tensor x = k.input(c, a, dt);
    return {dt, {x}, k.result(c, a.sizes(), dt, true, {x}), alpha};
  }
  const std::vector<int64_t> shape = at::infer_size(a.sizes(), b.sizes());
  const at::Tensor x = k.input(c, a, dt, shape), y = k.input(c, b, dt, shape);
  return {dt, {x, y}, k.result(c, shape, dt, true, {x, y}), alpha};
}

// Two tensors of one dtype, broadcast (activation backwards: tanh_backward(grad_output, output),
// threshold_backward(grad_output, self)); mixed dtypes are PyTorch's to judge.
inline Operands same_dtype_pair(KernelCall& c, const SdkKernel& k, const char* a, const char* b) {
  const at::Tensor ta = c.tensor(a), tb = c.tensor(b);
  const at::ScalarType dt = ta.scalar_type();
  if (tb.scalar_type() != dt) c.decline("operands of different dtypes");
  k.need(c, dt);
  const std::vector<int64_t> shape = at::infer_size(ta.sizes(), tb.sizes());
  const at::Tensor x = k.input(c, ta, dt, shape), y = k.input(c, tb, dt, shape);
  return {dt, {x, y}, k.result(c, shape, dt, true, {x, y})};
}

// self + value * tensor1 (* or /) tensor2, the three promoted together.
inline Operands pointwise3(KernelCall& c, const SdkKernel& k) {
  const at::Tensor a = c.tensor("self"), b = c.tensor("tensor1"), d = c.tensor("tensor2");
  const at::ScalarType dt = at::native::result_type({a, b, d});
  k.need(c, dt);
  const std::vector<int64_t> shape =
      at::infer_size(at::infer_size(a.sizes(), b.sizes()), d.sizes());
  const at::Tensor x = k.input(c, a, dt, shape), y = k.input(c, b, dt, shape),
                   z = k.input(c, d, dt, shape);
  return {dt, {x, y, z}, k.result(c, shape, dt, true, {x, y, z})};
}

// condition ? self : other.
inline Operands where(KernelCall& c, const SdkKernel& k) {
  const at::Tensor cond = c.tensor("condition"), a = operand(c, "self"), b = operand(c, "other");
  if (cond.scalar_type() != at::kBool) c.decline("a condition of dtype other than bool");
  const at::ScalarType dt = at::result_type(a, b);
  k.need(c, dt);
  const std::vector<int64_t> shape =
      at::infer_size(at::infer_size(cond.sizes(), a.sizes()), b.sizes());
  const at::Tensor m = k.input(c, cond, at::kBool, shape), x = k.input(c, a, dt, shape),
                   y = k.input(c, b, dt, shape);
  return {dt, {m, x, y}, k.result(c, shape, dt, true, {m, x, y})};
}

// self where mask, else `value`: in = {self, mask} at the broadcast shape.
inline Operands masked_fill(KernelCall& c, const SdkKernel& k) {
  const at::Tensor self = c.tensor("self"), mask = c.tensor("mask");
  const at::ScalarType dt = self.scalar_type();
  k.need(c, dt);
  if (mask.scalar_type() != at::kBool) c.decline("a non-bool mask (PyTorch's error to raise)");
  const std::vector<int64_t> shape = at::infer_size(self.sizes(), mask.sizes());
  const at::Tensor x = k.input(c, self, dt, shape), m = k.input(c, mask, at::kBool, shape);
  return {dt, {x, m}, k.result(c, shape, dt, true, {x, m})};
}

// The tensor a fill_ or zero_ writes (in = {}).
inline Operands fill_target(KernelCall& c, const SdkKernel& k) {
  const at::Tensor self = c.tensor("self");
  k.need(c, self.scalar_type());
  return {self.scalar_type(), {}, k.result(c, self.sizes(), self.scalar_type(), true)};
}

// ---- reductions -----------------------------------------------------------------------------

// The result dtype of sum / mean / cumsum: an out= or in-place target's (a structured op keeps
// it), else `dtype=`, else int64 for an integral sum (as PyTorch sums integers), else self's. A
// `dtype=` other than the target's, and a mean of a non-floating dtype, are PyTorch's errors.
inline at::ScalarType sum_dtype(const KernelCall& c, const at::Tensor& self, bool mean) {
  const std::optional<at::ScalarType> requested =
      c.has("dtype") ? c.opt_dtype("dtype") : std::nullopt;
  at::ScalarType rdt = self.scalar_type();
  if (c.form() != Form::Functional) {
    rdt = c.target().scalar_type();
    if (requested && *requested != rdt) {
      c.decline("a dtype= other than the target's (PyTorch's error)");
    }
  } else if (requested) {
    rdt = *requested;
  } else if (!mean && at::isIntegralType(rdt, /*includeBool=*/true)) {
    rdt = at::kLong;
  }
  if (mean && !at::isFloatingType(rdt)) c.decline("mean of a non-floating dtype (PyTorch's error)");
  return rdt;
}

// The value a reduction over no elements gives (0 for sum, NaN for mean).
inline double empty_sum(bool mean) { return mean ? std::nan("") : 0.0; }

// all / any answer bool, except of uint8, which PyTorch answers in uint8: SDKs write bool, so
// uint8 is the CPU's.
inline void need_bool_logical_result(const KernelCall& c, const at::Tensor& self) {
  if (self.scalar_type() == at::kByte) c.decline("all/any of uint8 (its result is uint8)");
}

// amax / amin of an empty input is PyTorch's error to raise.
inline void need_elements(const KernelCall& c, const at::Tensor& self) {
  if (self.numel() == 0) c.decline("an empty input (PyTorch's error to raise)");
}

// ---- matmul, softmax --------------------------------------------------------------------------

// mm (rank 2) / bmm (rank 3) operands: one dtype, shapes that multiply (else PyTorch's error).
// The result's shape.
inline std::vector<int64_t> matmul_shape(const KernelCall& c, const at::Tensor& a,
                                         const at::Tensor& b, int64_t rank) {
  if (a.scalar_type() != b.scalar_type()) c.decline("operands of different dtypes");
  if (a.dim() != rank || b.dim() != rank) c.decline("operands of another rank");
  if (a.size(-1) != b.size(-2) || (rank == 3 && a.size(0) != b.size(0)))
    c.decline("operands of mismatched shapes");
  std::vector<int64_t> shape = a.sizes().vec();
  shape.back() = b.size(-1);
  return shape;
}

// addmm's bias: of the matrices' dtype and broadcastable to their product.
inline void need_bias(const KernelCall& c, const at::Tensor& bias, const at::Tensor& a,
                      at::IntArrayRef shape) {
  if (bias.scalar_type() != a.scalar_type()) c.decline("a bias of another dtype");
  if (!at::is_expandable_to(bias.sizes(), shape)) c.decline("a bias that does not broadcast");
}

// softmax's dim, wrapped; half_to_float is declined (the CPU converts).
inline int64_t softmax_dim(const KernelCall& c, const at::Tensor& self) {
  if (c.bool_("half_to_float")) c.decline("half_to_float");
  return at::maybe_wrap_dim(c.int_("dim"), self.dim());
}

// softmax backward: grad_output and output of the input's dtype and one shape; the wrapped dim.
inline int64_t softmax_backward_dim(const KernelCall& c, const at::Tensor& g, const at::Tensor& y) {
  const at::ScalarType dt = g.scalar_type();
  if (y.scalar_type() != dt || c.opt_dtype("input_dtype") != dt)
    c.decline("a gradient of another dtype than the input");
  if (g.sizes() != y.sizes()) c.decline("a gradient of another shape than the output");
  return at::maybe_wrap_dim(c.int_("dim"), g.dim());
}

// ---- factories, shape -------------------------------------------------------------------------

// arange's length from start, end and step; arguments PyTorch rejects are its error.
inline int64_t arange_length(const KernelCall& c) {
  const double xs = c.scalar("start").toDouble(), xe = c.scalar("end").toDouble(),
               st = c.scalar("step").toDouble();
  if (st == 0 || !std::isfinite(xs) || !std::isfinite(xe) || (st > 0 && xe < xs) ||
      (st < 0 && xe > xs)) {
    c.decline("arguments PyTorch rejects");
  }
  return static_cast<int64_t>(std::ceil((xe - xs) / st));
}

// cat's inputs without the legacy 1-D empty tensors, its wrapped dim and the result's shape.
struct CatShape {
  std::vector<at::Tensor> inputs;
  int64_t dim = 0;
  std::vector<int64_t> shape;
};

inline CatShape cat_shape(const KernelCall& c, const std::vector<at::Tensor>& all) {
  CatShape s;
  for (const at::Tensor& t : all) {
    if (t.dim() == 1 && t.numel() == 0) continue;  // PyTorch skips legacy empty tensors
    s.inputs.push_back(t);
  }
  if (s.inputs.empty()) c.decline("only empty inputs");
  const at::Tensor& first = s.inputs.front();
  for (const at::Tensor& t : s.inputs) {
    if (t.dim() != first.dim() || t.dim() == 0) c.decline("inputs of different ranks");
  }
  s.dim = at::maybe_wrap_dim(c.int_("dim"), first.dim());
  s.shape = first.sizes().vec();
  s.shape[s.dim] = 0;
  for (const at::Tensor& t : s.inputs) {
    for (int64_t d = 0; d < t.dim(); ++d) {
      if (d != s.dim && t.size(d) != first.size(d))
        c.decline("inputs whose sizes do not match (PyTorch's error)");
    }
    s.shape[s.dim] += t.size(s.dim);
  }
  return s;
}

// An index tensor of int64 or int32 (other dtypes are PyTorch's to judge).
inline void need_index(const KernelCall& c, const at::Tensor& index) {
  if (index.scalar_type() != at::kLong && index.scalar_type() != at::kInt)
    c.decline(std::string("an index of dtype ") + c10::toString(index.scalar_type()));
}

// index_select: the wrapped dim and the result's shape.
inline std::pair<int64_t, std::vector<int64_t>> index_select_shape(const KernelCall& c,
                                                                   const at::Tensor& self,
                                                                   const at::Tensor& index) {
  need_index(c, index);
  if (self.dim() == 0 || index.dim() > 1) c.decline("a 0-dim input or a multi-dim index");
  const int64_t dim = at::maybe_wrap_dim(c.int_("dim"), self.dim());
  std::vector<int64_t> shape = self.sizes().vec();
  shape[dim] = index.numel();
  if (self.size(dim) == 0 && index.numel() > 0) c.decline("indexing an empty dimension");
  return {dim, shape};
}

// index.Tensor with integer indices for self's leading dims: the indices' broadcast shape and
// the result's shape. Indices that do not broadcast together, or index an empty dimension, are
// PyTorch's to judge (its IndexError names their shapes).
struct IndexShape {
  std::vector<int64_t> indices;
  std::vector<int64_t> result;
};

inline IndexShape index_shape(const KernelCall& c, const at::Tensor& self,
                              const std::vector<at::Tensor>& idx) {
  if (idx.empty() || static_cast<int64_t>(idx.size()) > self.dim())
    c.decline("an index list the kernel does not take");
  IndexShape s;
  for (const at::Tensor& t : idx) {
    need_index(c, t);
    try {
      s.indices = at::infer_size(s.indices, t.sizes());
    } catch (const c10::Error&) {
      c.decline("indices that do not broadcast (PyTorch's error)");
    }
  }
  for (size_t d = 0; d < idx.size(); ++d) {
    if (self.size(static_cast<int64_t>(d)) == 0 && idx[d].numel() > 0)
      c.decline("indexing an empty dimension");
  }
  s.result = s.indices;
  for (int64_t d = static_cast<int64_t>(idx.size()); d < self.dim(); ++d)
    s.result.push_back(self.size(d));
  return s;
}

// embedding_dense_backward: the gradient's row width (the result is num_weights x width).
inline int64_t embedding_grad_width(const KernelCall& c, const at::Tensor& grad,
                                    const at::Tensor& indices) {
  need_index(c, indices);
  const int64_t width = grad.dim() == 0 ? 1 : grad.size(-1);
  if (grad.numel() != indices.numel() * width) c.decline("shapes the kernel does not take");
  return width;
}

// layer norm's input of `normalized` trailing dims: the statistics' shape (the leading dims,
// 1 for each normalized one). Other shapes are PyTorch's to judge.
inline std::vector<int64_t> norm_stat_shape(const KernelCall& c, const at::Tensor& input,
                                            const std::vector<int64_t>& normalized) {
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized.size());
  if (normalized.empty() || axis < 0 || input.numel() == 0 ||
      input.sizes().slice(axis).vec() != normalized) {
    c.decline("shapes the kernel does not take (PyTorch decides)");
  }
  std::vector<int64_t> s = input.sizes().vec();
  for (size_t i = static_cast<size_t>(axis); i < s.size(); ++i) s[i] = 1;
  return s;
}

}  // namespace torch_fl::kit

#endif  // TORCH_FL_KIT_CATEGORY_OPERANDS_H_
