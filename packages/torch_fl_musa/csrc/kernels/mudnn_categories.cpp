#include "mudnn_categories.h"

#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/TypeProperties.h>
#include <torch_fl/kit/write_back.h>

#include <algorithm>
#include <optional>
#include <vector>

namespace tfl_musa {

namespace kit = torch_fl::kit;
using kit::operand;

namespace {

// Configures `op` and runs `run(op)` on the call's handle, checking the statuses.
template <typename Op, typename Run>
void launch(const Call& c, const char* fn, Op& op, Run&& run) {
  check(run(op, handle(c)), fn, c);
}

}  // namespace

// ---- elementwise --------------------------------------------------------------------------

void unary(Call& c, dnn::Unary::Mode mode, const char* fn, const DtypeSet& dtypes, UnaryKind kind) {
  const auto p = kit::unary(c, kernel(fn, dtypes), kind);
  if (p.runs()) {
    dnn::Unary op;
    check(op.SetMode(mode), fn, c);
    dnn::Tensor out = desc(c, p.out);
    const dnn::Tensor in = desc(c, p.in[0]);
    launch(c, fn, op, [&](dnn::Unary& o, dnn::Handle& h) { return o.Run(h, out, in); });
  }
  c.finish(p.out);
}

void gelu(Call& c, dnn::Unary::Mode mode, const char* fn, const DtypeSet& dtypes) {
  if (c.str("approximate") != "none")
    c.decline("approximate='" + c.str("approximate") + "' (muDNN's GELU is the erf form)");
  unary(c, mode, fn, dtypes, UnaryKind::KeepsDtype);
}

void pow_scalar(Call& c, dnn::Unary::Mode mode, const char* fn, const DtypeSet& dtypes) {
  if (c.scalar("exponent").isComplex()) c.decline("a complex exponent");
  const auto p = kit::tensor_scalar(c, kernel(fn, dtypes), BinaryKind::Pow, "self", "exponent");
  if (p.runs()) {
    dnn::Unary op;
    check(op.SetMode(mode), fn, c);
    check(op.SetAlpha(c.scalar("exponent").toDouble()), fn, c);
    dnn::Tensor out = desc(c, p.out);
    const dnn::Tensor in = desc(c, p.in[0]);
    launch(c, fn, op, [&](dnn::Unary& o, dnn::Handle& h) { return o.Run(h, out, in); });
  }
  c.finish(p.out);
}

void binary(Call& c, dnn::Binary::Mode mode, const char* fn, const DtypeSet& dtypes,
            BinaryKind kind) {
  const auto p =
      kit::binary(c, kernel(fn, dtypes), kind, "self", c.has("other") ? "other" : "exponent");
  if (p.runs()) {
    dnn::Binary op;
    check(op.SetMode(mode), fn, c);
    dnn::Tensor out = desc(c, p.out);
    const dnn::Tensor da = desc(c, p.in[0]), db = desc(c, p.in[1]);
    launch(c, fn, op, [&](dnn::Binary& o, dnn::Handle& h) { return o.Run(h, out, da, db); });
  }
  c.finish(p.out);
}

void binary_alpha(Call& c, dnn::Binary::Mode mode, const char* fn, const DtypeSet& dtypes) {
  const auto p = kit::binary_alpha(c, kernel(fn, dtypes));
  if (p.runs()) {
    dnn::Binary op;
    check(op.SetMode(mode), fn, c);
    check(op.SetAlpha(p.alpha.toDouble()), fn, c);
    dnn::Tensor out = desc(c, p.out);
    const dnn::Tensor da = desc(c, p.in[0]), db = desc(c, p.in[1]);
    launch(c, fn, op, [&](dnn::Binary& o, dnn::Handle& h) { return o.Run(h, out, da, db); });
  }
  c.finish(p.out);
}

namespace {
// Runs a Ternary mode over three operands already of the result's shape.
void run_ternary(Call& c, dnn::Ternary::Mode mode, const char* fn, double alpha,
                 const at::Tensor& r, const at::Tensor& x, const at::Tensor& y,
                 const at::Tensor& z) {
  if (r.numel() == 0) return;
  dnn::Ternary op;
  check(op.SetMode(mode), fn, c);
  check(op.SetAlpha(alpha), fn, c);
  dnn::Tensor out = desc(c, r);
  const dnn::Tensor da = desc(c, x), db = desc(c, y), dc = desc(c, z);
  launch(c, fn, op, [&](dnn::Ternary& o, dnn::Handle& h) { return o.Run(h, out, da, db, dc); });
}
}  // namespace

void ternary_value(Call& c, dnn::Ternary::Mode mode, const char* fn, const DtypeSet& dtypes) {
  const auto p = kit::pointwise3(c, kernel(fn, dtypes));
  run_ternary(c, mode, fn, c.scalar("value").toDouble(), p.out, p.in[0], p.in[1], p.in[2]);
  c.finish(p.out);
}

void lerp(Call& c, dnn::Ternary::Mode mode, const char* fn, const DtypeSet& dtypes) {
  const at::Tensor a = c.tensor("self"), b = c.tensor("end"), w = operand(c, "weight");
  const at::ScalarType dt = a.scalar_type();
  // PyTorch requires one dtype for self, end and a tensor weight: its error to raise.
  if (b.scalar_type() != dt ||
      (!w.unsafeGetTensorImpl()->is_wrapped_number() && w.scalar_type() != dt))
    c.decline("operands of different dtypes");
  c.need(dtypes, dt, fn);
  const std::vector<int64_t> shape =
      at::infer_size(at::infer_size(a.sizes(), b.sizes()), w.sizes());
  const auto k = kernel(fn, dtypes);
  const at::Tensor x = k.input(c, a, dt, shape), y = k.input(c, b, dt, shape),
                   z = k.input(c, w, dt, shape);
  at::Tensor r = c.output(shape, dt, true, {x, y, z});
  run_ternary(c, mode, fn, 1.0, r, x, y, z);
  c.finish(r);
}

void where(Call& c, dnn::Ternary::Mode mode, const char* fn, const DtypeSet& dtypes) {
  const auto p = kit::where(c, kernel(fn, dtypes));
  run_ternary(c, mode, fn, 1.0, p.out, p.in[0], p.in[1], p.in[2]);
  c.finish(p.out);
}

void threshold_backward(Call& c, dnn::Ternary::Mode mode, const char* fn, const DtypeSet& dtypes) {
  const auto k = kernel(fn, dtypes);
  const auto p = kit::same_dtype_pair(c, k, "grad_output", "self");
  if (p.runs()) {
    const at::IntArrayRef shape = p.out.sizes();
    const at::Tensor t =
        k.input(c, at::native::wrapped_scalar_tensor(c.scalar("threshold")), p.dtype, shape);
    const at::Tensor zero =
        k.input(c, at::native::wrapped_scalar_tensor(at::Scalar(0)), p.dtype, shape);
    at::Tensor mask = kit::empty_result(c, shape, at::kBool);
    dnn::Binary gt;
    check(gt.SetMode(dnn::Binary::Mode::GT), "Binary::GT", c);
    dnn::Tensor dm = desc(c, mask);
    const dnn::Tensor dx = desc(c, p.in[1]), dt_ = desc(c, t);
    launch(c, "Binary::GT", gt,
           [&](dnn::Binary& o, dnn::Handle& h) { return o.Run(h, dm, dx, dt_); });
    run_ternary(c, mode, fn, 1.0, p.out, mask, p.in[0], zero);
  }
  c.finish(p.out);
}

// ---- reductions ---------------------------------------------------------------------------

void reduce(Call& c, dnn::Reduce::Mode mode, const char* fn, const DtypeSet& dtypes) {
  using M = dnn::Reduce::Mode;
  const at::Tensor self = c.tensor("self");
  const bool sum_like = mode == M::ADD || mode == M::MEAN;
  const bool logical = mode == M::AND || mode == M::OR;
  at::ScalarType in_dt = self.scalar_type(), out_dt = in_dt;
  if (sum_like) {
    out_dt = kit::sum_dtype(c, self, mode == M::MEAN);
    in_dt = out_dt;  // muDNN reduces in the result's dtype
    // ...which ADD and MEAN take in floating types and int32/int64 only (sum(dtype=int8) is the
    // CPU's to answer).
    static const DtypeSet kSums{at::kFloat, at::kHalf, at::kBFloat16, at::kInt, at::kLong};
    c.need(kSums, out_dt, fn);
  } else if (logical) {
    kit::need_bool_logical_result(c, self);
    out_dt = at::kBool;
  } else {
    kit::need_elements(c, self);
  }
  c.need(dtypes, in_dt, fn);
  const auto dims = kit::reduce_dims(self, kit::dims_arg(c));
  const bool keepdim = c.has("keepdim") ? c.bool_("keepdim") : false;
  const auto shape = kit::reduced_shape(self, dims, keepdim);
  const at::Tensor x = kernel(fn, dtypes).input(c, self, in_dt);
  at::Tensor r = c.output(shape, out_dt, /*elementwise=*/false, {x});
  if (r.numel() > 0) {
    // muDNN's output keeps each reduced dim with size 1.
    at::Tensor kept = r;
    if (!keepdim)
      for (int64_t d : dims) kept = kept.unsqueeze(d);
    std::vector<int> axes(dims.begin(), dims.end());
    dnn::Reduce op;
    check(op.SetMode(mode), fn, c);
    check(op.SetDim(static_cast<int>(axes.size()), axes.data()), fn, c);
    dnn::Tensor out = desc(c, kept);
    const dnn::Tensor in = desc(c, x);
    launch(c, fn, op, [&](dnn::Reduce& o, dnn::Handle& h) { return o.Run(h, out, in, nullptr); });
  }
  c.finish(r);
}

void reduce_with_indices(Call& c, const char* fn, const DtypeSet& dtypes, dnn::Reduce::Mode mode) {
  const at::Tensor self = c.tensor("self");
  const at::ScalarType dt = self.scalar_type();
  c.need(dtypes, dt, fn);
  if (self.dim() == 0 || self.numel() == 0) c.decline("a 0-dim or empty input");
  const int64_t dim = at::maybe_wrap_dim(c.int_("dim"), self.dim());
  const bool keepdim = c.bool_("keepdim");
  if (c.form() == Form::Out) {
    // Structured out= targets must have the results' dtypes: PyTorch's error otherwise.
    if (c.tensor("max").scalar_type() != dt || c.tensor("max_values").scalar_type() != at::kLong)
      c.decline("out= targets of other dtypes (PyTorch's error)");
  }
  const auto shape = kit::reduced_shape(self, {dim}, keepdim);
  at::Tensor values = kit::empty_result(c, shape, dt);
  at::Tensor indices = kit::empty_result(c, shape, at::kLong);
  // muDNN's outputs keep the reduced dim with size 1.
  const at::Tensor kv = keepdim ? values : values.unsqueeze(dim);
  const at::Tensor ki = keepdim ? indices : indices.unsqueeze(dim);
  const int axis = static_cast<int>(dim);
  dnn::Reduce op;
  check(op.SetMode(mode), fn, c);
  check(op.SetDim(1, &axis), fn, c);
  dnn::Tensor out = desc(c, kv), idx = desc(c, ki);
  const dnn::Tensor in = desc(c, self);
  launch(c, fn, op, [&](dnn::Reduce& o, dnn::Handle& h) {
    return o.RunWithIndices(h, out, idx, in, nullptr);
  });
  c.finish(std::vector<at::Tensor>{values, indices});
}

// ---- scans --------------------------------------------------------------------------------

void cumsum(Call& c, dnn::Cum::Mode mode, const char* fn, const DtypeSet& dtypes) {
  const at::Tensor self = c.tensor("self");
  const at::ScalarType rdt = kit::sum_dtype(c, self, /*mean=*/false);
  c.need(dtypes, self.scalar_type(), fn);
  // The dtypes muDNN's Cum scans in (one for its input and output).
  static const DtypeSet kScans{at::kFloat, at::kHalf, at::kBFloat16, at::kInt, at::kLong};
  c.need(kScans, rdt, fn);
  const int64_t dim = at::maybe_wrap_dim(c.int_("dim"), self.dim());
  // muDNN scans in one dtype: the input is cast to the result's first.
  const at::Tensor x = kernel(fn, dtypes).input(c, self, rdt);
  // A scan reads elements after writing earlier ones: never straight into an overlapping target.
  at::Tensor r = c.output(self.sizes(), rdt, /*elementwise=*/false, {x});
  if (r.numel() > 0) {
    // A 0-dim tensor is described as {1}: its one dim is 0.
    dnn::Cum op;
    check(op.SetMode(mode), fn, c);
    check(op.SetDim(static_cast<int>(self.dim() == 0 ? 0 : dim)), fn, c);
    dnn::Tensor out = desc(c, r);
    const dnn::Tensor in = desc(c, x);
    launch(c, fn, op, [&](dnn::Cum& o, dnn::Handle& h) { return o.Run(h, out, in, nullptr); });
  }
  c.finish(r);
}

// ---- matmul -------------------------------------------------------------------------------

void mm(Call& c, const char* fn, const DtypeSet& dtypes) {
  const at::Tensor a = c.tensor("self"), b = c.tensor("mat2");
  const auto shape = kit::matmul_shape(c, a, b, 2);
  c.need(dtypes, a.scalar_type(), fn);
  at::Tensor r = c.output(shape, a.scalar_type(), false, {a, b});
  if (r.numel() > 0) {
    if (a.size(1) == 0) {
      r.zero_();  // an empty inner dimension sums nothing
    } else {
      dnn::MatMul op;
      dnn::Tensor out = desc(c, r);
      const dnn::Tensor da = desc(c, a), db = desc(c, b);
      launch(c, fn, op, [&](dnn::MatMul& o, dnn::Handle& h) { return o.Run(h, out, da, db); });
    }
  }
  c.finish(r);
}

void bmm(Call& c, const char* fn, const DtypeSet& dtypes) {
  const at::Tensor a = c.tensor("self"), b = c.tensor("mat2");
  const auto shape = kit::matmul_shape(c, a, b, 3);
  c.need(dtypes, a.scalar_type(), fn);
  at::Tensor r = c.output(shape, a.scalar_type(), false, {a, b});
  if (r.numel() > 0) {
    if (a.size(2) == 0) {
      r.zero_();
    } else {
      dnn::BatchMatMul op;
      dnn::Tensor out = desc(c, r);
      const dnn::Tensor da = desc(c, a), db = desc(c, b);
      launch(c, fn, op, [&](dnn::BatchMatMul& o, dnn::Handle& h) { return o.Run(h, out, da, db); });
    }
  }
  c.finish(r);
}

void addmm(Call& c, const char* fn, const DtypeSet& dtypes) {
  const at::Tensor bias = c.tensor("self"), a = c.tensor("mat1"), b = c.tensor("mat2");
  const auto shape = kit::matmul_shape(c, a, b, 2);
  kit::need_bias(c, bias, a, shape);
  const at::ScalarType dt = a.scalar_type();
  c.need(dtypes, dt, fn);
  const double alpha = c.scalar("alpha").toDouble(), beta = c.scalar("beta").toDouble();
  const at::Tensor z = bias.expand(shape);
  at::Tensor r = c.output(shape, dt, false, {z, a, b});
  if (r.numel() > 0) {
    if (a.size(1) == 0 || alpha == 0.0) {
      // Nothing to multiply: beta * bias (PyTorch ignores the bias when beta is 0).
      if (beta == 0.0)
        r.zero_();
      else
        r.copy_(z * beta);
    } else {
      dnn::MatMul op;
      check(op.SetAlpha(alpha), fn, c);
      check(op.SetBeta(beta), fn, c);
      dnn::Tensor out = desc(c, r);
      const dnn::Tensor da = desc(c, a), db = desc(c, b);
      if (beta == 0.0) {
        // The bias is not read at all: NaN in it must not reach the result.
        launch(c, fn, op, [&](dnn::MatMul& o, dnn::Handle& h) { return o.Run(h, out, da, db); });
      } else {
        const dnn::Tensor dz = desc(c, z);
        launch(c, fn, op, [&](dnn::MatMul& o, dnn::Handle& h) {
          return o.RunWithBiasAdd(h, out, da, db, dz);
        });
      }
    }
  }
  c.finish(r);
}

// ---- softmax ------------------------------------------------------------------------------

void softmax(Call& c, dnn::Softmax::Mode mode, const char* fn, const DtypeSet& dtypes) {
  const at::Tensor self = c.tensor("self");
  const int64_t dim = kit::softmax_dim(c, self);
  c.need(dtypes, self.scalar_type(), fn);
  at::Tensor r = c.output(self.sizes(), self.scalar_type(), false, {self});
  if (r.numel() > 0) {
    // A 0-dim tensor is described as {1}: its one dim is 0.
    const at::Tensor x = self.dim() == 0 ? self.reshape({1}) : self;
    at::Tensor y = self.dim() == 0 ? r.view({1}) : r;
    dnn::Softmax op;
    check(op.SetMode(mode), fn, c);
    check(op.SetDim(static_cast<int>(self.dim() == 0 ? 0 : dim)), fn, c);
    dnn::Tensor out = desc(c, y);
    const dnn::Tensor in = desc(c, x);
    launch(c, fn, op, [&](dnn::Softmax& o, dnn::Handle& h) { return o.Run(h, out, in); });
  }
  c.finish(r);
}

void softmax_backward(Call& c, const char* fn, const DtypeSet& dtypes, dnn::Softmax::Mode mode) {
  const at::Tensor g = c.tensor("grad_output"), y = c.tensor("output");
  const int64_t dim = kit::softmax_backward_dim(c, g, y);
  const at::ScalarType dt = g.scalar_type();
  c.need(dtypes, dt, fn);
  at::Tensor r = c.output(g.sizes(), dt, false, {g, y});
  if (r.numel() > 0) {
    const bool scalar = g.dim() == 0;
    const at::Tensor gg = scalar ? g.reshape({1}) : g, yy = scalar ? y.reshape({1}) : y;
    at::Tensor rr = scalar ? r.view({1}) : r;
    dnn::Softmax op;
    check(op.SetMode(mode), fn, c);
    check(op.SetDim(static_cast<int>(scalar ? 0 : dim)), fn, c);
    dnn::Tensor gi = desc(c, rr);
    const dnn::Tensor out = desc(c, yy), go = desc(c, gg);
    launch(c, fn, op, [&](dnn::Softmax& o, dnn::Handle& h) { return o.RunBwd(h, gi, out, go); });
  }
  c.finish(r);
}

// ---- shape ----------------------------------------------------------------------------

void cat(Call& c, const char* fn, const DtypeSet& dtypes) {
  const std::vector<at::Tensor> ts = c.tensors("tensors");
  if (ts.empty() || ts.size() > 1024) c.decline("an empty or very long list");
  const at::Tensor& first = ts.front();
  const at::ScalarType dt = first.scalar_type();
  c.need(dtypes, dt, fn);
  for (const at::Tensor& t : ts) {
    // PyTorch wraps `dim` by the first tensor that is not a legacy 1-D empty one: its rules.
    if (t.dim() != first.dim()) c.decline("tensors of several ranks (legacy empty tensors)");
    if (t.dim() == 0) c.decline("a 0-dim tensor (PyTorch's error)");
  }
  const int64_t dim = at::maybe_wrap_dim(c.int_("dim"), first.dim());
  std::vector<int64_t> shape = first.sizes().vec();
  shape[dim] = 0;
  for (const at::Tensor& t : ts) {
    if (t.scalar_type() != dt) c.decline("tensors of several dtypes (type promotion)");
    if (!t.device().is_privateuseone()) c.decline("a tensor not on flagos");
    if (t.suggest_memory_format() != at::MemoryFormat::Contiguous)
      c.decline("an input in another memory format (the result keeps it)");
    for (int64_t d = 0; d < t.dim(); ++d)
      if (d != dim && t.size(d) != first.size(d)) c.decline("mismatched sizes (PyTorch's error)");
    shape[dim] += t.size(dim);
  }
  if (c.form() == Form::Out) {
    const at::Tensor out = c.target();
    for (const at::Tensor& t : ts)
      if (at::get_overlap_status(out, t) != at::MemOverlapStatus::No)
        c.decline("an out= that overlaps an input (PyTorch's error)");
  }
  at::Tensor r = c.output(shape, dt, /*elementwise=*/false);
  if (r.numel() > 0) {
    std::vector<dnn::Tensor> ins;
    ins.reserve(ts.size());
    for (const at::Tensor& t : ts) ins.push_back(desc(c, t));
    dnn::Concat op;
    check(op.SetAxis(static_cast<int>(dim)), fn, c);
    dnn::Tensor out = desc(c, r);
    launch(c, fn, op, [&](dnn::Concat& o, dnn::Handle& h) {
      return o.Run(h, out, static_cast<int>(ins.size()), ins.data());
    });
  }
  c.finish(r);
}

void stack(Call& c, const char* fn, const DtypeSet& dtypes) {
  const std::vector<at::Tensor> ts = c.tensors("tensors");
  if (ts.empty()) c.decline("an empty list (PyTorch's error)");
  const at::Tensor& first = ts.front();
  const at::ScalarType dt = first.scalar_type();
  c.need(dtypes, dt, fn);
  for (const at::Tensor& t : ts) {
    if (t.sizes() != first.sizes()) c.decline("inputs of different shapes (PyTorch's error)");
    if (t.scalar_type() != dt) c.decline("inputs of several dtypes (type promotion)");
    if (!t.device().is_privateuseone()) c.decline("a tensor not on flagos");
    if (t.suggest_memory_format() != at::MemoryFormat::Contiguous)
      c.decline("an input in another memory format (the result keeps it)");
  }
  const int64_t dim = at::maybe_wrap_dim(c.int_("dim"), first.dim() + 1);
  if (first.dim() + 1 > dnn::Tensor::kMaxDims)
    c.decline("a result of more dims than muDNN describes");
  if (c.form() == Form::Out) {
    const at::Tensor out = c.target();
    for (const at::Tensor& t : ts)
      if (at::get_overlap_status(out, t) != at::MemOverlapStatus::No)
        c.decline("an out= that overlaps an input (PyTorch's error)");
  }
  std::vector<int64_t> shape = first.sizes().vec();
  shape.insert(shape.begin() + dim, static_cast<int64_t>(ts.size()));
  at::Tensor r = c.output(shape, dt, /*elementwise=*/false);
  if (r.numel() > 0) {
    // Each input, unsqueezed at `dim`, is one slice of the result; a long list is joined in
    // chunks, each into its own narrow of r.
    constexpr size_t kChunk = 1024;
    dnn::Concat op;
    check(op.SetAxis(static_cast<int>(dim)), fn, c);
    for (size_t i = 0; i < ts.size(); i += kChunk) {
      const size_t n = std::min(kChunk, ts.size() - i);
      std::vector<dnn::Tensor> ins;
      ins.reserve(n);
      for (size_t j = i; j < i + n; ++j) ins.push_back(desc(c, ts[j].unsqueeze(dim)));
      const at::Tensor slice = r.narrow(dim, static_cast<int64_t>(i), static_cast<int64_t>(n));
      dnn::Tensor out = desc(c, slice);
      launch(c, fn, op, [&](dnn::Concat& o, dnn::Handle& h) {
        return o.Run(h, out, static_cast<int>(ins.size()), ins.data());
      });
    }
  }
  c.finish(r);
}

// ---- fills --------------------------------------------------------------------------------

namespace {
void fill_with(Call& c, const char* fn, const DtypeSet& dtypes, const at::Scalar& value) {
  at::Tensor self = c.tensor("self");
  const at::ScalarType dt = self.scalar_type();
  c.need(dtypes, dt, fn);
  // Writing one value through a self-overlapping view is CPU's to judge; muDNN refuses it.
  if (!kit::no_internal_overlap(self)) c.decline("a self-overlapping target");
  if (self.is_neg() || self.is_conj()) c.decline("a target with a lazy neg/conj bit");
  // The value as the target's dtype stores it; PyTorch's overflow error is raised here.
  const at::Scalar v = at::scalar_tensor(value, at::TensorOptions().dtype(dt)).item();
  if (self.numel() > 0) {
      dnn::Fill op;
    check(at::isFloatingType(dt) ? op.SetValue(v.toDouble()) : op.SetValue(v.toLong()), fn, c);
    dnn::Tensor out = desc(c, self);
    launch(c, fn, op, [&](dnn::Fill& o, dnn::Handle& h) { return o.Run(h, out); });
  }
  c.finish(self);
}
}  // namespace

void fill(Call& c, const char* fn, const DtypeSet& dtypes) {
  fill_with(c, fn, dtypes, c.scalar("value"));
}

void zero(Call& c, const char* fn, const DtypeSet& dtypes) { fill_with(c, fn, dtypes, 0); }

}  // namespace tfl_musa
