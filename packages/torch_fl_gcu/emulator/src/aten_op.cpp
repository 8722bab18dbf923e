// The operand machinery of every op: tensors, dtypes, operand resolution, shape helpers.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "aten_op.h"

namespace topsaten {

topsatenTensor::topsatenTensor() : dtype_(TOPSATEN_DATA_NONE), data_(nullptr) {}

topsatenTensor::topsatenTensor(topsatenSize_t dims, topsatenSize_t strides,
                               topsatenDataType_t dtype, void* data)
    : dims_(dims.data, dims.data + dims.len),
      strides_(strides.data, strides.data + strides.len),
      dtype_(dtype),
      data_(data) {}

namespace emu {

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

double trunc_if_int(const Buf& o, double v) { return is_float(o.dt) ? v : std::trunc(v); }

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

}  // namespace emu
}  // namespace topsaten
