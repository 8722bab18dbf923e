#include "aclnn_categories.h"

#include <ATen/WrapDimUtils.h>
#include <ATen/native/TypeProperties.h>
#include <torch_fl/kit/conv_layout.h>

#include <algorithm>

namespace tfl_ascend {
namespace kit = torch_fl::kit;
namespace {

// cubeMathType: compute in the operands' dtype, as PyTorch does on the CPU.
constexpr int8_t kKeepDtype = 0;

}  // namespace

// ---- unary ------------------------------------------------------------------

void unary(Call& c, UnaryWs ws, RunFn run, const char* fn, const DtypeSet& dtypes, UnaryKind kind) {
  const auto p = kit::unary(c, kernel(fn, dtypes), kind);
  if (p.runs()) launch(c, ws, run, fn, Tensor(p.in[0]), Tensor(p.out));
  c.finish(p.out);
}

void gelu(Call& c, GeluWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const at::Tensor self = c.tensor("self");
  const std::string approx = c.str("approximate");
  if (approx != "none" && approx != "tanh") c.decline("approximate='" + approx + "'");
  c.need(dtypes, self.scalar_type(), fn);
  at::Tensor r = c.output(self.sizes(), self.scalar_type(), true, {self});
  // GeluV2's approximate: 0 = none (erf), 1 = tanh.
  if (r.numel() > 0) launch(c, ws, run, fn, Tensor(self), int64_t{approx == "tanh"}, Tensor(r));
  c.finish(r);
}

// ---- binary -----------------------------------------------------------------

void binary(Call& c, BinaryWs ws, RunFn run, const char* fn, const DtypeSet& dtypes,
            BinaryKind kind) {
  const auto p = kit::binary(c, kernel(fn, dtypes), kind);
  if (p.runs()) launch(c, ws, run, fn, Tensor(p.in[0]), Tensor(p.in[1]), Tensor(p.out));
  c.finish(p.out);
}

void binary_scalar(Call& c, ScalarWs ws, RunFn run, const char* fn, const DtypeSet& dtypes,
                   BinaryKind kind) {
  const auto p = kit::tensor_scalar(c, kernel(fn, dtypes), kind);
  if (p.runs())
    launch(c, ws, run, fn, Tensor(p.in[0]), Scalar(c.scalar("other"), p.dtype), Tensor(p.out));
  c.finish(p.out);
}

void binary_alpha(Call& c, AlphaWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const auto p = kit::binary_alpha(c, kernel(fn, dtypes));
  if (p.runs())
    launch(c, ws, run, fn, Tensor(p.in[0]), Tensor(p.in[1]), Scalar(p.alpha, p.dtype),
           Tensor(p.out));
  c.finish(p.out);
}

void binary_alpha_scalar(Call& c, AlphaScalarWs ws, RunFn run, const char* fn,
                         const DtypeSet& dtypes) {
  const auto p = kit::binary_alpha(c, kernel(fn, dtypes), /*scalar_other=*/true);
  if (p.runs())
    launch(c, ws, run, fn, Tensor(p.in[0]), Scalar(c.scalar("other"), p.dtype),
           Scalar(p.alpha, p.dtype), Tensor(p.out));
  c.finish(p.out);
}

void pow_tensor(Call& c, BinaryWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const auto p = kit::binary(c, kernel(fn, dtypes), BinaryKind::Pow, "self", "exponent");
  if (p.runs()) launch(c, ws, run, fn, Tensor(p.in[0]), Tensor(p.in[1]), Tensor(p.out));
  c.finish(p.out);
}

void pow_scalar(Call& c, ScalarWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const auto p = kit::tensor_scalar(c, kernel(fn, dtypes), BinaryKind::Pow, "self", "exponent");
  if (p.runs())
    launch(c, ws, run, fn, Tensor(p.in[0]), Scalar(c.scalar("exponent"), p.dtype), Tensor(p.out));
  c.finish(p.out);
}

void compare(Call& c, BinaryWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  binary(c, ws, run, fn, dtypes, BinaryKind::Compare);
}

void compare_scalar(Call& c, ScalarWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  binary_scalar(c, ws, run, fn, dtypes, BinaryKind::Compare);
}

void backward2(Call& c, BinaryWs ws, RunFn run, const char* fn, const DtypeSet& dtypes,
               const char* an, const char* bn) {
  const auto p = kit::same_dtype_pair(c, kernel(fn, dtypes), an, bn);
  if (p.runs()) launch(c, ws, run, fn, Tensor(p.in[0]), Tensor(p.in[1]), Tensor(p.out));
  c.finish(p.out);
}

void threshold_backward(Call& c, AlphaWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const auto p = kit::same_dtype_pair(c, kernel(fn, dtypes), "grad_output", "self");
  if (p.runs())
    launch(c, ws, run, fn, Tensor(p.in[0]), Tensor(p.in[1]), Scalar(c.scalar("threshold"), p.dtype),
           Tensor(p.out));
  c.finish(p.out);
}

void gelu_backward(Call& c, GeluBwdWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  std::string approx = c.str("approximate");
  if (approx != "none" && approx != "tanh") c.decline("approximate='" + approx + "'");
  const auto p = kit::same_dtype_pair(c, kernel(fn, dtypes), "grad_output", "self");
  if (p.runs())
    launch(c, ws, run, fn, Tensor(p.in[0]), Tensor(p.in[1]), approx.data(), Tensor(p.out));
  c.finish(p.out);
}

// ---- reductions -------------------------------------------------------------

namespace {
void sum_like(Call& c, SumWs ws, RunFn run, const char* fn, const DtypeSet& dtypes, bool mean) {
  const at::Tensor self = c.tensor("self");
  const at::ScalarType rdt = kit::sum_dtype(c, self, mean);
  // ACLNN reads bool but sums into arithmetic dtypes only (sum(dtype=bool) is the CPU's).
  if (rdt == at::kBool) c.decline("a bool result");
  c.need(dtypes, rdt, fn);
  c.need(dtypes, self.scalar_type(), fn);
  const auto dims = reduce_dims(self, dims_arg(c));
  const bool keepdim = c.has("keepdim") ? c.bool_("keepdim") : false;
  const auto shape = reduced_shape(self, dims, keepdim);
  const at::Tensor x = on_device(c, self, self.scalar_type());
  at::Tensor r = c.output(shape, rdt, false, {x});
  if (r.numel() > 0 && x.numel() == 0) {
    r.fill_(kit::empty_sum(mean));
  } else if (r.numel() > 0) {
    launch(c, ws, run, fn, Tensor(x), IntArray(dims), keepdim, acl_dtype(rdt), Tensor(r));
  }
  c.finish(r);
}
}  // namespace

void reduce_sum(Call& c, SumWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  sum_like(c, ws, run, fn, dtypes, /*mean=*/false);
}

void reduce_mean(Call& c, SumWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  sum_like(c, ws, run, fn, dtypes, /*mean=*/true);
}

void reduce_extremum(Call& c, ReduceWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const at::Tensor self = c.tensor("self");
  const at::ScalarType dt = self.scalar_type();
  c.need(dtypes, dt, fn);
  kit::need_elements(c, self);
  const auto dims = reduce_dims(self, dims_arg(c));
  const bool keepdim = c.bool_("keepdim");
  const auto shape = reduced_shape(self, dims, keepdim);
  at::Tensor r = c.output(shape, dt, false, {self});
  launch(c, ws, run, fn, Tensor(self), IntArray(dims), keepdim, Tensor(r));
  c.finish(r);
}

void reduce_bool(Call& c, ReduceWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const at::Tensor self = c.tensor("self");
  c.need(dtypes, self.scalar_type(), fn);
  kit::need_bool_logical_result(c, self);
  if (self.numel() == 0) c.decline("an empty input");
  const auto dims = reduce_dims(self, dims_arg(c));
  const bool keepdim = c.has("keepdim") ? c.bool_("keepdim") : false;
  const auto shape = reduced_shape(self, dims, keepdim);
  at::Tensor r = c.output(shape, at::kBool, false, {self});
  launch(c, ws, run, fn, Tensor(self), IntArray(dims), keepdim, Tensor(r));
  c.finish(r);
}

void reduce_dim_index(Call& c, DimIndexWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const at::Tensor self = c.tensor("self");
  c.need(dtypes, self.scalar_type(), fn);
  if (self.dim() == 0 || self.numel() == 0) c.decline("a 0-dim or empty input");
  const int64_t dim = at::maybe_wrap_dim(c.int_("dim"), self.dim());
  const bool keepdim = c.bool_("keepdim");
  const auto shape = reduced_shape(self, {dim}, keepdim);
  at::Tensor values = empty_result(c, shape, self.scalar_type());
  at::Tensor indices = empty_result(c, shape, at::kLong);
  launch(c, ws, run, fn, Tensor(self), dim, keepdim, Tensor(values), Tensor(indices));
  c.finish(std::vector<at::Tensor>{values, indices});
}

void reduce_arg(Call& c, ArgWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const at::Tensor self = c.tensor("self");
  c.need(dtypes, self.scalar_type(), fn);
  if (self.numel() == 0) c.decline("an empty input (PyTorch's error to raise)");
  const auto dim_arg = c.arg("dim");
  const bool keepdim = c.bool_("keepdim");
  at::Tensor x = self;
  int64_t dim = 0;
  std::vector<int64_t> shape;
  if (dim_arg.isNone()) {
    x = self.reshape({-1});  // over every element, as a flat tensor
    if (keepdim) shape.assign(self.dim(), 1);
  } else {
    if (self.dim() == 0) c.decline("a 0-dim input");
    dim = at::maybe_wrap_dim(dim_arg.toInt(), self.dim());
    shape = reduced_shape(self, {dim}, keepdim);
  }
  at::Tensor r = empty_result(c, dim_arg.isNone() ? std::vector<int64_t>{} : shape, at::kLong);
  launch(c, ws, run, fn, Tensor(x), dim, dim_arg.isNone() ? false : keepdim, Tensor(r));
  if (dim_arg.isNone() && keepdim) r = r.reshape(shape);
  c.finish(r);
}

// ---- matmul family ----------------------------------------------------------

void mm(Call& c, MmWs ws, RunFn run, const char* fn, const DtypeSet& dtypes, int rank) {
  const at::Tensor a = c.tensor("self"), b = c.tensor("mat2");
  const auto shape = kit::matmul_shape(c, a, b, rank);
  c.need(dtypes, a.scalar_type(), fn);
  at::Tensor r = c.output(shape, a.scalar_type(), false, {a, b});
  if (r.numel() > 0 && a.size(-1) == 0) {
    r.zero_();  // an empty inner dimension sums nothing
  } else if (r.numel() > 0) {
    launch(c, ws, run, fn, Tensor(a), Tensor(b), Tensor(r), kKeepDtype);
  }
  c.finish(r);
}

void addmm(Call& c, AddmmWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const at::Tensor self = c.tensor("self"), a = c.tensor("mat1"), b = c.tensor("mat2");
  const auto shape = kit::matmul_shape(c, a, b, 2);
  kit::need_bias(c, self, a, shape);
  const at::ScalarType dt = a.scalar_type();
  c.need(dtypes, dt, fn);
  if (a.size(1) == 0) c.decline("an empty inner dimension");
  if (c.form() == Form::Inplace && self.sizes() != at::IntArrayRef(shape))
    c.decline("an in-place target of another shape (PyTorch's error)");
  const at::Tensor bias = self.expand(shape);
  // Out-of-place result: addmm_ reads self as the bias while writing it.
  at::Tensor r = c.output(shape, dt, false, {bias, a, b});
  if (r.numel() > 0)
    launch(c, ws, run, fn, Tensor(bias), Tensor(a), Tensor(b), Scalar(c.scalar("beta"), dt),
           Scalar(c.scalar("alpha"), dt), Tensor(r), kKeepDtype);
  c.finish(r);
}

// ---- scans ------------------------------------------------------------------

void cumsum(Call& c, CumsumWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const at::Tensor self = c.tensor("self");
  const at::ScalarType rdt = kit::sum_dtype(c, self, /*mean=*/false);
  c.need(dtypes, rdt, fn);
  c.need(dtypes, self.scalar_type(), fn);
  const int64_t dim = at::maybe_wrap_dim(c.int_("dim"), self.dim());
  const at::Tensor x = on_device(c, self, self.scalar_type());
  at::Tensor r = c.output(self.sizes(), rdt, false, {x});
  if (r.numel() > 0) launch(c, ws, run, fn, Tensor(x), dim, acl_dtype(rdt), Tensor(r));
  c.finish(r);
}

// ---- softmax ----------------------------------------------------------------

void softmax(Call& c, SoftmaxWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const at::Tensor self = c.tensor("self");
  const int64_t dim = kit::softmax_dim(c, self);
  c.need(dtypes, self.scalar_type(), fn);
  at::Tensor r = c.output(self.sizes(), self.scalar_type(), false, {self});
  if (r.numel() > 0) launch(c, ws, run, fn, Tensor(self), dim, Tensor(r));
  c.finish(r);
}

void softmax_backward(Call& c, SoftmaxBwdWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const at::Tensor g = c.tensor("grad_output"), y = c.tensor("output");
  const int64_t dim = kit::softmax_backward_dim(c, g, y);
  c.need(dtypes, g.scalar_type(), fn);
  at::Tensor r = c.output(g.sizes(), g.scalar_type(), false, {g, y});
  if (r.numel() > 0) launch(c, ws, run, fn, Tensor(g), Tensor(y), dim, Tensor(r));
  c.finish(r);
}

// ---- losses -----------------------------------------------------------------

namespace {
// self and target of one floating dtype and shape (PyTorch broadcasts them with a warning:
// left to the CPU), reduction 0 (none), 1 (mean) or 2 (sum) as ACLNN numbers them too.
at::ScalarType loss_operands(const Call& c, const at::Tensor& self, const at::Tensor& target,
                             int64_t reduction, const DtypeSet& dtypes, const char* fn) {
  const at::ScalarType dt = self.scalar_type();
  if (target.scalar_type() != dt) c.decline("self and target of different dtypes");
  c.need(dtypes, dt, fn);
  if (self.sizes() != target.sizes()) c.decline("self and target of different shapes");
  if (reduction < 0 || reduction > 2) c.decline("reduction " + std::to_string(reduction));
  if (self.numel() == 0) c.decline("an empty input");
  return dt;
}
}  // namespace

void mse_loss(Call& c, MseLossWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const at::Tensor self = c.tensor("self"), target = c.tensor("target");
  const int64_t reduction = c.int_("reduction");
  const at::ScalarType dt = loss_operands(c, self, target, reduction, dtypes, fn);
  const std::vector<int64_t> shape =
      reduction == 0 ? self.sizes().vec() : std::vector<int64_t>{};  // none keeps the shape
  at::Tensor r = c.output(shape, dt, reduction == 0, {self, target});
  launch(c, ws, run, fn, Tensor(self), Tensor(target), reduction, Tensor(r));
  c.finish(r);
}

void mse_loss_backward(Call& c, MseLossBwdWs ws, RunFn run, const char* fn,
                       const DtypeSet& dtypes) {
  const at::Tensor g = c.tensor("grad_output"), self = c.tensor("self");
  const at::Tensor target = c.tensor("target");
  const int64_t reduction = c.int_("reduction");
  const at::ScalarType dt = loss_operands(c, self, target, reduction, dtypes, fn);
  if (g.scalar_type() != dt) c.decline("a grad_output of another dtype");
  if (reduction == 0 ? g.sizes() != self.sizes() : g.dim() != 0)
    c.decline("a grad_output of another shape than the loss");
  at::Tensor r = c.output(self.sizes(), dt, false, {g, self, target});
  launch(c, ws, run, fn, Tensor(g), Tensor(self), Tensor(target), reduction, Tensor(r));
  c.finish(r);
}

// ---- norms ------------------------------------------------------------------

void layer_norm(Call& c, LayerNormWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const at::Tensor input = c.tensor("input");
  const auto w = c.opt_tensor("weight"), b = c.opt_tensor("bias");
  const std::vector<int64_t> norm = c.ints("normalized_shape");
  const at::ScalarType dt = input.scalar_type();
  if ((w && w->scalar_type() != dt) || (b && b->scalar_type() != dt)) c.decline("mixed dtypes");
  c.need(dtypes, dt, fn);
  const std::vector<int64_t> stats = kit::norm_stat_shape(c, input, norm);
  at::Tensor out = empty_result(c, input.sizes(), dt);
  at::Tensor mean = empty_result(c, stats, dt), rstd = empty_result(c, stats, dt);
  launch(c, ws, run, fn, Tensor(input), IntArray(norm), w ? Tensor(*w) : Tensor(),
         b ? Tensor(*b) : Tensor(), c.double_("eps"), Tensor(out), Tensor(mean), Tensor(rstd));
  c.finish(std::vector<at::Tensor>{out, mean, rstd});
}

void layer_norm_backward(Call& c, LayerNormBwdWs ws, RunFn run, const char* fn,
                         const DtypeSet& dtypes) {
  const at::Tensor g = c.tensor("grad_out"), input = c.tensor("input");
  const at::Tensor mean = c.tensor("mean"), rstd = c.tensor("rstd");
  const auto w = c.opt_tensor("weight"), b = c.opt_tensor("bias");
  const std::vector<int64_t> norm = c.ints("normalized_shape");
  const at::ScalarType dt = input.scalar_type();
  if (g.scalar_type() != dt || (w && w->scalar_type() != dt) || (b && b->scalar_type() != dt))
    c.decline("mixed dtypes");
  c.need(dtypes, dt, fn);
  (void)kit::norm_stat_shape(c, input, norm);
  std::vector<bool> mask = c.bools("output_mask");
  // No weight (bias): no gradient for it, as PyTorch returns an undefined tensor.
  mask[1] = mask[1] && w.has_value();
  mask[2] = mask[2] && b.has_value();
  at::Tensor gi, gw, gb;
  if (mask[0]) gi = empty_result(c, input.sizes(), dt);
  if (mask[1]) gw = empty_result(c, w->sizes(), dt);
  if (mask[2]) gb = empty_result(c, b->sizes(), dt);
  launch(c, ws, run, fn, Tensor(g), Tensor(input), IntArray(norm), Tensor(mean), Tensor(rstd),
         w ? Tensor(*w) : Tensor(), b ? Tensor(*b) : Tensor(), BoolArray(mask),
         gi.defined() ? Tensor(gi) : Tensor(), gw.defined() ? Tensor(gw) : Tensor(),
         gb.defined() ? Tensor(gb) : Tensor());
  c.finish(std::vector<at::Tensor>{gi, gw, gb});
}

void rms_norm(Call& c, RmsNormWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const at::Tensor input = c.tensor("input");
  const auto w = c.opt_tensor("weight");
  const std::vector<int64_t> norm = c.ints("normalized_shape");
  const at::ScalarType dt = input.scalar_type();
  if (w && w->scalar_type() != dt) c.decline("mixed dtypes");
  c.need(dtypes, dt, fn);
  const std::vector<int64_t> stats = kit::norm_stat_shape(c, input, norm);
  const double eps = c.opt_double("eps").value_or(dt == at::kHalf       ? 0.0009765625
                                                  : dt == at::kBFloat16 ? 0.0078125
                                                                        : 1.1920928955078125e-07);
  // RmsNorm's gamma is not optional: no weight is a weight of ones.
  const at::Tensor gamma = w ? *w : at::ones(norm, input.options());
  at::Tensor out = empty_result(c, input.sizes(), dt);
  at::Tensor rstd = empty_result(c, stats, at::kFloat);
  launch(c, ws, run, fn, Tensor(input), Tensor(gamma), eps, Tensor(out), Tensor(rstd));
  c.finish(std::vector<at::Tensor>{out, rstd});
}

// ---- indexing ---------------------------------------------------------------

void embedding(Call& c, EmbeddingWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const at::Tensor weight = c.tensor("weight"), indices = c.tensor("indices");
  c.need(dtypes, weight.scalar_type(), fn);
  kit::need_index(c, indices);
  if (weight.dim() != 2) c.decline("a weight that is not 2-D (PyTorch's error)");
  std::vector<int64_t> shape = indices.sizes().vec();
  shape.push_back(weight.size(1));
  at::Tensor r = empty_result(c, shape, weight.scalar_type());
  if (r.numel() > 0) launch(c, ws, run, fn, Tensor(weight), Tensor(indices), Tensor(r));
  c.finish(r);
}

void embedding_backward(Call& c, EmbeddingBwdWs ws, RunFn run, const char* fn,
                        const DtypeSet& dtypes) {
  const at::Tensor grad = c.tensor("grad_output"), indices = c.tensor("indices");
  const at::ScalarType dt = grad.scalar_type();
  c.need(dtypes, dt, fn);
  const int64_t width = kit::embedding_grad_width(c, grad, indices);
  const int64_t num_weights = c.int_("num_weights");
  at::Tensor r = c.output({num_weights, width}, dt, false, {grad, indices});
  if (r.numel() > 0) {
    if (indices.numel() == 0) {
      r.zero_();
    } else {
      const int64_t pad = c.int_("padding_idx");
      // ACLNN's "no padding index" is any value outside [0, numWeights).
      const uint64_t padding = pad < 0 ? static_cast<uint64_t>(num_weights) : pad;
      launch(c, ws, run, fn, Tensor(grad.reshape({indices.numel(), width})),
             Tensor(indices.reshape({-1})), static_cast<uint64_t>(num_weights), padding,
             c.bool_("scale_grad_by_freq"), Tensor(r));
    }
  }
  c.finish(r);
}

void index_select(Call& c, IndexWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const at::Tensor self = c.tensor("self"), index = c.tensor("index");
  c.need(dtypes, self.scalar_type(), fn);
  const auto [dim, shape] = kit::index_select_shape(c, self, index);
  at::Tensor r = c.output(shape, self.scalar_type(), false, {self, index});
  if (r.numel() > 0)
    launch(c, ws, run, fn, Tensor(self), dim, Tensor(index.reshape({-1})), Tensor(r));
  c.finish(r);
}

void gather(Call& c, IndexWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const at::Tensor self = c.tensor("self"), index = c.tensor("index");
  c.need(dtypes, self.scalar_type(), fn);
  kit::need_index(c, index);
  if (self.dim() != index.dim() || self.dim() == 0)
    c.decline("ranks the kernel does not take (PyTorch decides)");
  const int64_t dim = at::maybe_wrap_dim(c.int_("dim"), self.dim());
  at::Tensor r = c.output(index.sizes(), self.scalar_type(), false, {self, index});
  if (r.numel() > 0) launch(c, ws, run, fn, Tensor(self), dim, Tensor(index), Tensor(r));
  c.finish(r);
}

void scatter(Call& c, ScatterWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const at::Tensor self = c.tensor("self"), index = c.tensor("index"), src = c.tensor("src");
  const at::ScalarType dt = self.scalar_type();
  if (src.scalar_type() != dt) c.decline("operands of different dtypes (PyTorch's error)");
  c.need(dtypes, dt, fn);
  kit::need_index(c, index);
  if (self.dim() != index.dim() || self.dim() == 0) c.decline("ranks the kernel does not take");
  int64_t reduce = 0;  // ACLNN Scatter: 0 none, 1 add, 2 multiply
  if (c.has("reduce")) {
    const std::string how = c.str("reduce");
    if (how == "add") {
      reduce = 1;
    } else if (how == "multiply") {
      reduce = 2;
    } else {
      c.decline("reduce='" + how + "' (PyTorch's error)");
    }
  }
  const int64_t dim = at::maybe_wrap_dim(c.int_("dim"), self.dim());
  // The result starts as self: writing it in place over self is what scatter_ means.
  at::Tensor r = c.output(self.sizes(), dt, true, {self});
  if (r.numel() > 0)
    launch(c, ws, run, fn, Tensor(self), dim, Tensor(index), Tensor(src), reduce, Tensor(r));
  c.finish(r);
}

void scatter_add(Call& c, ScatterAddWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const at::Tensor self = c.tensor("self"), index = c.tensor("index"), src = c.tensor("src");
  const at::ScalarType dt = self.scalar_type();
  if (src.scalar_type() != dt) c.decline("operands of different dtypes (PyTorch's error)");
  c.need(dtypes, dt, fn);
  kit::need_index(c, index);
  if (self.dim() != index.dim() || self.dim() == 0) c.decline("ranks the kernel does not take");
  const int64_t dim = at::maybe_wrap_dim(c.int_("dim"), self.dim());
  at::Tensor r = c.output(self.sizes(), dt, true, {self});
  if (r.numel() > 0)
    launch(c, ws, run, fn, Tensor(self), dim, Tensor(index), Tensor(src), Tensor(r));
  c.finish(r);
}

// ---- lists ------------------------------------------------------------------

namespace {
// ins joined along `dim` into `out`, at most kMaxTensorList per aclTensorList: a longer list is
// joined in stages (chunks of 50 into intermediates, then those), every stage an ACLNN call.
void cat_into(const Call& c, ListWs ws, RunFn run, const char* fn,
              const std::vector<at::Tensor>& ins, int64_t dim, const at::Tensor& out) {
  if (ins.size() <= kMaxTensorList) {
    launch(c, ws, run, fn, TensorList(ins), dim, Tensor(out));
    return;
  }
  std::vector<at::Tensor> parts;
  for (size_t i = 0; i < ins.size(); i += kMaxTensorList) {
    const std::vector<at::Tensor> chunk(ins.begin() + i,
                                        ins.begin() + std::min(ins.size(), i + kMaxTensorList));
    std::vector<int64_t> shape = chunk[0].sizes().vec();
    shape[dim] = 0;
    for (const auto& t : chunk) shape[dim] += t.size(dim);
    at::Tensor part = empty_result(c, shape, out.scalar_type());
    cat_into(c, ws, run, fn, chunk, dim, part);
    parts.push_back(part);
  }
  cat_into(c, ws, run, fn, parts, dim, out);
}
}  // namespace

void cat(Call& c, ListWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const std::vector<at::Tensor> all = c.tensors("tensors");
  const kit::CatShape s = kit::cat_shape(c, all);
  const at::ScalarType dt = at::native::result_type(all);
  c.need(dtypes, dt, fn);
  std::vector<at::Tensor> parts;
  for (const auto& t : s.inputs) {
    if (t.numel() > 0) parts.push_back(on_device(c, t, dt));
  }
  at::Tensor r = empty_result(c, s.shape, dt);
  if (r.numel() > 0) cat_into(c, ws, run, fn, parts, s.dim, r);
  c.finish(r);
}

void stack(Call& c, ListWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const std::vector<at::Tensor> ins = c.tensors("tensors");
  if (ins.empty()) c.decline("an empty list (PyTorch's error)");
  const at::ScalarType dt = at::native::result_type(ins);
  c.need(dtypes, dt, fn);
  for (const auto& t : ins) {
    if (t.sizes() != ins[0].sizes()) c.decline("inputs of different shapes (PyTorch's error)");
  }
  const int64_t dim = at::maybe_wrap_dim(c.int_("dim"), ins[0].dim() + 1);
  std::vector<int64_t> shape = ins[0].sizes().vec();
  shape.insert(shape.begin() + dim, static_cast<int64_t>(ins.size()));
  std::vector<at::Tensor> parts;
  for (const auto& t : ins) parts.push_back(on_device(c, t, dt));
  at::Tensor r = empty_result(c, shape, dt);
  if (r.numel() > 0) {
    if (parts.size() <= kMaxTensorList) {
      launch(c, ws, run, fn, TensorList(parts), dim, Tensor(r));
    } else {
      // Stacking a list longer than ACLNN takes is stacking each chunk into its slice of r.
      for (size_t i = 0; i < parts.size(); i += kMaxTensorList) {
        const size_t n = std::min(parts.size() - i, kMaxTensorList);
        const std::vector<at::Tensor> chunk(parts.begin() + i, parts.begin() + i + n);
        at::Tensor slice = r.narrow(dim, static_cast<int64_t>(i), static_cast<int64_t>(n));
        launch(c, ws, run, fn, TensorList(chunk), dim, Tensor(slice));
      }
    }
  }
  c.finish(r);
}

// ---- selection, fills, factories ---------------------------------------------

void where(Call& c, WhereWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const auto p = kit::where(c, kernel(fn, dtypes));
  if (p.runs())
    launch(c, ws, run, fn, Tensor(p.in[0]), Tensor(p.in[1]), Tensor(p.in[2]), Tensor(p.out));
  c.finish(p.out);
}

void masked_fill(Call& c, MaskedFillWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const auto p = kit::masked_fill(c, kernel(fn, dtypes));
  if (p.runs()) {
    if (!p.out.is_same(p.in[0])) p.out.copy_(p.in[0]);  // the fill is in place on the result
    launch(c, ws, run, fn, Tensor(p.out), Tensor(p.in[1]), Scalar(c.scalar("value"), p.dtype));
  }
  c.finish(p.out);
}

void fill(Call& c, FillWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const auto p = kit::fill_target(c, kernel(fn, dtypes));
  if (p.runs()) launch(c, ws, run, fn, Tensor(p.out), Scalar(c.scalar("value"), p.dtype));
  c.finish(p.out);
}

void zero(Call& c, ZeroWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const auto p = kit::fill_target(c, kernel(fn, dtypes));
  if (p.runs()) launch(c, ws, run, fn, Tensor(p.out));
  c.finish(p.out);
}

void arange(Call& c, ArangeWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const at::ScalarType dt = c.target().scalar_type();
  c.need(dtypes, dt, fn);
  const int64_t n = kit::arange_length(c);
  at::Tensor r = c.output({n}, dt, false, {});
  if (n > 0)
    launch(c, ws, run, fn, Scalar(c.scalar("start"), dt), Scalar(c.scalar("end"), dt),
           Scalar(c.scalar("step"), dt), Tensor(r));
  c.finish(r);
}

// ---- convolution -------------------------------------------------------------

namespace {
std::vector<int64_t> per_dim(std::vector<int64_t> v, size_t n) {
  if (v.size() == 1 && n > 1) v.assign(n, v[0]);
  return v;
}
}  // namespace

void convolution(Call& c, ConvWs ws, RunFn run, const char* fn, const DtypeSet& dtypes) {
  const at::Tensor input = c.tensor("input"), weight = c.tensor("weight");
  const auto bias = c.opt_tensor("bias");
  const at::ScalarType dt = input.scalar_type();
  if (weight.scalar_type() != dt || (bias && bias->scalar_type() != dt)) c.decline("mixed dtypes");
  c.need(dtypes, dt, fn);
  if (input.dim() < 3 || input.dim() > 5 || weight.dim() != input.dim() || input.numel() == 0)
    c.decline("shapes the kernel does not take (PyTorch decides)");
  const size_t n = static_cast<size_t>(input.dim() - 2);
  const auto stride = per_dim(c.ints("stride"), n), padding = per_dim(c.ints("padding"), n),
             dilation = per_dim(c.ints("dilation"), n),
             out_pad = per_dim(c.ints("output_padding"), n);
  if (stride.size() != n || padding.size() != n || dilation.size() != n || out_pad.size() != n)
    c.decline("argument lengths PyTorch rejects");
  const bool transposed = c.bool_("transposed");
  const int64_t groups = c.int_("groups");
  std::vector<int64_t> shape{input.size(0), transposed ? weight.size(1) * groups : weight.size(0)};
  for (size_t i = 0; i < n; ++i) {
    const int64_t in = input.size(2 + i), k = weight.size(2 + i);
    const int64_t o =
        transposed ? (in - 1) * stride[i] - 2 * padding[i] + dilation[i] * (k - 1) + out_pad[i] + 1
                   : (in + 2 * padding[i] - dilation[i] * (k - 1) - 1) / stride[i] + 1;
    if (o <= 0) c.decline("an empty output (PyTorch's error)");
    shape.push_back(o);
  }
  // The layout every flagos convolution answers in (and fake kernels predict).
  const auto format = torch_fl::kit::conv_memory_format(input, weight);
  at::Tensor r = empty_result(c, shape, dt, format);
  launch(c, ws, run, fn, Tensor(input), Tensor(weight), bias ? Tensor(*bias) : Tensor(),
         IntArray(stride), IntArray(padding), IntArray(dilation), transposed, IntArray(out_pad),
         groups, Tensor(r), kKeepDtype);
  c.finish(r);
}

void convolution_backward(Call& c, ConvBwdWs ws, RunFn run, const char* fn,
                          const DtypeSet& dtypes) {
  const at::Tensor g = c.tensor("grad_output"), input = c.tensor("input"),
                   weight = c.tensor("weight");
  const at::ScalarType dt = input.scalar_type();
  if (weight.scalar_type() != dt || g.scalar_type() != dt) c.decline("mixed dtypes");
  c.need(dtypes, dt, fn);
  if (input.dim() < 3 || input.dim() > 5 || weight.dim() != input.dim() || input.numel() == 0)
    c.decline("shapes the kernel does not take (PyTorch decides)");
  const size_t n = static_cast<size_t>(input.dim() - 2);
  const auto stride = per_dim(c.ints("stride"), n), padding = per_dim(c.ints("padding"), n),
             dilation = per_dim(c.ints("dilation"), n),
             out_pad = per_dim(c.ints("output_padding"), n);
  const auto bias_sizes = c.opt_ints("bias_sizes");
  std::vector<bool> mask = c.bools("output_mask");
  const int64_t groups = c.int_("groups");
  const bool transposed = c.bool_("transposed");
  const std::vector<int64_t> bsizes = bias_sizes ? *bias_sizes : std::vector<int64_t>{g.size(1)};
  at::Tensor gi, gw, gb;
  const auto format = torch_fl::kit::conv_memory_format(input, weight);
  if (mask[0]) gi = empty_result(c, input.sizes(), dt, format);
  if (mask[1]) gw = empty_result(c, weight.sizes(), dt, format);
  if (mask[2]) gb = empty_result(c, bsizes, dt);
  launch(c, ws, run, fn, Tensor(g), Tensor(input), Tensor(weight), IntArray(bsizes),
         IntArray(stride), IntArray(padding), IntArray(dilation), transposed, IntArray(out_pad),
         static_cast<int>(groups), BoolArray(mask), kKeepDtype,
         gi.defined() ? Tensor(gi) : Tensor(), gw.defined() ? Tensor(gw) : Tensor(),
         gb.defined() ? Tensor(gb) : Tensor());
  c.finish(std::vector<at::Tensor>{gi, gw, gb});
}

}  // namespace tfl_ascend
