// Elementwise ops: unary, binary, three operands, activation backward, comparisons.
#include <algorithm>
#include <cmath>

#include "aten_op.h"

namespace topsaten {

#define UNARY(Name, expr)                                                                       \
  ATEN_API topsatenStatus_t topsaten##Name(T& out, const T& self, St stream) {                  \
    return unary("topsaten" #Name, out, self, stream, [](double x) -> double { return expr; }); \
  }
UNARY(Abs, std::fabs(x))
UNARY(Neg, -x)
UNARY(Sqrt, std::sqrt(x))
UNARY(Rsqrt, 1.0 / std::sqrt(x))
UNARY(Exp, std::exp(x))
UNARY(Log, std::log(x))
UNARY(Sin, std::sin(x))
UNARY(Cos, std::cos(x))
UNARY(Tanh, std::tanh(x))
UNARY(Sigmoid, 1.0 / (1.0 + std::exp(-x)))
UNARY(Relu, std::isnan(x) ? x : (x > 0 ? x : 0.0))
UNARY(Reciprocal, 1.0 / x)
UNARY(Erf, std::erf(x))
UNARY(Floor, std::floor(x))
UNARY(Ceil, std::ceil(x))
UNARY(Silu, x / (1.0 + std::exp(-x)))
UNARY(LogicalNot, x == 0 ? 1.0 : 0.0)
#undef UNARY

// ---- binary ----
ATEN_API topsatenStatus_t topsatenMul(T& out, const T& a, const T& b, St s) {
  return binary("topsatenMul", out, a, b, s, [](double x, double y) { return x * y; });
}
ATEN_API topsatenStatus_t topsatenDiv(T& out, const T& a, const T& b, St s) {
  return binary("topsatenDiv", out, a, b, s, [](double x, double y) { return x / y; });
}
ATEN_API topsatenStatus_t topsatenMaximum(T& out, const T& a, const T& b, St s) {
  return binary("topsatenMaximum", out, a, b, s, [](double x, double y) {
    return std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y);
  });
}
ATEN_API topsatenStatus_t topsatenMinimum(T& out, const T& a, const T& b, St s) {
  return binary("topsatenMinimum", out, a, b, s, [](double x, double y) {
    return std::isnan(x) || std::isnan(y) ? NAN : std::min(x, y);
  });
}
ATEN_API topsatenStatus_t topsatenPow(T& out, const T& a, const T& b, St s) {
  return binary("topsatenPow", out, a, b, s, [](double x, double y) { return std::pow(x, y); });
}
ATEN_API topsatenStatus_t topsatenAdd(T& out, const T& a, const T& b, const S& alpha, St s) {
  const double al = sval(alpha);
  return binary("topsatenAdd", out, a, b, s, [al](double x, double y) { return x + al * y; });
}
ATEN_API topsatenStatus_t topsatenSub(T& out, const T& a, const T& b, const S& alpha, St s) {
  const double al = sval(alpha);
  return binary("topsatenSub", out, a, b, s, [al](double x, double y) { return x - al * y; });
}

// ---- three operands ----
namespace {
template <typename F>
topsatenStatus_t ternary(const char* name, T& out, const T& a, const T& b, const T& c3, St s, F f) {
  Call c(name, s);
  Buf o = c.take(out), x = c.take(a), y = c.take(b), z = c.take(c3);
  c.require(o.dims == x.dims && x.dims == y.dims && y.dims == z.dims);  // no broadcasting
  if (!c.ok()) return c.status();
  for (int64_t i = 0; i < x.n; ++i) o.set(i, f(x.get(i), y.get(i), z.get(i)));
  return TOPSATEN_STATUS_SUCCESS;
}
}  // namespace

ATEN_API topsatenStatus_t topsatenAddcmul(T& out, const T& self, const T& t1, const T& t2,
                                          const S& value, St s) {
  const double v = sval(value);
  return ternary("topsatenAddcmul", out, self, t1, t2, s,
                 [v](double a, double b, double c) { return a + v * b * c; });
}
ATEN_API topsatenStatus_t topsatenAddcdiv(T& out, const T& self, const T& t1, const T& t2,
                                          const S& value, St s) {
  const double v = sval(value);
  return ternary("topsatenAddcdiv", out, self, t1, t2, s,
                 [v](double a, double b, double c) { return a + v * b / c; });
}
ATEN_API topsatenStatus_t topsatenLerp(T& out, const T& self, const T& end, const S& weight, St s) {
  const double w = sval(weight);
  // PyTorch's formulation: exact at both ends.
  return binary("topsatenLerp", out, self, end, s, [w](double a, double b) {
    return std::fabs(w) < 0.5 ? a + w * (b - a) : b - (b - a) * (1 - w);
  });
}

// ---- activation backward ----
ATEN_API topsatenStatus_t topsatenTanhBackward(T& gi, const T& go, const T& y, St s) {
  return binary("topsatenTanhBackward", gi, go, y, s,
                [](double g, double t) { return g * (1 - t * t); });
}
ATEN_API topsatenStatus_t topsatenSigmoidBackward(T& gi, const T& go, const T& y, St s) {
  return binary("topsatenSigmoidBackward", gi, go, y, s,
                [](double g, double t) { return g * (1 - t) * t; });
}
ATEN_API topsatenStatus_t topsatenThresholdBackward(T& gi, const T& go, const T& x,
                                                    const S& threshold, St s) {
  const double th = sval(threshold);
  return binary("topsatenThresholdBackward", gi, go, x, s,
                [th](double g, double v) { return v <= th ? 0.0 : g; });
}

// ---- compare ----
#define CMP(Name, op)                                                              \
  ATEN_API topsatenStatus_t topsaten##Name(T& out, const T& a, const T& b, St s) { \
    return binary("topsaten" #Name, out, a, b, s,                                  \
                  [](double x, double y) { return (x op y) ? 1.0 : 0.0; });        \
  }
CMP(Eq, ==)
CMP(Ne, !=)
CMP(Lt, <)
CMP(Le, <=)
CMP(Gt, >)
CMP(Ge, >=)
#undef CMP

}  // namespace topsaten
