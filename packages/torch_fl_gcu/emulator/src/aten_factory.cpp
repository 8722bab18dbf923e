// Factories and in-place fills.
#include <cmath>

#include "aten_op.h"

namespace topsaten {

ATEN_API topsatenStatus_t topsatenArange(T& out, const S& start, const S& end, const S& step,
                                         topsatenDataType_t dtype, int64_t layout, bool pin, St s) {
  Call c("topsatenArange", s);
  Buf o = c.take(out);
  c.require(dtype == o.dt && layout == 0 && !pin);
  if (!c.ok()) return c.status();
  const double a = sval(start), st = sval(step), e = sval(end);
  if (st == 0 || std::ceil((e - a) / st) != static_cast<double>(o.n))
    return TOPSATEN_STATUS_BAD_PARAM;
  for (int64_t i = 0; i < o.n; ++i) o.set(i, a + static_cast<double>(i) * st);
  return TOPSATEN_STATUS_SUCCESS;
}

ATEN_API topsatenStatus_t topsatenFill_(T& self, const S& value, St s) {
  Call c("topsatenFill_", s);
  Buf o = c.take(self);
  if (!c.ok()) return c.status();
  const double v = sval(value);
  for (int64_t i = 0; i < o.n; ++i) o.set(i, v);
  return TOPSATEN_STATUS_SUCCESS;
}

ATEN_API topsatenStatus_t topsatenZero(T& self, St s) {
  Call c("topsatenZero", s);
  Buf o = c.take(self);
  if (!c.ok()) return c.status();
  if (o.n) std::memset(o.p, 0, o.n * elem_size(o.dt));
  return TOPSATEN_STATUS_SUCCESS;
}

ATEN_API topsatenStatus_t topsatenMasked_fill(T& out, const T& self, const T& mask, const S& value,
                                              St s) {
  Call c("topsatenMasked_fill", s);
  Buf o = c.take(out), a = c.take(self), m = c.take(mask);
  c.require(m.dt == TOPSATEN_DATA_PRED);
  c.require(o.dims == a.dims && a.dims == m.dims);
  if (!c.ok()) return c.status();
  const double v = sval(value);
  for (int64_t i = 0; i < a.n; ++i) o.set(i, m.get(i) != 0 ? v : a.get(i));
  return TOPSATEN_STATUS_SUCCESS;
}

ATEN_API topsatenStatus_t topsatenWhere(T& out, const T& cond, const T& self, const T& other,
                                        St s) {
  Call c("topsatenWhere", s);
  Buf o = c.take(out), k = c.take(cond), a = c.take(self), b = c.take(other);
  c.require(k.dt == TOPSATEN_DATA_PRED);
  c.require(o.dims == a.dims && a.dims == b.dims && b.dims == k.dims);
  if (!c.ok()) return c.status();
  for (int64_t i = 0; i < a.n; ++i) o.set(i, k.get(i) != 0 ? a.get(i) : b.get(i));
  return TOPSATEN_STATUS_SUCCESS;
}

}  // namespace topsaten
