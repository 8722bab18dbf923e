// Reductions and the vector norm.
#include <algorithm>
#include <cmath>
#include <limits>

#include "aten_op.h"

namespace topsaten {

namespace {
template <typename Init, typename Fold, typename Fin>
topsatenStatus_t reduce(const char* name, T& out, const T& self, Z dims, bool keepdim,
                        topsatenDataType_t dtype, St stream, Init init, Fold fold, Fin fin) {
  Call c(name, stream);
  Buf o = c.take(out), a = c.take(self);
  c.require(dtype == TOPSATEN_DATA_NONE || dtype == o.dt);
  if (c.ok() && (dtype == TOPSATEN_DATA_I64 || dtype == TOPSATEN_DATA_F64))
    return TOPSATEN_STATUS_NOT_SUPPORT;
  std::vector<int64_t> map;
  int64_t group = 0;
  if (c.ok() && !reduce_map(a.dims, dims, keepdim, o.dims, &map, &group))
    return TOPSATEN_STATUS_BAD_PARAM;
  if (!c.ok()) return c.status();
  std::vector<double> acc(o.n, init());
  for (int64_t i = 0; i < a.n; ++i) acc[map[i]] = fold(acc[map[i]], a.get(i));
  for (int64_t i = 0; i < o.n; ++i) o.set(i, fin(acc[i], group));
  return TOPSATEN_STATUS_SUCCESS;
}
}  // namespace

ATEN_API topsatenStatus_t topsatenSum(T& out, const T& self, Z dims, bool keepdim,
                                      topsatenDataType_t dtype, St s) {
  return reduce(
      "topsatenSum", out, self, dims, keepdim, dtype, s, [] { return 0.0; },
      [](double a, double x) { return a + x; }, [](double a, int64_t) { return a; });
}
ATEN_API topsatenStatus_t topsatenMean(T& out, const T& self, Z dims, bool keepdim,
                                       topsatenDataType_t dtype, St s) {
  return reduce(
      "topsatenMean", out, self, dims, keepdim, dtype, s, [] { return 0.0; },
      [](double a, double x) { return a + x; }, [](double a, int64_t n) { return a / n; });
}
ATEN_API topsatenStatus_t topsatenAmax(T& out, const T& self, Z dims, bool keepdim, St s) {
  return reduce(
      "topsatenAmax", out, self, dims, keepdim, TOPSATEN_DATA_NONE, s, [] { return -INFINITY; },
      [](double a, double x) { return std::isnan(a) || std::isnan(x) ? NAN : std::max(a, x); },
      [](double a, int64_t) { return a; });
}
ATEN_API topsatenStatus_t topsatenAmin(T& out, const T& self, Z dims, bool keepdim, St s) {
  return reduce(
      "topsatenAmin", out, self, dims, keepdim, TOPSATEN_DATA_NONE, s, [] { return INFINITY; },
      [](double a, double x) { return std::isnan(a) || std::isnan(x) ? NAN : std::min(a, x); },
      [](double a, int64_t) { return a; });
}
ATEN_API topsatenStatus_t topsatenAll(T& out, const T& self, St s) {
  return reduce(
      "topsatenAll", out, self, Z(), false, TOPSATEN_DATA_NONE, s, [] { return 1.0; },
      [](double a, double x) { return (a != 0 && x != 0) ? 1.0 : 0.0; },
      [](double a, int64_t) { return a; });
}
ATEN_API topsatenStatus_t topsatenLinalgVectorNorm(T& out, const T& self, const S& ord, Z dims,
                                                   bool keepdim, topsatenDataType_t dtype, St s) {
  const double p = sval(ord);
  if (std::isinf(p)) {
    const bool pos = p > 0;
    return reduce(
        "topsatenLinalgVectorNorm", out, self, dims, keepdim, dtype, s,
        [pos] { return pos ? 0.0 : INFINITY; },
        [pos](double a, double x) {
          return pos ? std::max(a, std::fabs(x)) : std::min(a, std::fabs(x));
        },
        [](double a, int64_t) { return a; });
  }
  if (p == 0) {
    return reduce(
        "topsatenLinalgVectorNorm", out, self, dims, keepdim, dtype, s, [] { return 0.0; },
        [](double a, double x) { return a + (x != 0 ? 1.0 : 0.0); },
        [](double a, int64_t) { return a; });
  }
  return reduce(
      "topsatenLinalgVectorNorm", out, self, dims, keepdim, dtype, s, [] { return 0.0; },
      [p](double a, double x) { return a + std::pow(std::fabs(x), p); },
      [p](double a, int64_t) { return std::pow(a, 1.0 / p); });
}

}  // namespace topsaten
