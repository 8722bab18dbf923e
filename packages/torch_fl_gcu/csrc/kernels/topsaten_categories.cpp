#include "topsaten_categories.h"

#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>

namespace tfl_gcu {
namespace kit = torch_fl::kit;
namespace {

// At launch, topsaten initialised and the flagos current stream (a declined call never touches
// topsaten). The generated kernel made the call's device current.
struct Prologue {
  explicit Prologue(const Call& c) : device(c.device()) {}
  topsStream_t stream() const {
    ensure_init();
    return current_stream(device);
  }
  c10::Device device;
};

// The dtypes topsaten computes each kind of elementwise op in.
const kit::DtypeSet& unary_set(UnaryKind kind) {
  if (kind == UnaryKind::Logical) return kStorage;
  return kind == UnaryKind::ToFloat || kind == UnaryKind::FloatOnly ? kFloating : kArithmetic;
}

const kit::DtypeSet& binary_set(BinaryKind kind) {
  if (kind == BinaryKind::Compare) return kStorage;
  return kind == BinaryKind::Pow ? kFloating : kArithmetic;
}

}  // namespace

void unary(Call& c, UnaryFn fn, const char* tops, UnaryKind kind) {
  Prologue p(c);
  const auto o = kit::unary(c, kernel(tops, unary_set(kind)), kind);
  if (o.runs()) {
    Desc r(o.out), a(o.in[0]);
    check(fn(r, a, p.stream()), tops, c);
  }
  c.finish(o.out);
}

void binary(Call& c, BinaryFn fn, const char* tops, BinaryKind kind, const char* an,
            const char* bn) {
  Prologue p(c);
  const auto o = kit::binary(c, kernel(tops, binary_set(kind)), kind, an, bn);
  if (o.runs()) {
    Desc r(o.out), a(o.in[0]), b(o.in[1]);
    check(fn(r, a, b, p.stream()), tops, c);
  }
  c.finish(o.out);
}

void binary_alpha(Call& c, AlphaFn fn, const char* tops) {
  Prologue p(c);
  const auto o = kit::binary_alpha(c, kernel(tops, kArithmetic));
  if (o.runs()) {
    Desc r(o.out), a(o.in[0]), b(o.in[1]);
    check(fn(r, a, b, tops_scalar(o.alpha), p.stream()), tops, c);
  }
  c.finish(o.out);
}

void binary_scalar(Call& c, AlphaFn fn, const char* tops, const char* an, const char* bn,
                   const char* sn) {
  Prologue p(c);
  const auto o = kit::same_dtype_pair(c, kernel(tops, kArithmetic), an, bn);
  if (o.runs()) {
    Desc r(o.out), a(o.in[0]), b(o.in[1]);
    check(fn(r, a, b, tops_scalar(c.scalar(sn)), p.stream()), tops, c);
  }
  c.finish(o.out);
}

void reduce_sum(Call& c, SumFn fn, const char* tops, bool mean) {
  Prologue p(c);
  const at::Tensor self = c.tensor("self");
  const at::ScalarType rdt = kit::sum_dtype(c, self, mean);
  const auto k = kernel(tops, kArithmetic);
  k.need(c, rdt);
  kit::need_dtype(c, kStorage, self.scalar_type(), tops);  // read, then cast to rdt
  const auto dims = reduce_dims(self, kit::dims_arg(c));
  const bool keepdim = c.has("keepdim") ? c.bool_("keepdim") : false;
  const at::Tensor x = k.input(c, self, rdt);
  at::Tensor r = k.result(c, reduced_shape(self, dims, keepdim), rdt, false, {x});
  if (r.numel() > 0 && x.numel() == 0) {
    r.fill_(kit::empty_sum(mean));
  } else if (r.numel() > 0) {
    Desc o(r), a(x);
    check(fn(o, a, tops_size(dims), keepdim, tops_dtype(rdt), p.stream()), tops, c);
  }
  c.finish(r);
}

void reduce_extremum(Call& c, ExtremumFn fn, const char* tops) {
  Prologue p(c);
  const at::Tensor self = c.tensor("self");
  const auto k = kernel(tops, kArithmetic);
  k.need(c, self.scalar_type());
  kit::need_elements(c, self);
  const auto dims = reduce_dims(self, kit::dims_arg(c));
  const bool keepdim = c.bool_("keepdim");
  const at::Tensor x = k.input(c, self, self.scalar_type());
  at::Tensor r = k.result(c, reduced_shape(self, dims, keepdim), self.scalar_type(), false, {x});
  Desc o(r), a(x);
  check(fn(o, a, tops_size(dims), keepdim, p.stream()), tops, c);
  c.finish(r);
}

void reduce_all(Call& c, UnaryFn fn, const char* tops) {
  Prologue p(c);
  const at::Tensor self = c.tensor("self");
  const auto k = kernel(tops, kStorage);
  k.need(c, self.scalar_type());
  kit::need_bool_logical_result(c, self);
  if (self.numel() == 0) c.decline("an empty input");
  const at::Tensor x = k.input(c, self, self.scalar_type());
  at::Tensor r = k.result(c, {}, at::kBool, false, {x});
  Desc o(r), a(x);
  check(fn(o, a, p.stream()), tops, c);
  c.finish(r);
}

void vector_norm(Call& c, NormFn fn, const char* tops) {
  Prologue p(c);
  const at::Tensor self = c.tensor("self");
  const auto dtype = c.opt_dtype("dtype");
  const at::ScalarType rdt = dtype ? *dtype : self.scalar_type();
  const auto k = kernel(tops, kFloating);
  k.need(c, rdt);
  kit::need_dtype(c, kArithmetic, self.scalar_type(), tops);
  const auto dims = reduce_dims(self, kit::dims_arg(c));
  const bool keepdim = c.bool_("keepdim");
  const at::Tensor x = k.input(c, self, rdt);
  at::Tensor r = k.result(c, reduced_shape(self, dims, keepdim), rdt, false, {x});
  Desc o(r), a(x);
  check(
      fn(o, a, tops_scalar(c.scalar("ord")), tops_size(dims), keepdim, tops_dtype(rdt), p.stream()),
      tops, c);
  c.finish(r);
}

void mm(Call& c, BinaryFn fn, const char* tops, int rank) {
  Prologue p(c);
  const at::Tensor a = c.tensor("self"), b = c.tensor("mat2");
  const auto shape = kit::matmul_shape(c, a, b, rank);
  const at::ScalarType dt = a.scalar_type();
  const auto k = kernel(tops, kFloating);
  k.need(c, dt);
  const at::Tensor x = k.input(c, a, dt), y = k.input(c, b, dt);
  at::Tensor r = k.result(c, shape, dt, false, {x, y});
  if (r.numel() > 0 && a.size(-1) == 0) {
    r.zero_();  // an empty inner dimension sums nothing
  } else if (r.numel() > 0) {
    Desc o(r), da(x), db(y);
    check(fn(o, da, db, p.stream()), tops, c);
  }
  c.finish(r);
}

void addmm(Call& c, AddmmFn fn, const char* tops) {
  Prologue p(c);
  const at::Tensor in = c.tensor("self"), a = c.tensor("mat1"), b = c.tensor("mat2");
  const auto shape = kit::matmul_shape(c, a, b, 2);
  kit::need_bias(c, in, a, shape);
  const at::ScalarType dt = a.scalar_type();
  const auto k = kernel(tops, kFloating);
  k.need(c, dt);
  if (a.size(1) == 0) c.decline("an empty inner dimension");
  const at::Tensor s = k.input(c, in, dt, shape), x = k.input(c, a, dt), y = k.input(c, b, dt);
  at::Tensor r = k.result(c, shape, dt, false, {s, x, y});
  if (r.numel() > 0) {
    Desc o(r), ds(s), da(x), db(y);
    check(fn(o, ds, da, db, tops_scalar(c.scalar("beta")), tops_scalar(c.scalar("alpha")),
             p.stream()),
          tops, c);
  }
  c.finish(r);
}

void softmax(Call& c, SoftmaxFn fn, const char* tops) {
  Prologue p(c);
  const at::Tensor self = c.tensor("self");
  const bool h2f = c.bool_("half_to_float");  // topsaten takes it, for a half input
  const at::ScalarType dt = self.scalar_type();
  const auto k = kernel(tops, kFloating);
  k.need(c, dt);
  if (h2f && dt != at::kHalf) c.decline("half_to_float on a non-half input");
  if (self.numel() == 0) c.decline("an empty input");
  const int64_t dim = at::maybe_wrap_dim(c.int_("dim"), self.dim());
  const at::Tensor x = k.input(c, self, dt);
  at::Tensor r = k.result(c, self.sizes(), h2f ? at::kFloat : dt, false, {x});
  Desc o(r), a(x);
  check(fn(o, a, dim, h2f, p.stream()), tops, c);
  c.finish(r);
}

void softmax_backward(Call& c, SoftmaxBwdFn fn, const char* tops) {
  Prologue p(c);
  const at::Tensor go = c.tensor("grad_output"), out = c.tensor("output");
  const int64_t dim = kit::softmax_backward_dim(c, go, out);
  const at::ScalarType dt = go.scalar_type();
  const auto k = kernel(tops, kFloating);
  k.need(c, dt);
  if (out.numel() == 0) c.decline("an empty input");
  const at::Tensor g = k.input(c, go, dt), y = k.input(c, out, dt);
  at::Tensor r = k.result(c, out.sizes(), dt, false, {g, y});
  Desc o(r), dg(g), dy(y);
  check(fn(o, dg, dy, dim, p.stream()), tops, c);
  c.finish(r);
}

void layer_norm(Call& c, LayerNormFn fn, const char* tops) {
  static const kit::DtypeSet kFloat32{at::kFloat};
  Prologue p(c);
  const at::Tensor input = c.tensor("input");
  const auto w = c.opt_tensor("weight"), b = c.opt_tensor("bias");
  const std::vector<int64_t> normalized = c.ints("normalized_shape");
  const at::ScalarType dt = input.scalar_type();
  if ((w && w->scalar_type() != dt) || (b && b->scalar_type() != dt)) c.decline("mixed dtypes");
  const auto k = kernel(tops, kFloat32);
  k.need(c, dt);
  const std::vector<int64_t> stats = kit::norm_stat_shape(c, input, normalized);
  const at::Tensor x = k.input(c, input, dt);
  const at::Tensor wc = w ? k.input(c, *w, dt, at::IntArrayRef(normalized)) : at::Tensor();
  const at::Tensor bc = b ? k.input(c, *b, dt, at::IntArrayRef(normalized)) : at::Tensor();
  at::Tensor out = k.result(c, input.sizes(), dt, false);
  at::Tensor mean = k.result(c, stats, dt, false), rstd = k.result(c, stats, dt, false);
  Desc o(out), m(mean), rs(rstd), dx(x);
  Desc dw = w ? Desc(wc) : Desc(), db = b ? Desc(bc) : Desc();
  check(fn(o, m, rs, dx, tops_size(normalized), dw, db, c.double_("eps"), p.stream()), tops, c);
  c.finish(std::vector<at::Tensor>{out, mean, rstd});
}

void arange(Call& c, ArangeFn fn, const char* tops) {
  Prologue p(c);
  const at::ScalarType dt = c.target().scalar_type();
  const auto k = kernel(tops, kArithmetic);
  k.need(c, dt);
  const int64_t n = kit::arange_length(c);
  at::Tensor r = k.result(c, {n}, dt, false);
  if (n > 0) {
    Desc o(r);
    check(fn(o, tops_scalar(c.scalar("start")), tops_scalar(c.scalar("end")),
             tops_scalar(c.scalar("step")), tops_dtype(dt), 0, false, p.stream()),
          tops, c);
  }
  c.finish(r);
}

void fill(Call& c, FillFn fn, const char* tops) {
  Prologue p(c);
  const auto o = kit::fill_target(c, kernel(tops, kStorage));
  if (o.runs()) {
    Desc r(o.out);
    check(fn(r, tops_scalar(c.scalar("value")), p.stream()), tops, c);
  }
  c.finish(o.out);
}

void zero(Call& c, ZeroFn fn, const char* tops) {
  Prologue p(c);
  const auto o = kit::fill_target(c, kernel(tops, kStorage));
  if (o.runs()) {
    Desc r(o.out);
    check(fn(r, p.stream()), tops, c);
  }
  c.finish(o.out);
}

void masked_fill(Call& c, MaskedFillFn fn, const char* tops) {
  Prologue p(c);
  const auto o = kit::masked_fill(c, kernel(tops, kStorage));
  if (o.runs()) {
    Desc r(o.out), dx(o.in[0]), dm(o.in[1]);
    check(fn(r, dx, dm, tops_scalar(c.scalar("value")), p.stream()), tops, c);
  }
  c.finish(o.out);
}

void where(Call& c, WhereFn fn, const char* tops) {
  Prologue p(c);
  const auto o = kit::where(c, kernel(tops, kStorage));
  if (o.runs()) {
    Desc r(o.out), dk(o.in[0]), dx(o.in[1]), dy(o.in[2]);
    check(fn(r, dk, dx, dy, p.stream()), tops, c);
  }
  c.finish(o.out);
}

namespace {
// Index operands go to topsaten as int32 (its only index dtype).
at::Tensor index_i32(const Call& c, const kit::SdkKernel& k, const at::Tensor& index) {
  kit::need_index(c, index);
  if (index.dim() > 1) c.decline("a multi-dimensional index (PyTorch's error to raise)");
  return k.input(c, index.reshape({-1}), at::kInt);
}
}  // namespace

void index_select(Call& c, IndexSelectFn fn, const char* tops) {
  Prologue p(c);
  const at::Tensor self = c.tensor("self"), index = c.tensor("index");
  const auto k = kernel(tops, kStorage);
  k.need(c, self.scalar_type());
  const auto [dim, shape] = kit::index_select_shape(c, self, index);
  const at::Tensor ix = index_i32(c, k, index), x = k.input(c, self, self.scalar_type());
  at::Tensor r = k.result(c, shape, self.scalar_type(), false, {x, ix});
  if (r.numel() > 0) {
    Desc o(r), dx(x), di(ix);
    check(fn(o, dx, dim, di, p.stream()), tops, c);
  }
  c.finish(r);
}

void index_fill(Call& c, IndexFillFn fn, const char* tops) {
  Prologue p(c);
  const at::Tensor self = c.tensor("self"), index = c.tensor("index");
  const auto k = kernel(tops, kStorage);
  k.need(c, self.scalar_type());
  if (self.dim() == 0) c.decline("a 0-dim input");
  const int64_t dim = at::maybe_wrap_dim(c.int_("dim"), self.dim());
  const at::Tensor ix = index_i32(c, k, index), x = k.input(c, self, self.scalar_type());
  at::Tensor r = k.result(c, self.sizes(), self.scalar_type(), false, {x, ix});
  if (r.numel() > 0 && ix.numel() == 0) {
    r.copy_(x);
  } else if (r.numel() > 0) {
    Desc o(r), dx(x), di(ix);
    check(fn(o, dx, dim, di, tops_scalar(c.scalar("value")), p.stream()), tops, c);
  }
  c.finish(r);
}

void embedding_backward(Call& c, EmbeddingBwdFn fn, const char* tops) {
  Prologue p(c);
  const at::Tensor grad = c.tensor("grad_output"), indices = c.tensor("indices");
  const at::ScalarType dt = grad.scalar_type();
  const auto k = kernel(tops, kFloating);
  k.need(c, dt);
  const int64_t width = kit::embedding_grad_width(c, grad, indices);
  const int64_t num_weights = c.int_("num_weights");
  const at::Tensor ix = k.input(c, indices.reshape({-1}), at::kInt);
  const at::Tensor g = k.input(c, grad.reshape({indices.numel(), width}), dt);
  at::Tensor r = k.result(c, {num_weights, width}, dt, false, {g, ix});
  if (r.numel() > 0 && ix.numel() == 0) {
    r.zero_();
  } else if (r.numel() > 0) {
    Desc o(r), dg(g), di(ix);
    check(fn(o, dg, di, num_weights, c.int_("padding_idx"), c.bool_("scale_grad_by_freq"),
             p.stream()),
          tops, c);
  }
  c.finish(r);
}

void cat(Call& c, CatFn fn, const char* tops) {
  Prologue p(c);
  const kit::CatShape s = kit::cat_shape(c, c.tensors("tensors"));
  const at::ScalarType dt = s.inputs[0].scalar_type();
  for (const auto& t : s.inputs) {
    if (t.scalar_type() != dt) c.decline("inputs of different dtypes");
  }
  const auto k = kernel(tops, kStorage);
  k.need(c, dt);
  std::vector<at::Tensor> prepared;
  for (const auto& t : s.inputs) {
    if (t.numel() > 0) prepared.push_back(k.input(c, t, dt));
  }
  at::Tensor r = k.result(c, s.shape, dt, false);
  if (r.numel() > 0) {
    std::vector<Desc> descs(prepared.begin(), prepared.end());
    std::vector<topsaten::topsatenTensor> tt;
    for (auto& d : descs) tt.push_back(d.get());
    Desc o(r);
    check(fn(o, tt, s.dim, p.stream()), tops, c);
  }
  c.finish(r);
}

void pointwise3(Call& c, TernaryFn fn, const char* tops) {
  Prologue p(c);
  const auto o = kit::pointwise3(c, kernel(tops, kFloating));
  if (o.runs()) {
    Desc r(o.out), dx(o.in[0]), dy(o.in[1]), dz(o.in[2]);
    check(fn(r, dx, dy, dz, tops_scalar(c.scalar("value")), p.stream()), tops, c);
  }
  c.finish(o.out);
}

void lerp(Call& c, LerpFn fn, const char* tops) {
  Prologue p(c);
  const at::Tensor a = c.tensor("self"), e = c.tensor("end");
  const at::ScalarType dt = a.scalar_type();
  if (e.scalar_type() != dt) c.decline("operands of different dtypes (PyTorch's error to raise)");
  const auto k = kernel(tops, kFloating);
  k.need(c, dt);
  const std::vector<int64_t> shape = at::infer_size(a.sizes(), e.sizes());
  const at::Tensor x = k.input(c, a, dt, shape), y = k.input(c, e, dt, shape);
  at::Tensor r = k.result(c, shape, dt, true, {x, y});
  if (r.numel() > 0) {
    Desc o(r), dx(x), dy(y);
    check(fn(o, dx, dy, tops_scalar(c.scalar("weight")), p.stream()), tops, c);
  }
  c.finish(r);
}

void nonzero(Call& c, NonzeroFn fn, const char* tops) {
  Prologue p(c);
  const at::Tensor self = c.tensor("self");
  const auto k = kernel(tops, kStorage);
  k.need(c, self.scalar_type());
  if (self.dim() == 0) c.decline("a 0-dim input");
  const int64_t rank = self.dim();
  at::Tensor rows;
  if (self.numel() == 0) {
    rows = k.result(c, {0, rank}, at::kLong, false);
  } else {
    const at::Tensor x = k.input(c, self, self.scalar_type());
    at::Tensor coords = k.result(c, {self.numel(), rank}, at::kInt, false);  // topsaten: int32
    int64_t n = 0;
    Desc o(coords), dx(x);
    check(fn(o, &n, dx, p.stream()), tops, c);
    rows = coords.narrow(0, 0, n).to(at::kLong);
  }
  if (c.has("size")) {  // nonzero_static: exactly `size` rows, padded with fill_value
    const int64_t size = c.int_("size");
    at::Tensor padded = at::full({size, rank}, c.int_("fill_value"), rows.options());
    const int64_t n = std::min<int64_t>(size, rows.size(0));
    if (n > 0) padded.narrow(0, 0, n).copy_(rows.narrow(0, 0, n));
    rows = padded;
  }
  c.finish(rows);
}

void index_tensor(Call& c, IndexFn fn, const char* tops) {
  Prologue p(c);
  const at::Tensor self = c.tensor("self");
  const auto k = kernel(tops, kStorage);
  k.need(c, self.scalar_type());
  const auto list = c.arg("indices").toOptionalTensorList();
  std::vector<at::Tensor> idx;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::optional<at::Tensor> t = list.get(i);
    if (!t || !t->defined()) c.decline("an index list with None (slices between indices)");
    if (t->device().is_privateuseone() && t->device() != c.device()) {
      TORCH_CHECK(false,
                  "Expected all tensors to be on the same device, but found at least two devices, ",
                  c.device(), " and ", t->device(), "! (", c.name(), ", vendor gcu)");
    }
    idx.push_back(*t);
  }
  const auto shape = torch_fl::kit::index_shape(c, self, idx);
  const at::Tensor x = k.input(c, self, self.scalar_type());
  std::vector<at::Tensor> prepared;
  for (const auto& t : idx)
    prepared.push_back(k.input(c, t, at::kInt, at::IntArrayRef(shape.indices)));
  at::Tensor r = k.result(c, shape.result, self.scalar_type(), false);
  if (r.numel() > 0) {
    std::vector<Desc> descs(prepared.begin(), prepared.end());
    std::vector<topsaten::topsatenTensor> tt;
    for (auto& d : descs) tt.push_back(d.get());
    Desc o(r), dx(x);
    check(fn(o, dx, tt, p.stream()), tops, c);
  }
  c.finish(r);
}

void upsample_nearest_exact2d(Call& c, UpsampleFn fn, const char* tops) {
  Prologue p(c);
  const at::Tensor self = c.tensor("self");
  const auto size = c.ints("output_size");
  const at::ScalarType dt = self.scalar_type();
  const auto k = kernel(tops, kArithmetic);
  k.need(c, dt);
  if (self.dim() != 4 || size.size() != 2 || self.numel() == 0)
    c.decline("shapes the kernel does not take");
  const at::Tensor x = k.input(c, self, dt);
  at::Tensor r = k.result(c, {self.size(0), self.size(1), size[0], size[1]}, dt, false);
  if (r.numel() > 0) {
    Desc o(r), dx(x);
    check(fn(o, dx, tops_size(size), c.opt_double("scales_h").value_or(0.0),
             c.opt_double("scales_w").value_or(0.0), p.stream()),
          tops, c);
  }
  c.finish(r);
}

}  // namespace tfl_gcu
