// Indexing, gathering and concatenation.
#include <algorithm>

#include "aten_op.h"

namespace topsaten {

ATEN_API topsatenStatus_t topsatenIndexSelect(T& out, const T& self, int64_t dim, const T& index,
                                              St s) {
  Call c("topsatenIndexSelect", s);
  Buf o = c.take(out), a = c.take(self), ix = c.take(index, /*index=*/true);
  int64_t outer = 0, len = 0, inner = 0;
  c.require(c.ok() && ix.dims.size() == 1 && split(a.dims, dim, &outer, &len, &inner));
  c.require(o.n == outer * ix.n * inner);
  if (!c.ok()) return c.status();
  for (int64_t j = 0; j < ix.n; ++j) {
    const int64_t k = static_cast<int64_t>(ix.get(j));
    if (k < 0 || k >= len) return TOPSATEN_STATUS_EXECUTE_ERROR;
  }
  for (int64_t b = 0; b < outer; ++b)
    for (int64_t j = 0; j < ix.n; ++j) {
      const int64_t k = static_cast<int64_t>(ix.get(j));
      for (int64_t i = 0; i < inner; ++i)
        o.set((b * ix.n + j) * inner + i, a.get((b * len + k) * inner + i));
    }
  return TOPSATEN_STATUS_SUCCESS;
}

ATEN_API topsatenStatus_t topsatenIndexFill(T& out, const T& self, int64_t dim, const T& index,
                                            const S& value, St s) {
  Call c("topsatenIndexFill", s);
  Buf o = c.take(out), a = c.take(self), ix = c.take(index, /*index=*/true);
  int64_t outer = 0, len = 0, inner = 0;
  c.require(c.ok() && ix.dims.size() == 1 && split(a.dims, dim, &outer, &len, &inner) &&
            o.dims == a.dims);
  if (!c.ok()) return c.status();
  for (int64_t j = 0; j < ix.n; ++j) {
    const int64_t k = static_cast<int64_t>(ix.get(j));
    if (k < 0 || k >= len) return TOPSATEN_STATUS_EXECUTE_ERROR;
  }
  if (o.p != a.p)
    for (int64_t i = 0; i < a.n; ++i) o.set(i, a.get(i));
  const double v = sval(value);
  for (int64_t j = 0; j < ix.n; ++j) {
    const int64_t k = static_cast<int64_t>(ix.get(j));
    for (int64_t b = 0; b < outer; ++b)
      for (int64_t i = 0; i < inner; ++i) o.set((b * len + k) * inner + i, v);
  }
  return TOPSATEN_STATUS_SUCCESS;
}

ATEN_API topsatenStatus_t topsatenEmbeddingDenseBackward(T& out, const T& grad, const T& indices,
                                                         int64_t num_weights, int64_t padding_idx,
                                                         bool scale_grad_by_freq, St s) {
  Call c("topsatenEmbeddingDenseBackward", s);
  Buf o = c.take(out), g = c.take(grad), ix = c.take(indices, /*index=*/true);
  c.require(o.dims.size() == 2 && c.ok() && o.dims[0] == num_weights);
  if (!c.ok()) return c.status();
  const int64_t D = o.dims[1];
  c.require(g.n == ix.n * D);
  if (!c.ok()) return c.status();
  std::vector<double> acc(o.n, 0.0), count(num_weights, 0.0);
  for (int64_t j = 0; j < ix.n; ++j) {
    const int64_t k = static_cast<int64_t>(ix.get(j));
    if (k < 0 || k >= num_weights) return TOPSATEN_STATUS_EXECUTE_ERROR;
    count[k] += 1;
  }
  for (int64_t j = 0; j < ix.n; ++j) {
    const int64_t k = static_cast<int64_t>(ix.get(j));
    if (k == padding_idx) continue;
    const double scale = scale_grad_by_freq ? 1.0 / count[k] : 1.0;
    for (int64_t d = 0; d < D; ++d) acc[k * D + d] += g.get(j * D + d) * scale;
  }
  for (int64_t i = 0; i < o.n; ++i) o.set(i, acc[i]);
  return TOPSATEN_STATUS_SUCCESS;
}

ATEN_API topsatenStatus_t topsatenNonzero(T& out, int64_t* num_nonzero, const T& self, St s) {
  Call c("topsatenNonzero", s);
  Buf o = c.take(out, /*index=*/true), a = c.take(self);
  const int64_t r = static_cast<int64_t>(a.dims.size());
  c.require(num_nonzero != nullptr && o.dims.size() == 2 && c.ok() && o.dims[0] == a.n &&
            o.dims[1] == r);
  if (!c.ok()) return c.status();
  std::vector<int64_t> idx(r, 0);
  int64_t rows = 0;
  for (int64_t lin = 0; lin < a.n; ++lin) {
    if (a.get(lin) != 0) {
      for (int64_t d = 0; d < r; ++d) o.set(rows * r + d, static_cast<double>(idx[d]));
      ++rows;
    }
    for (int64_t d = r - 1; d >= 0; --d) {
      if (++idx[d] < a.dims[d]) break;
      idx[d] = 0;
    }
  }
  *num_nonzero = rows;
  return TOPSATEN_STATUS_SUCCESS;
}

ATEN_API topsatenStatus_t topsatenIndex(T& out, const T& self, const std::vector<T>& indices,
                                        St s) {
  Call c("topsatenIndex", s);
  Buf o = c.take(out), a = c.take(self);
  std::vector<Buf> ix;
  for (const T& t : indices) ix.push_back(c.take(t, /*index=*/true));
  const int64_t k = static_cast<int64_t>(ix.size());
  c.require(k >= 1 && k <= static_cast<int64_t>(a.dims.size()));
  if (!c.ok()) return c.status();
  for (const Buf& b : ix)
    if (b.dims != ix[0].dims) return TOPSATEN_STATUS_BAD_PARAM;  // no broadcasting
  int64_t inner = 1;
  for (size_t d = k; d < a.dims.size(); ++d) inner *= a.dims[d];
  const int64_t m = ix[0].n;
  if (o.n != m * inner) return TOPSATEN_STATUS_BAD_PARAM;
  for (int64_t j = 0; j < m; ++j) {
    int64_t base = 0;
    for (int64_t d = 0; d < k; ++d) {
      int64_t v = static_cast<int64_t>(ix[d].get(j));
      if (v < 0) v += a.dims[d];
      if (v < 0 || v >= a.dims[d]) return TOPSATEN_STATUS_EXECUTE_ERROR;
      base = base * a.dims[d] + v;
    }
    for (int64_t i = 0; i < inner; ++i) o.set(j * inner + i, a.get(base * inner + i));
  }
  return TOPSATEN_STATUS_SUCCESS;
}

ATEN_API topsatenStatus_t topsatenCat(T& out, const std::vector<T>& tensors, int64_t dim, St s) {
  Call c("topsatenCat", s);
  Buf o = c.take(out);
  std::vector<Buf> in;
  for (const T& t : tensors) in.push_back(c.take(t));
  c.require(!in.empty());
  if (!c.ok()) return c.status();
  int64_t outer = 0, olen = 0, inner = 0;
  if (!split(o.dims, dim, &outer, &olen, &inner)) return TOPSATEN_STATUS_BAD_PARAM;
  const int64_t d = dim < 0 ? dim + static_cast<int64_t>(o.dims.size()) : dim;
  int64_t total = 0;
  for (const Buf& b : in) {
    if (b.dims.size() != o.dims.size()) return TOPSATEN_STATUS_BAD_PARAM;
    for (size_t i = 0; i < b.dims.size(); ++i)
      if (static_cast<int64_t>(i) != d && b.dims[i] != o.dims[i]) return TOPSATEN_STATUS_BAD_PARAM;
    total += b.dims[d];
  }
  if (total != olen) return TOPSATEN_STATUS_BAD_PARAM;
  int64_t off = 0;
  for (const Buf& b : in) {
    const int64_t len = b.dims[d];
    for (int64_t x = 0; x < outer; ++x)
      for (int64_t j = 0; j < len; ++j)
        for (int64_t i = 0; i < inner; ++i)
          o.set((x * olen + off + j) * inner + i, b.get((x * len + j) * inner + i));
    off += len;
  }
  return TOPSATEN_STATUS_SUCCESS;
}

}  // namespace topsaten
