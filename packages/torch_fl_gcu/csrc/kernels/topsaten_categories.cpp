#include "topsaten_categories.h"

#include <ATen/ExpandUtils.h>
#include <ATen/ScalarOps.h>
#include <ATen/WrapDimUtils.h>
#include <c10/core/DeviceGuard.h>

#include <cmath>

namespace tfl_gcu {
namespace {

// Device current, topsaten initialised, the flagos current stream.
struct Prologue {
  explicit Prologue(const Call& c) : guard(c.device()) {
    ensure_init();
    stream = current_stream(c.device());
  }
  c10::DeviceGuard guard;
  topsStream_t stream = nullptr;
};

std::string dtype_text(at::ScalarType t) {
  return std::string("compute dtype ") + c10::toString(t);
}

void need(const Call& c, bool ok, at::ScalarType t) {
  if (!ok) c.decline(dtype_text(t) + " has no topsaten kernel");
}

}  // namespace

void unary(Call& c, UnaryFn fn, const char* tops, UnaryKind kind) {
  const at::Tensor self = c.tensor("self");
  const auto [dt, out_dt] = torch_fl::kit::unary_dtypes(self.scalar_type(), kind);
  switch (kind) {
    case UnaryKind::KeepsDtype:
      need(c, arithmetic_dtype(dt), dt);
      break;
    case UnaryKind::ToFloat:
      need(c, arithmetic_dtype(dt) && at::isFloatingType(dt), dt);  // complex has no kernel
      break;
    case UnaryKind::Logical:
      need(c, storage_dtype(dt), dt);
      break;
  }
  Prologue p(c);
  const at::Tensor x = prepare(c, self, dt);
  at::Tensor r = empty_result(c, self.sizes(), out_dt);
  Desc o(r), a(x);
  check(fn(o, a, p.stream), tops, c);
  c.finish(r);
}

void binary(Call& c, BinaryFn fn, const char* tops, BinaryKind kind, const char* an,
            const char* bn) {
  const at::Tensor a = operand(c, an), b = operand(c, bn);
  const auto [dt, out_dt] = torch_fl::kit::binary_dtypes(at::result_type(a, b), kind);
  switch (kind) {
    case BinaryKind::Arith:
    case BinaryKind::TrueDiv:
      need(c, arithmetic_dtype(dt), dt);
      break;
    case BinaryKind::Pow:
      need(c, arithmetic_dtype(dt) && at::isFloatingType(dt), dt);
      break;
    case BinaryKind::Compare:
      need(c, storage_dtype(dt), dt);
      break;
  }
  const std::vector<int64_t> shape = at::infer_size(a.sizes(), b.sizes());
  Prologue p(c);
  const at::Tensor x = prepare(c, a, dt, shape), y = prepare(c, b, dt, shape);
  at::Tensor r = empty_result(c, shape, out_dt);
  Desc o(r), da(x), db(y);
  check(fn(o, da, db, p.stream), tops, c);
  c.finish(r);
}

void binary_alpha(Call& c, AlphaFn fn, const char* tops) {
  const at::Tensor a = operand(c, "self"), b = operand(c, "other");
  const at::ScalarType dt = at::result_type(a, b);
  need(c, arithmetic_dtype(dt), dt);
  const at::Scalar alpha = torch_fl::kit::checked_alpha(c, dt);
  const std::vector<int64_t> shape = at::infer_size(a.sizes(), b.sizes());
  Prologue p(c);
  const at::Tensor x = prepare(c, a, dt, shape), y = prepare(c, b, dt, shape);
  at::Tensor r = empty_result(c, shape, dt);
  Desc o(r), da(x), db(y);
  check(fn(o, da, db, tops_scalar(alpha), p.stream), tops, c);
  c.finish(r);
}

void binary_scalar(Call& c, AlphaFn fn, const char* tops, const char* an, const char* bn,
                   const char* sn) {
  const at::Tensor a = c.tensor(an), b = c.tensor(bn);
  const at::ScalarType dt = a.scalar_type();
  if (b.scalar_type() != dt) c.decline("operands of different dtypes");
  need(c, arithmetic_dtype(dt), dt);
  const std::vector<int64_t> shape = at::infer_size(a.sizes(), b.sizes());
  Prologue p(c);
  const at::Tensor x = prepare(c, a, dt, shape), y = prepare(c, b, dt, shape);
  at::Tensor r = empty_result(c, shape, dt);
  if (r.numel() > 0) {
    Desc o(r), da(x), db(y);
    check(fn(o, da, db, tops_scalar(c.scalar(sn)), p.stream), tops, c);
  }
  c.finish(r);
}

void reduce_sum(Call& c, SumFn fn, const char* tops, bool mean) {
  const at::Tensor self = c.tensor("self");
  std::optional<at::ScalarType> dtype = c.has("dtype") ? c.opt_dtype("dtype") : std::nullopt;
  if (!dtype && c.form() == Form::Out) dtype = c.target().scalar_type();
  at::ScalarType rdt;
  if (dtype) {
    rdt = *dtype;
  } else if (!mean && at::isIntegralType(self.scalar_type(), /*includeBool=*/true)) {
    rdt = at::kLong;  // PyTorch sums integers into int64
  } else {
    rdt = self.scalar_type();
  }
  need(c, arithmetic_dtype(rdt) && (!mean || at::isFloatingType(rdt)), rdt);
  need(c, storage_dtype(self.scalar_type()), self.scalar_type());
  const auto dims = reduce_dims(self, torch_fl::kit::dims_arg(c));
  const bool keepdim = c.has("keepdim") ? c.bool_("keepdim") : false;
  const auto shape = reduced_shape(self, dims, keepdim);
  Prologue p(c);
  const at::Tensor x = prepare(c, self, rdt);
  at::Tensor r = empty_result(c, shape, rdt);
  Desc o(r), a(x);
  check(fn(o, a, tops_size(dims), keepdim, tops_dtype(rdt), p.stream), tops, c);
  c.finish(r);
}

void reduce_extremum(Call& c, ExtremumFn fn, const char* tops) {
  const at::Tensor self = c.tensor("self");
  const at::ScalarType dt = self.scalar_type();
  need(c, arithmetic_dtype(dt), dt);
  TORCH_CHECK(self.numel() > 0, c.name(),
              ": Expected reduction dim to be specified for input.numel() == 0.");
  const auto dims = reduce_dims(self, torch_fl::kit::dims_arg(c));
  const bool keepdim = c.bool_("keepdim");
  const auto shape = reduced_shape(self, dims, keepdim);
  Prologue p(c);
  const at::Tensor x = prepare(c, self, dt);
  at::Tensor r = empty_result(c, shape, dt);
  Desc o(r), a(x);
  check(fn(o, a, tops_size(dims), keepdim, p.stream), tops, c);
  c.finish(r);
}

void reduce_all(Call& c, UnaryFn fn, const char* tops) {
  const at::Tensor self = c.tensor("self");
  need(c, storage_dtype(self.scalar_type()), self.scalar_type());
  if (self.numel() == 0) c.decline("an empty input");
  Prologue p(c);
  const at::Tensor x = prepare(c, self, self.scalar_type());
  at::Tensor r = empty_result(c, {}, at::kBool);
  Desc o(r), a(x);
  check(fn(o, a, p.stream), tops, c);
  c.finish(r);
}

void vector_norm(Call& c, NormFn fn, const char* tops) {
  const at::Tensor self = c.tensor("self");
  const auto dtype = c.opt_dtype("dtype");
  const at::ScalarType rdt = dtype ? *dtype : self.scalar_type();
  need(c, at::isFloatingType(rdt) && arithmetic_dtype(rdt), rdt);
  need(c, arithmetic_dtype(self.scalar_type()), self.scalar_type());
  const auto dims = reduce_dims(self, torch_fl::kit::dims_arg(c));
  const bool keepdim = c.bool_("keepdim");
  const auto shape = reduced_shape(self, dims, keepdim);
  Prologue p(c);
  const at::Tensor x = prepare(c, self, rdt);
  at::Tensor r = empty_result(c, shape, rdt);
  Desc o(r), a(x);
  check(fn(o, a, tops_scalar(c.scalar("ord")), tops_size(dims), keepdim, tops_dtype(rdt), p.stream),
        tops, c);
  c.finish(r);
}

void mm(Call& c, BinaryFn fn, const char* tops, int rank) {
  const at::Tensor a = c.tensor("self"), b = c.tensor("mat2");
  const at::ScalarType dt = a.scalar_type();
  if (b.scalar_type() != dt) c.decline("operands of different dtypes (PyTorch's error to raise)");
  need(c, at::isFloatingType(dt) && arithmetic_dtype(dt), dt);
  if (a.dim() != rank || b.dim() != rank)
    c.decline("operands of the wrong rank (PyTorch's error to raise)");
  if (a.size(-1) != b.size(-2) || (rank == 3 && a.size(0) != b.size(0))) {
    c.decline("operand shapes that do not multiply (PyTorch's error to raise)");
  }
  std::vector<int64_t> shape = a.sizes().vec();
  shape.back() = b.size(-1);
  Prologue p(c);
  const at::Tensor x = prepare(c, a, dt), y = prepare(c, b, dt);
  at::Tensor r = empty_result(c, shape, dt);
  if (r.numel() > 0) {
    if (a.size(-1) == 0) {
      r.zero_();
    } else {
      Desc o(r), da(x), db(y);
      check(fn(o, da, db, p.stream), tops, c);
    }
  }
  c.finish(r);
}

void addmm(Call& c, AddmmFn fn, const char* tops) {
  const at::Tensor in = c.tensor("self"), a = c.tensor("mat1"), b = c.tensor("mat2");
  const at::ScalarType dt = a.scalar_type();
  if (b.scalar_type() != dt || in.scalar_type() != dt) c.decline("operands of different dtypes");
  need(c, at::isFloatingType(dt) && arithmetic_dtype(dt), dt);
  if (a.dim() != 2 || b.dim() != 2 || a.size(1) != b.size(0) || a.size(1) == 0) {
    c.decline("operand shapes the kernel does not take (PyTorch decides)");
  }
  const std::vector<int64_t> shape{a.size(0), b.size(1)};
  if (at::infer_size(in.sizes(), shape) != shape)
    c.decline("self does not broadcast to the product");
  Prologue p(c);
  const at::Tensor s = prepare(c, in, dt, at::IntArrayRef(shape)), x = prepare(c, a, dt),
                   y = prepare(c, b, dt);
  at::Tensor r = empty_result(c, shape, dt);
  if (r.numel() > 0) {
    Desc o(r), ds(s), da(x), db(y);
    check(
        fn(o, ds, da, db, tops_scalar(c.scalar("beta")), tops_scalar(c.scalar("alpha")), p.stream),
        tops, c);
  }
  c.finish(r);
}

void softmax(Call& c, SoftmaxFn fn, const char* tops) {
  const at::Tensor self = c.tensor("self");
  const bool h2f = c.bool_("half_to_float");
  const at::ScalarType dt = self.scalar_type();
  need(c, at::isFloatingType(dt) && arithmetic_dtype(dt), dt);
  if (h2f && dt != at::kHalf) c.decline("half_to_float on a non-half input");
  if (self.numel() == 0) c.decline("an empty input");
  const int64_t dim = at::maybe_wrap_dim(c.int_("dim"), std::max<int64_t>(self.dim(), 1));
  Prologue p(c);
  const at::Tensor x = prepare(c, self, dt);
  at::Tensor r = empty_result(c, self.sizes(), h2f ? at::kFloat : dt);
  Desc o(r), a(x);
  check(fn(o, a, dim, h2f, p.stream), tops, c);
  c.finish(r);
}

void softmax_backward(Call& c, SoftmaxBwdFn fn, const char* tops) {
  const at::Tensor go = c.tensor("grad_output"), out = c.tensor("output");
  const at::ScalarType dt = static_cast<at::ScalarType>(c.arg("input_dtype").toScalarType());
  if (go.scalar_type() != dt || out.scalar_type() != dt)
    c.decline("mixed dtypes (half_to_float backward)");
  need(c, at::isFloatingType(dt) && arithmetic_dtype(dt), dt);
  if (go.sizes() != out.sizes() || out.numel() == 0) c.decline("shapes the kernel does not take");
  const int64_t dim = at::maybe_wrap_dim(c.int_("dim"), std::max<int64_t>(out.dim(), 1));
  Prologue p(c);
  const at::Tensor g = prepare(c, go, dt), y = prepare(c, out, dt);
  at::Tensor r = empty_result(c, out.sizes(), dt);
  Desc o(r), dg(g), dy(y);
  check(fn(o, dg, dy, dim, p.stream), tops, c);
  c.finish(r);
}

void layer_norm(Call& c, LayerNormFn fn, const char* tops) {
  const at::Tensor input = c.tensor("input");
  const auto w = c.opt_tensor("weight"), b = c.opt_tensor("bias");
  const std::vector<int64_t> normalized = c.ints("normalized_shape");
  const at::ScalarType dt = input.scalar_type();
  if (dt != at::kFloat || (w && w->scalar_type() != dt) || (b && b->scalar_type() != dt)) {
    c.decline("layer norm runs in float32 only");
  }
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized.size());
  if (normalized.empty() || axis < 0 || input.numel() == 0 ||
      input.sizes().slice(axis).vec() != normalized) {
    c.decline("shapes the kernel does not take (PyTorch decides)");
  }
  std::vector<int64_t> stat_shape = input.sizes().slice(0, axis).vec();
  stat_shape.resize(input.dim(), 1);
  Prologue p(c);
  const at::Tensor x = prepare(c, input, dt);
  std::optional<at::Tensor> wc, bc;
  if (w) wc = prepare(c, *w, dt, at::IntArrayRef(normalized));
  if (b) bc = prepare(c, *b, dt, at::IntArrayRef(normalized));
  at::Tensor out = empty_result(c, input.sizes(), dt);
  at::Tensor mean = empty_result(c, stat_shape, dt), rstd = empty_result(c, stat_shape, dt);
  Desc o(out), m(mean), rs(rstd), dx(x);
  Desc dw = wc ? Desc(*wc) : Desc(), db = bc ? Desc(*bc) : Desc();
  check(fn(o, m, rs, dx, tops_size(normalized), dw, db, c.double_("eps"), p.stream), tops, c);
  c.finish(std::vector<at::Tensor>{out, mean, rstd});
}

void arange(Call& c, ArangeFn fn, const char* tops) {
  const at::Tensor out = c.target();
  const at::ScalarType dt = out.scalar_type();
  need(c, arithmetic_dtype(dt), dt);
  const at::Scalar start = c.scalar("start"), end = c.scalar("end"), step = c.scalar("step");
  const double xs = start.toDouble(), xe = end.toDouble(), st = step.toDouble();
  if (st == 0 || !std::isfinite(xs) || !std::isfinite(xe) || (st > 0 && xe < xs) ||
      (st < 0 && xe > xs)) {
    c.decline("arguments PyTorch rejects");
  }
  const int64_t n = static_cast<int64_t>(std::ceil((xe - xs) / st));
  Prologue p(c);
  at::Tensor r = empty_result(c, {n}, dt);
  if (n > 0) {
    Desc o(r);
    check(fn(o, tops_scalar(start), tops_scalar(end), tops_scalar(step), tops_dtype(dt), 0, false,
             p.stream),
          tops, c);
  }
  c.finish(r);
}

void fill(Call& c, FillFn fn, const char* tops) {
  const at::Tensor self = c.tensor("self");
  need(c, storage_dtype(self.scalar_type()), self.scalar_type());
  Prologue p(c);
  at::Tensor r = empty_result(c, self.sizes(), self.scalar_type());
  if (r.numel() > 0) {
    Desc o(r);
    check(fn(o, tops_scalar(c.scalar("value")), p.stream), tops, c);
  }
  c.finish(r);
}

void zero(Call& c, ZeroFn fn, const char* tops) {
  const at::Tensor self = c.tensor("self");
  need(c, storage_dtype(self.scalar_type()), self.scalar_type());
  Prologue p(c);
  at::Tensor r = empty_result(c, self.sizes(), self.scalar_type());
  if (r.numel() > 0) {
    Desc o(r);
    check(fn(o, p.stream), tops, c);
  }
  c.finish(r);
}

void masked_fill(Call& c, MaskedFillFn fn, const char* tops) {
  const at::Tensor self = c.tensor("self"), mask = c.tensor("mask");
  const at::ScalarType dt = self.scalar_type();
  need(c, storage_dtype(dt), dt);
  if (mask.scalar_type() != at::kBool) c.decline("a non-bool mask (PyTorch's error to raise)");
  const std::vector<int64_t> shape =
      c.form() == Form::Inplace ? self.sizes().vec() : at::infer_size(self.sizes(), mask.sizes());
  Prologue p(c);
  const at::Tensor x = prepare(c, self, dt, at::IntArrayRef(shape));
  const at::Tensor m = prepare(c, mask, at::kBool, at::IntArrayRef(shape));
  at::Tensor r = empty_result(c, shape, dt);
  if (r.numel() > 0) {
    Desc o(r), dx(x), dm(m);
    check(fn(o, dx, dm, tops_scalar(c.scalar("value")), p.stream), tops, c);
  }
  c.finish(r);
}

void where(Call& c, WhereFn fn, const char* tops) {
  const at::Tensor cond = c.tensor("condition"), a = operand(c, "self"), b = operand(c, "other");
  const at::ScalarType dt = at::result_type(a, b);
  need(c, storage_dtype(dt), dt);
  if (cond.scalar_type() != at::kBool) c.decline("a non-bool condition");
  const std::vector<int64_t> shape =
      at::infer_size(at::infer_size(cond.sizes(), a.sizes()), b.sizes());
  Prologue p(c);
  const at::Tensor k = prepare(c, cond, at::kBool, at::IntArrayRef(shape));
  const at::Tensor x = prepare(c, a, dt, at::IntArrayRef(shape)),
                   y = prepare(c, b, dt, at::IntArrayRef(shape));
  at::Tensor r = empty_result(c, shape, dt);
  if (r.numel() > 0) {
    Desc o(r), dk(k), dx(x), dy(y);
    check(fn(o, dk, dx, dy, p.stream), tops, c);
  }
  c.finish(r);
}

namespace {
// Index operands go to topsaten as int32 (its only index dtype).
at::Tensor index_i32(const Call& c, const at::Tensor& index) {
  if (index.scalar_type() != at::kLong && index.scalar_type() != at::kInt) {
    c.decline("an index of dtype " + std::string(c10::toString(index.scalar_type())));
  }
  if (index.dim() > 1) c.decline("a multi-dimensional index (PyTorch's error to raise)");
  return prepare(c, index.reshape({-1}), at::kInt);
}
}  // namespace

void index_select(Call& c, IndexSelectFn fn, const char* tops) {
  const at::Tensor self = c.tensor("self"), index = c.tensor("index");
  need(c, storage_dtype(self.scalar_type()), self.scalar_type());
  if (self.dim() == 0) c.decline("a 0-dim input");
  const int64_t dim = at::maybe_wrap_dim(c.int_("dim"), self.dim());
  std::vector<int64_t> shape = self.sizes().vec();
  shape[dim] = index.numel();
  if (self.size(dim) == 0 && index.numel() > 0)
    c.decline("indexing an empty dimension (PyTorch's error)");
  Prologue p(c);
  const at::Tensor ix = index_i32(c, index);
  const at::Tensor x = prepare(c, self, self.scalar_type());
  at::Tensor r = empty_result(c, shape, self.scalar_type());
  if (r.numel() > 0) {
    Desc o(r), dx(x), di(ix);
    check(fn(o, dx, dim, di, p.stream), tops, c);
  }
  c.finish(r);
}

void index_fill(Call& c, IndexFillFn fn, const char* tops) {
  const at::Tensor self = c.tensor("self"), index = c.tensor("index");
  need(c, storage_dtype(self.scalar_type()), self.scalar_type());
  if (self.dim() == 0) c.decline("a 0-dim input");
  const int64_t dim = at::maybe_wrap_dim(c.int_("dim"), self.dim());
  Prologue p(c);
  const at::Tensor ix = index_i32(c, index);
  const at::Tensor x = prepare(c, self, self.scalar_type());
  at::Tensor r = empty_result(c, self.sizes(), self.scalar_type());
  if (r.numel() > 0) {
    if (ix.numel() == 0) {
      r.copy_(x);
    } else {
      Desc o(r), dx(x), di(ix);
      check(fn(o, dx, dim, di, tops_scalar(c.scalar("value")), p.stream), tops, c);
    }
  }
  c.finish(r);
}

void embedding_backward(Call& c, EmbeddingBwdFn fn, const char* tops) {
  const at::Tensor grad = c.tensor("grad_output"), indices = c.tensor("indices");
  const at::ScalarType dt = grad.scalar_type();
  need(c, at::isFloatingType(dt) && arithmetic_dtype(dt), dt);
  if (indices.scalar_type() != at::kLong && indices.scalar_type() != at::kInt)
    c.decline("index dtype");
  const int64_t num_weights = c.int_("num_weights");
  const int64_t width = grad.dim() == 0 ? 1 : grad.size(-1);
  if (grad.numel() != indices.numel() * width) c.decline("shapes the kernel does not take");
  Prologue p(c);
  const at::Tensor ix = prepare(c, indices.reshape({-1}), at::kInt);
  const at::Tensor g = prepare(c, grad.reshape({indices.numel(), width}), dt);
  at::Tensor r = empty_result(c, {num_weights, width}, dt);
  if (r.numel() > 0) {
    if (ix.numel() == 0) {
      r.zero_();
    } else {
      Desc o(r), dg(g), di(ix);
      check(fn(o, dg, di, num_weights, c.int_("padding_idx"), c.bool_("scale_grad_by_freq"),
               p.stream),
            tops, c);
    }
  }
  c.finish(r);
}

void cat(Call& c, CatFn fn, const char* tops) {
  std::vector<at::Tensor> ins;
  for (const at::Tensor& t : c.tensors("tensors")) {
    if (t.dim() == 1 && t.numel() == 0) continue;  // legacy empty tensors are skipped
    ins.push_back(t);
  }
  if (ins.empty()) c.decline("only empty inputs");
  const at::ScalarType dt = ins[0].scalar_type();
  for (const auto& t : ins) {
    if (t.scalar_type() != dt) c.decline("inputs of different dtypes");
    if (t.dim() != ins[0].dim() || t.dim() == 0)
      c.decline("inputs of different ranks (PyTorch decides)");
  }
  need(c, storage_dtype(dt), dt);
  const int64_t dim = at::maybe_wrap_dim(c.int_("dim"), ins[0].dim());
  std::vector<int64_t> shape = ins[0].sizes().vec();
  shape[dim] = 0;
  for (const auto& t : ins) {
    for (int64_t i = 0; i < t.dim(); ++i) {
      if (i != dim && t.size(i) != ins[0].size(i))
        c.decline("inputs whose sizes do not match (PyTorch's error)");
    }
    shape[dim] += t.size(dim);
  }
  Prologue p(c);
  std::vector<at::Tensor> prepared;
  std::vector<Desc> descs;
  for (const auto& t : ins) {
    if (t.numel() > 0) prepared.push_back(prepare(c, t, dt));
  }
  at::Tensor r = empty_result(c, shape, dt);
  if (r.numel() > 0) {
    std::vector<topsaten::topsatenTensor> tt;
    descs.reserve(prepared.size());
    for (const auto& t : prepared) descs.emplace_back(t);
    for (auto& d : descs) tt.push_back(d.get());
    Desc o(r);
    check(fn(o, tt, dim, p.stream), tops, c);
  }
  c.finish(r);
}

void pointwise3(Call& c, TernaryFn fn, const char* tops) {
  const at::Tensor a = c.tensor("self"), t1 = c.tensor("tensor1"), t2 = c.tensor("tensor2");
  const at::ScalarType dt = a.scalar_type();
  if (t1.scalar_type() != dt || t2.scalar_type() != dt) c.decline("operands of different dtypes");
  need(c, at::isFloatingType(dt) && arithmetic_dtype(dt), dt);
  const std::vector<int64_t> shape =
      c.form() == Form::Inplace ? a.sizes().vec()
                                : at::infer_size(at::infer_size(a.sizes(), t1.sizes()), t2.sizes());
  Prologue p(c);
  const at::Tensor x = prepare(c, a, dt, at::IntArrayRef(shape)),
                   y = prepare(c, t1, dt, at::IntArrayRef(shape)),
                   z = prepare(c, t2, dt, at::IntArrayRef(shape));
  at::Tensor r = empty_result(c, shape, dt);
  if (r.numel() > 0) {
    Desc o(r), dx(x), dy(y), dz(z);
    check(fn(o, dx, dy, dz, tops_scalar(c.scalar("value")), p.stream), tops, c);
  }
  c.finish(r);
}

void lerp(Call& c, LerpFn fn, const char* tops) {
  const at::Tensor a = c.tensor("self"), e = c.tensor("end");
  const at::ScalarType dt = a.scalar_type();
  if (e.scalar_type() != dt) c.decline("operands of different dtypes (PyTorch's error to raise)");
  need(c, at::isFloatingType(dt) && arithmetic_dtype(dt), dt);
  const std::vector<int64_t> shape =
      c.form() == Form::Inplace ? a.sizes().vec() : at::infer_size(a.sizes(), e.sizes());
  Prologue p(c);
  const at::Tensor x = prepare(c, a, dt, at::IntArrayRef(shape)),
                   y = prepare(c, e, dt, at::IntArrayRef(shape));
  at::Tensor r = empty_result(c, shape, dt);
  if (r.numel() > 0) {
    Desc o(r), dx(x), dy(y);
    check(fn(o, dx, dy, tops_scalar(c.scalar("weight")), p.stream), tops, c);
  }
  c.finish(r);
}

void nonzero(Call& c, NonzeroFn fn, const char* tops) {
  const at::Tensor self = c.tensor("self");
  need(c, storage_dtype(self.scalar_type()), self.scalar_type());
  if (self.dim() == 0) c.decline("a 0-dim input");
  const int64_t rank = self.dim();
  Prologue p(c);
  at::Tensor rows;
  if (self.numel() == 0) {
    rows = empty_result(c, {0, rank}, at::kLong);
  } else {
    const at::Tensor x = prepare(c, self, self.scalar_type());
    at::Tensor coords = empty_result(c, {self.numel(), rank}, at::kInt);  // topsaten writes int32
    int64_t n = 0;
    Desc o(coords), dx(x);
    check(fn(o, &n, dx, p.stream), tops, c);
    rows = coords.narrow(0, 0, n).to(at::kLong);
  }
  if (c.has("size")) {  // nonzero_static: exactly `size` rows, padded with fill_value
    const int64_t size = c.int_("size");
    at::Tensor padded = at::full({size, rank}, c.int_("fill_value"), rows.options());
    const int64_t k = std::min<int64_t>(size, rows.size(0));
    if (k > 0) padded.narrow(0, 0, k).copy_(rows.narrow(0, 0, k));
    rows = padded;
  }
  c.finish(rows);
}

void index_tensor(Call& c, IndexFn fn, const char* tops) {
  const at::Tensor self = c.tensor("self");
  need(c, storage_dtype(self.scalar_type()), self.scalar_type());
  const auto list = c.arg("indices").toOptionalTensorList();
  std::vector<at::Tensor> idx;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::optional<at::Tensor> t = list.get(i);
    if (!t || !t->defined()) c.decline("an index list with None (slices between indices)");
    if (t->scalar_type() != at::kLong && t->scalar_type() != at::kInt)
      c.decline("a boolean or non-integer index");
    if (t->device().is_privateuseone() && t->device() != c.device()) {
      TORCH_CHECK(false,
                  "Expected all tensors to be on the same device, but found at least two devices, ",
                  c.device(), " and ", t->device(), "! (", c.name(), ", vendor gcu)");
    }
    idx.push_back(*t);
  }
  if (idx.empty() || static_cast<int64_t>(idx.size()) > self.dim())
    c.decline("an index list the kernel does not take");
  std::vector<int64_t> bshape = idx[0].sizes().vec();
  for (const auto& t : idx) bshape = at::infer_size(bshape, t.sizes());
  std::vector<int64_t> shape = bshape;
  for (int64_t d = static_cast<int64_t>(idx.size()); d < self.dim(); ++d)
    shape.push_back(self.size(d));
  for (size_t d = 0; d < idx.size(); ++d) {
    if (self.size(static_cast<int64_t>(d)) == 0 && idx[d].numel() > 0)
      c.decline("indexing an empty dimension");
  }
  Prologue p(c);
  const at::Tensor x = prepare(c, self, self.scalar_type());
  std::vector<at::Tensor> prepared;
  for (const auto& t : idx) prepared.push_back(prepare(c, t, at::kInt, at::IntArrayRef(bshape)));
  at::Tensor r = empty_result(c, shape, self.scalar_type());
  if (r.numel() > 0) {
    std::vector<Desc> descs;
    descs.reserve(prepared.size());
    for (const auto& t : prepared) descs.emplace_back(t);
    std::vector<topsaten::topsatenTensor> tt;
    for (auto& d : descs) tt.push_back(d.get());
    Desc o(r), dx(x);
    check(fn(o, dx, tt, p.stream), tops, c);
  }
  c.finish(r);
}

void upsample_nearest_exact2d(Call& c, UpsampleFn fn, const char* tops) {
  const at::Tensor self = c.tensor("self");
  const auto size = c.ints("output_size");
  const at::ScalarType dt = self.scalar_type();
  need(c, arithmetic_dtype(dt), dt);
  if (self.dim() != 4 || size.size() != 2 || self.numel() == 0)
    c.decline("shapes the kernel does not take");
  const std::vector<int64_t> shape{self.size(0), self.size(1), size[0], size[1]};
  Prologue p(c);
  const at::Tensor x = prepare(c, self, dt);
  at::Tensor r = empty_result(c, shape, dt);
  if (r.numel() > 0) {
    Desc o(r), dx(x);
    check(fn(o, dx, tops_size(size), c.opt_double("scales_h").value_or(0.0),
             c.opt_double("scales_w").value_or(0.0), p.stream),
          tops, c);
  }
  c.finish(r);
}

}  // namespace tfl_gcu
