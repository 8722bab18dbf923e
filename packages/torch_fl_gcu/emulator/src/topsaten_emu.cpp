// libtopsaten.so of the torch-fl TopsRider emulator. Every op enforces the
// measured contract (docs/gcu.md, "The TopsRider emulator"):
//  - NOT_SUPPORT for any I64 or F64 operand (no 64-bit kernels);
//  - BAD_PARAM for rank-0 shapes (describe them as {1});
//  - strides are ignored: data is read and written as contiguous;
//  - no broadcasting: operand shapes must match exactly;
//  - index operands must be I32;
//  - operands must be device pointers of the stream's card, which must be
//    current (device-scoped pointers);
//  - topsaten must be initialised (allocator callbacks, then topsatenInit);
//  - fault injection by name through topsEmuInjectFault.
// Arithmetic is done in double and rounded to the output dtype.
#include "topsaten/topsaten.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

#include "emu_internal.h"

#define ATEN_API __attribute__((visibility("default")))

namespace topsaten {

topsatenTensor::topsatenTensor() : dtype_(TOPSATEN_DATA_NONE), data_(nullptr) {}

topsatenTensor::topsatenTensor(topsatenSize_t dims, topsatenSize_t strides,
                               topsatenDataType_t dtype, void* data)
    : dims_(dims.data, dims.data + dims.len),
      strides_(strides.data, strides.data + strides.len),
      dtype_(dtype),
      data_(data) {}

namespace {

bool g_init = false;
topsatenMallocFunc_t g_malloc = nullptr;
topsatenFreeFunc_t g_free = nullptr;

int64_t numel(const std::vector<int64_t>& d) {
  return std::accumulate(d.begin(), d.end(), int64_t{1}, std::multiplies<int64_t>());
}

size_t elem_size(topsatenDataType_t t) {
  switch (t) {
    case TOPSATEN_DATA_FP32:
    case TOPSATEN_DATA_I32:
      return 4;
    case TOPSATEN_DATA_F64:
    case TOPSATEN_DATA_I64:
      return 8;
    case TOPSATEN_DATA_FP16:
    case TOPSATEN_DATA_BF16:
    case TOPSATEN_DATA_I16:
      return 2;
    case TOPSATEN_DATA_I8:
    case TOPSATEN_DATA_U8:
    case TOPSATEN_DATA_PRED:
      return 1;
    default:
      return 0;
  }
}

bool is_float(topsatenDataType_t t) {
  return t == TOPSATEN_DATA_FP32 || t == TOPSATEN_DATA_FP16 || t == TOPSATEN_DATA_BF16;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal
      int e = -1;
      uint32_t m = mant;
      do {
        m <<= 1;
        ++e;
      } while (!(m & 0x400));
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (m & 0x3ff) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 112) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0));
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absx < 0x38800000u) {                      // subnormal or zero: round to nearest even
    const float a = std::fabs(f) * 16777216.0f;  // 2^24
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a)));
  }
  const uint32_t mant = absx & 0x7fffff;
  uint32_t h = ((absx >> 23) - 112) << 10 | mant >> 13;
  const uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float bf16_to_float(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

// A resolved operand: host memory behind a device pointer, read as contiguous.
struct Buf {
  char* p = nullptr;
  topsatenDataType_t dt = TOPSATEN_DATA_NONE;
  std::vector<int64_t> dims;
  int64_t n = 0;

  double get(int64_t i) const {
    const char* q = p + i * static_cast<int64_t>(elem_size(dt));
    switch (dt) {
      case TOPSATEN_DATA_FP32: {
        float v;
        std::memcpy(&v, q, 4);
        return v;
      }
      case TOPSATEN_DATA_FP16: {
        uint16_t v;
        std::memcpy(&v, q, 2);
        return half_to_float(v);
      }
      case TOPSATEN_DATA_BF16: {
        uint16_t v;
        std::memcpy(&v, q, 2);
        return bf16_to_float(v);
      }
      case TOPSATEN_DATA_I32: {
        int32_t v;
        std::memcpy(&v, q, 4);
        return v;
      }
      case TOPSATEN_DATA_I16: {
        int16_t v;
        std::memcpy(&v, q, 2);
        return v;
      }
      case TOPSATEN_DATA_I8:
        return static_cast<int8_t>(*q);
      case TOPSATEN_DATA_U8:
        return static_cast<uint8_t>(*q);
      case TOPSATEN_DATA_PRED:
        return *q != 0 ? 1.0 : 0.0;
      default:
        return 0;
    }
  }
  void set(int64_t i, double v) const {
    char* q = p + i * static_cast<int64_t>(elem_size(dt));
    switch (dt) {
      case TOPSATEN_DATA_FP32: {
        float f = static_cast<float>(v);
        std::memcpy(q, &f, 4);
        break;
      }
      case TOPSATEN_DATA_FP16: {
        uint16_t h = float_to_half(static_cast<float>(v));
        std::memcpy(q, &h, 2);
        break;
      }
      case TOPSATEN_DATA_BF16: {
        uint16_t h = float_to_bf16(static_cast<float>(v));
        std::memcpy(q, &h, 2);
        break;
      }
      case TOPSATEN_DATA_I32: {
        int32_t x = static_cast<int32_t>(v);
        std::memcpy(q, &x, 4);
        break;
      }
      case TOPSATEN_DATA_I16: {
        int16_t x = static_cast<int16_t>(v);
        std::memcpy(q, &x, 2);
        break;
      }
      case TOPSATEN_DATA_I8:
        *q = static_cast<char>(static_cast<int8_t>(v));
        break;
      case TOPSATEN_DATA_U8:
        *q = static_cast<char>(static_cast<uint8_t>(static_cast<int64_t>(v)));
        break;
      case TOPSATEN_DATA_PRED:
        *q = v != 0 ? 1 : 0;
        break;
      default:
        break;
    }
  }
};

// Checks the stream and resolves every operand; a non-success status on failure.
class Call {
 public:
  Call(const char* name, St stream) {
    status_ = static_cast<topsatenStatus_t>(topsEmuInternalEnter(name));
    if (status_ != TOPSATEN_STATUS_SUCCESS) return;
    if (!g_init) {
      status_ = TOPSATEN_STATUS_RUNTIME_ERROR;
      return;
    }
    int cur = -1;
    if (topsGetDevice(&cur) != topsSuccess || topsEmuInternalStreamDevice(stream) != cur) {
      status_ = TOPSATEN_STATUS_RUNTIME_ERROR;
    }
  }
  bool ok() const { return status_ == TOPSATEN_STATUS_SUCCESS; }
  topsatenStatus_t status() const { return status_; }
  // Resolves a tensor operand; `index` operands must be I32.
  Buf take(const T& t, bool index = false) {
    Buf b;
    if (!ok()) return b;
    if (!t.defined()) {
      status_ = TOPSATEN_STATUS_BAD_PARAM;
      return b;
    }
    if (t.dtype() == TOPSATEN_DATA_I64 || t.dtype() == TOPSATEN_DATA_F64) {
      status_ = TOPSATEN_STATUS_NOT_SUPPORT;
      return b;
    }
    if (index && t.dtype() != TOPSATEN_DATA_I32) {
      status_ = TOPSATEN_STATUS_NOT_SUPPORT;
      return b;
    }
    if (t.dims().empty()) {
      status_ = TOPSATEN_STATUS_BAD_PARAM;
      return b;
    }
    for (int64_t d : t.dims())
      if (d < 0) {
        status_ = TOPSATEN_STATUS_BAD_PARAM;
        return b;
      }
    b.dt = t.dtype();
    b.dims = t.dims();
    b.n = numel(b.dims);
    if (b.n == 0) return b;
    b.p = static_cast<char*>(topsEmuInternalResolve(t.data(), b.n * elem_size(b.dt)));
    if (!b.p) status_ = TOPSATEN_STATUS_RUNTIME_ERROR;
    return b;
  }
  void require(bool cond, topsatenStatus_t s = TOPSATEN_STATUS_BAD_PARAM) {
    if (ok() && !cond) status_ = s;
  }
  void scalar(const S& s) {
    if (ok() && (s.dtype == TOPSATEN_DATA_I64 || s.dtype == TOPSATEN_DATA_F64))
      return;  // scalars are fine
  }

 private:
  topsatenStatus_t status_ = TOPSATEN_STATUS_SUCCESS;
};

double sval(const S& s) {
  switch (s.dtype) {
    case TOPSATEN_DATA_FP32:
    case TOPSATEN_DATA_F64:
    case TOPSATEN_DATA_FP16:
    case TOPSATEN_DATA_BF16:
      return s.fval;
    default:
      return static_cast<double>(s.ival);
  }
}

topsatenStatus_t unary(const char* name, T& out, const T& self, St stream, double (*f)(double)) {
  Call c(name, stream);
  Buf o = c.take(out), a = c.take(self);
  c.require(o.dims == a.dims);
  if (!c.ok()) return c.status();
  for (int64_t i = 0; i < a.n; ++i) o.set(i, f(a.get(i)));
  return TOPSATEN_STATUS_SUCCESS;
}

template <typename F>
topsatenStatus_t binary(const char* name, T& out, const T& self, const T& other, St stream, F f) {
  Call c(name, stream);
  Buf o = c.take(out), a = c.take(self), b = c.take(other);
  c.require(o.dims == a.dims && a.dims == b.dims);  // no broadcasting
  if (!c.ok()) return c.status();
  for (int64_t i = 0; i < a.n; ++i) o.set(i, f(a.get(i), b.get(i)));
  return TOPSATEN_STATUS_SUCCESS;
}

double trunc_if_int(const Buf& o, double v) { return is_float(o.dt) ? v : std::trunc(v); }

// Reduction geometry: for each input element, the output element it folds into.
bool reduce_map(const std::vector<int64_t>& in, Z dims, bool keepdim,
                const std::vector<int64_t>& out_dims, std::vector<int64_t>* map, int64_t* group) {
  const int64_t r = static_cast<int64_t>(in.size());
  std::vector<bool> red(r, dims.len == 0);
  for (int64_t i = 0; i < dims.len; ++i) {
    int64_t d = dims.data[i] < 0 ? dims.data[i] + r : dims.data[i];
    if (d < 0 || d >= r) return false;
    red[d] = true;
  }
  std::vector<int64_t> expect;
  for (int64_t i = 0; i < r; ++i) {
    if (!red[i])
      expect.push_back(in[i]);
    else if (keepdim)
      expect.push_back(1);
  }
  if (numel(expect) != numel(out_dims)) return false;
  *group = 1;
  for (int64_t i = 0; i < r; ++i)
    if (red[i]) *group *= in[i];
  const int64_t n = numel(in);
  map->assign(n, 0);
  std::vector<int64_t> idx(r, 0);
  for (int64_t lin = 0; lin < n; ++lin) {
    int64_t o = 0;
    for (int64_t i = 0; i < r; ++i)
      if (!red[i]) o = o * in[i] + idx[i];
    (*map)[lin] = o;
    for (int64_t i = r - 1; i >= 0; --i) {
      if (++idx[i] < in[i]) break;
      idx[i] = 0;
    }
  }
  return true;
}

// Outer/dim/inner split of a shape at `dim`.
bool split(const std::vector<int64_t>& d, int64_t dim, int64_t* outer, int64_t* len,
           int64_t* inner) {
  const int64_t r = static_cast<int64_t>(d.size());
  if (dim < 0) dim += r;
  if (dim < 0 || dim >= r) return false;
  *outer = 1;
  *inner = 1;
  for (int64_t i = 0; i < dim; ++i) *outer *= d[i];
  *len = d[dim];
  for (int64_t i = dim + 1; i < r; ++i) *inner *= d[i];
  return true;
}

}  // namespace

// ---- init ----
ATEN_API topsatenStatus_t topsatenMallocFuncRegister(topsatenMallocFunc_t fn) {
  g_malloc = fn;
  return fn ? TOPSATEN_STATUS_SUCCESS : TOPSATEN_STATUS_BAD_PARAM;
}
ATEN_API topsatenStatus_t topsatenFreeFuncRegister(topsatenFreeFunc_t fn) {
  g_free = fn;
  return fn ? TOPSATEN_STATUS_SUCCESS : TOPSATEN_STATUS_BAD_PARAM;
}
ATEN_API topsatenStatus_t topsatenMallocAsyncFuncRegister(topsatenMallocAsyncFunc_t fn) {
  return fn ? TOPSATEN_STATUS_SUCCESS : TOPSATEN_STATUS_BAD_PARAM;
}
ATEN_API topsatenStatus_t topsatenFreeAsyncFuncRegister(topsatenFreeAsyncFunc_t fn) {
  return fn ? TOPSATEN_STATUS_SUCCESS : TOPSATEN_STATUS_BAD_PARAM;
}
ATEN_API topsatenStatus_t topsatenInit() {
  if (int s = topsEmuInternalEnter("topsatenInit")) return static_cast<topsatenStatus_t>(s);
  // The SDK needs the allocator callbacks before init.
  if (!g_malloc || !g_free) return TOPSATEN_STATUS_BAD_PARAM;
  g_init = true;
  return TOPSATEN_STATUS_SUCCESS;
}
ATEN_API topsatenStatus_t topsatenFinalize() {
  g_init = false;
  return TOPSATEN_STATUS_SUCCESS;
}

// ---- unary ----
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

// ---- reductions ----
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

// ---- matmul ----
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

// ---- softmax ----
namespace {
topsatenStatus_t softmax(const char* name, T& out, const T& self, int64_t dim, bool half_to_float,
                         St s, bool log) {
  Call c(name, s);
  Buf o = c.take(out), a = c.take(self);
  c.require(o.dims == a.dims);
  c.require(!half_to_float || (a.dt == TOPSATEN_DATA_FP16 && o.dt == TOPSATEN_DATA_FP32));
  int64_t outer = 0, len = 0, inner = 0;
  c.require(c.ok() && split(a.dims, dim, &outer, &len, &inner));
  if (!c.ok()) return c.status();
  for (int64_t b = 0; b < outer; ++b)
    for (int64_t j = 0; j < inner; ++j) {
      const int64_t base = b * len * inner + j;
      double mx = -INFINITY;
      for (int64_t i = 0; i < len; ++i) mx = std::max(mx, a.get(base + i * inner));
      double sum = 0;
      for (int64_t i = 0; i < len; ++i) sum += std::exp(a.get(base + i * inner) - mx);
      for (int64_t i = 0; i < len; ++i) {
        const double x = a.get(base + i * inner) - mx;
        o.set(base + i * inner, log ? x - std::log(sum) : std::exp(x) / sum);
      }
    }
  return TOPSATEN_STATUS_SUCCESS;
}

topsatenStatus_t softmax_bwd(const char* name, T& gi, const T& go, const T& out, int64_t dim, St s,
                             bool log) {
  Call c(name, s);
  Buf g = c.take(gi), gy = c.take(go), y = c.take(out);
  c.require(g.dims == gy.dims && gy.dims == y.dims);
  int64_t outer = 0, len = 0, inner = 0;
  c.require(c.ok() && split(y.dims, dim, &outer, &len, &inner));
  if (!c.ok()) return c.status();
  for (int64_t b = 0; b < outer; ++b)
    for (int64_t j = 0; j < inner; ++j) {
      const int64_t base = b * len * inner + j;
      double acc = 0;
      for (int64_t i = 0; i < len; ++i) {
        const int64_t k = base + i * inner;
        acc += log ? gy.get(k) : gy.get(k) * y.get(k);
      }
      for (int64_t i = 0; i < len; ++i) {
        const int64_t k = base + i * inner;
        g.set(k, log ? gy.get(k) - std::exp(y.get(k)) * acc : y.get(k) * (gy.get(k) - acc));
      }
    }
  return TOPSATEN_STATUS_SUCCESS;
}
}  // namespace

ATEN_API topsatenStatus_t topsatenSoftmaxForward(T& out, const T& self, int64_t dim, bool h2f,
                                                 St s) {
  return softmax("topsatenSoftmaxForward", out, self, dim, h2f, s, false);
}
ATEN_API topsatenStatus_t topsatenLogSoftmaxForward(T& out, const T& self, int64_t dim, bool h2f,
                                                    St s) {
  return softmax("topsatenLogSoftmaxForward", out, self, dim, h2f, s, true);
}
ATEN_API topsatenStatus_t topsatenSoftmaxBackward(T& gi, const T& go, const T& out, int64_t dim,
                                                  St s) {
  return softmax_bwd("topsatenSoftmaxBackward", gi, go, out, dim, s, false);
}
ATEN_API topsatenStatus_t topsatenLogSoftmaxBackward(T& gi, const T& go, const T& out, int64_t dim,
                                                     St s) {
  return softmax_bwd("topsatenLogSoftmaxBackward", gi, go, out, dim, s, true);
}

// ---- layer norm ----
// The measured S60 defect: SUCCESS, and nothing written.
ATEN_API topsatenStatus_t topsatenNativeLayerNormBackward(T& gi, T& gw, T& gb, const T& go,
                                                          const T& input, Z, const T& mean,
                                                          const T& rstd, const T&, const T&, St s) {
  Call c("topsatenNativeLayerNormBackward", s);
  c.take(gi);
  c.take(go);
  c.take(input);
  c.take(mean);
  c.take(rstd);
  if (gw.defined()) c.take(gw);
  if (gb.defined()) c.take(gb);
  return c.status();
}

ATEN_API topsatenStatus_t topsatenNativeLayerNorm(T& out, T& mean, T& rstd, const T& input,
                                                  Z normalized_shape, const T& weight,
                                                  const T& bias, double eps, St s) {
  Call c("topsatenNativeLayerNorm", s);
  Buf o = c.take(out), mu = c.take(mean), rs = c.take(rstd), x = c.take(input);
  Buf w, b;
  if (weight.defined()) w = c.take(weight);
  if (bias.defined()) b = c.take(bias);
  c.require(o.dims == x.dims && normalized_shape.len >= 1 &&
            normalized_shape.len <= static_cast<int64_t>(x.dims.size()));
  if (!c.ok()) return c.status();
  int64_t N = 1;
  for (int64_t i = 0; i < normalized_shape.len; ++i) {
    const int64_t d = x.dims[x.dims.size() - normalized_shape.len + i];
    if (d != normalized_shape.data[i]) return TOPSATEN_STATUS_BAD_PARAM;
    N *= d;
  }
  const int64_t M = N ? x.n / N : 0;
  if (mu.n != M || rs.n != M || (w.p && w.n != N) || (b.p && b.n != N))
    return TOPSATEN_STATUS_BAD_PARAM;
  for (int64_t r = 0; r < M; ++r) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < N; ++i) sum += x.get(r * N + i);
    const double m = sum / N;
    for (int64_t i = 0; i < N; ++i) {
      const double d = x.get(r * N + i) - m;
      sq += d * d;
    }
    const double inv = 1.0 / std::sqrt(sq / N + eps);
    mu.set(r, m);
    rs.set(r, inv);
    for (int64_t i = 0; i < N; ++i) {
      double y = (x.get(r * N + i) - m) * inv;
      if (w.p) y *= w.get(i);
      if (b.p) y += b.get(i);
      o.set(r * N + i, y);
    }
  }
  return TOPSATEN_STATUS_SUCCESS;
}

// ---- factories and in-place ----
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

// ---- indexing ----
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

ATEN_API topsatenStatus_t topsatenUpsampleNearestExact2d(T& out, const T& self, Z output_size,
                                                         double scales_h, double scales_w, St s) {
  Call c("topsatenUpsampleNearestExact2d", s);
  Buf o = c.take(out), a = c.take(self);
  c.require(a.dims.size() == 4 && o.dims.size() == 4 && output_size.len == 2);
  c.require(c.ok() && o.dims[0] == a.dims[0] && o.dims[1] == a.dims[1] &&
            o.dims[2] == output_size.data[0] && o.dims[3] == output_size.data[1]);
  if (!c.ok()) return c.status();
  const int64_t NC = a.dims[0] * a.dims[1], H = a.dims[2], W = a.dims[3], OH = o.dims[2],
                OW = o.dims[3];
  const double sh = scales_h > 0 ? 1.0 / scales_h : static_cast<double>(H) / OH;
  const double sw = scales_w > 0 ? 1.0 / scales_w : static_cast<double>(W) / OW;
  for (int64_t p = 0; p < NC; ++p)
    for (int64_t y = 0; y < OH; ++y) {
      const int64_t iy = std::min(static_cast<int64_t>(std::floor((y + 0.5) * sh)), H - 1);
      for (int64_t x = 0; x < OW; ++x) {
        const int64_t ix = std::min(static_cast<int64_t>(std::floor((x + 0.5) * sw)), W - 1);
        o.set((p * OH + y) * OW + x, a.get((p * H + iy) * W + ix));
      }
    }
  return TOPSATEN_STATUS_SUCCESS;
}

}  // namespace topsaten
