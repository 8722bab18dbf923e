// Matrix products.
#include <cmath>

#include "aten_op.h"

namespace topsaten {

namespace {
void matmul(const Buf& a, const Buf& b, int64_t ao, int64_t bo, int64_t n, int64_t k, int64_t m,
            std::vector<double>* r) {
  r->assign(n * m, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < k; ++p) {
      const double x = a.get(ao + i * k + p);
      if (x == 0 && !std::isnan(x)) {
        // still propagate NaN/inf from b like a dense product would
        for (int64_t j = 0; j < m; ++j) {
          const double y = b.get(bo + p * m + j);
          if (!std::isfinite(y)) (*r)[i * m + j] += x * y;
        }
        continue;
      }
      for (int64_t j = 0; j < m; ++j) (*r)[i * m + j] += x * b.get(bo + p * m + j);
    }
}
}  // namespace

ATEN_API topsatenStatus_t topsatenMm(T& out, const T& self, const T& mat2, St s) {
  Call c("topsatenMm", s);
  Buf o = c.take(out), a = c.take(self), b = c.take(mat2);
  c.require(a.dims.size() == 2 && b.dims.size() == 2 && o.dims.size() == 2);
  c.require(c.ok() && a.dims[1] == b.dims[0] && o.dims[0] == a.dims[0] && o.dims[1] == b.dims[1]);
  if (!c.ok()) return c.status();
  std::vector<double> r;
  matmul(a, b, 0, 0, a.dims[0], a.dims[1], b.dims[1], &r);
  for (int64_t i = 0; i < o.n; ++i) o.set(i, r[i]);
  return TOPSATEN_STATUS_SUCCESS;
}

ATEN_API topsatenStatus_t topsatenBmm(T& out, const T& self, const T& mat2, St s) {
  Call c("topsatenBmm", s);
  Buf o = c.take(out), a = c.take(self), b = c.take(mat2);
  c.require(a.dims.size() == 3 && b.dims.size() == 3 && o.dims.size() == 3);
  c.require(c.ok() && a.dims[0] == b.dims[0] && a.dims[2] == b.dims[1] && o.dims[0] == a.dims[0] &&
            o.dims[1] == a.dims[1] && o.dims[2] == b.dims[2]);
  if (!c.ok()) return c.status();
  const int64_t B = a.dims[0], n = a.dims[1], k = a.dims[2], m = b.dims[2];
  std::vector<double> r;
  for (int64_t bi = 0; bi < B; ++bi) {
    matmul(a, b, bi * n * k, bi * k * m, n, k, m, &r);
    for (int64_t i = 0; i < n * m; ++i) o.set(bi * n * m + i, r[i]);
  }
  return TOPSATEN_STATUS_SUCCESS;
}

ATEN_API topsatenStatus_t topsatenAddmm(T& out, const T& self, const T& mat1, const T& mat2,
                                        const S& beta, const S& alpha, St s) {
  Call c("topsatenAddmm", s);
  Buf o = c.take(out), in = c.take(self), a = c.take(mat1), b = c.take(mat2);
  c.require(a.dims.size() == 2 && b.dims.size() == 2 && o.dims.size() == 2);
  c.require(c.ok() && a.dims[1] == b.dims[0] && o.dims[0] == a.dims[0] && o.dims[1] == b.dims[1]);
  c.require(in.dims == o.dims);  // no broadcasting of self
  if (!c.ok()) return c.status();
  const double be = sval(beta), al = sval(alpha);
  std::vector<double> r;
  matmul(a, b, 0, 0, a.dims[0], a.dims[1], b.dims[1], &r);
  for (int64_t i = 0; i < o.n; ++i) o.set(i, (be == 0 ? 0.0 : be * in.get(i)) + al * r[i]);
  return TOPSATEN_STATUS_SUCCESS;
}

}  // namespace topsaten
