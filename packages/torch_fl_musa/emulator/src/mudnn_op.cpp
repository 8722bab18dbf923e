// The machinery every operator shares: element types, strided access, memory spans and the
// launch of queued work (mudnn_op.h).
#include "mudnn_op.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <utility>

namespace musa {
namespace dnn {
namespace emu {

Status enter(const char* name) { return static_cast<Status>(musa_emu::enter(name)); }

bool valid_type(Type t) {
  int v = static_cast<int>(t);
  return v >= static_cast<int>(Type::FLOAT) && v <= static_cast<int>(Type::BOOL);
}

size_t elem_size(Type t) {
  switch (t) {
    case Type::FLOAT:
    case Type::INT32:
      return 4;
    case Type::HALF:
    case Type::BFLOAT16:
    case Type::INT16:
      return 2;
    case Type::DOUBLE:
    case Type::INT64:
      return 8;
    case Type::INT8:
    case Type::UINT8:
    case Type::BOOL:
      return 1;
  }
  return 0;
}

bool is_floating(Type t) { return t == Type::FLOAT || t == Type::HALF || t == Type::BFLOAT16; }

bool is_int(Type t) { return t == Type::INT32 || t == Type::INT64; }

const char* type_name(Type t) {
  switch (t) {
    case Type::FLOAT:
      return "FLOAT";
    case Type::HALF:
      return "HALF";
    case Type::BFLOAT16:
      return "BFLOAT16";
    case Type::DOUBLE:
      return "DOUBLE";
    case Type::INT8:
      return "INT8";
    case Type::INT16:
      return "INT16";
    case Type::INT32:
      return "INT32";
    case Type::INT64:
      return "INT64";
    case Type::UINT8:
      return "UINT8";
    case Type::BOOL:
      return "BOOL";
  }
  return "?";
}

float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
  float mag;
  if (exp == 0) {
    mag = std::ldexp(static_cast<float>(man), -24);
  } else if (exp == 31) {
    mag = man ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    mag = std::ldexp(static_cast<float>(man | 0x400u), static_cast<int>(exp) - 25);
  }
  uint32_t bits;
  std::memcpy(&bits, &mag, 4);
  bits |= sign;
  std::memcpy(&mag, &bits, 4);
  return mag;
}

float bf16_to_float(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

namespace {

// v rounded to nearest even in a binary format of `ebits` exponent and `mbits` mantissa bits.
uint32_t round_to_format(double v, int ebits, int mbits) {
  const uint32_t sign = std::signbit(v) ? 1u << (ebits + mbits) : 0u;
  const uint32_t inf = ((1u << ebits) - 1) << mbits;
  const int bias = (1 << (ebits - 1)) - 1, emin = 1 - bias, emax = bias;
  double a = std::fabs(v);
  if (std::isnan(v)) return sign | inf | (1u << (mbits - 1));
  if (std::isinf(a)) return sign | inf;
  if (a < std::ldexp(1.0, emin)) {
    // Subnormal: a multiple of 2^(emin - mbits); a carry into 2^mbits is the smallest normal.
    return sign | static_cast<uint32_t>(std::nearbyint(std::ldexp(a, mbits - emin)));
  }
  int e2;
  std::frexp(a, &e2);
  int e = e2 - 1;  // a in [2^e, 2^(e+1))
  double r = std::nearbyint(std::ldexp(a, mbits - e));
  if (r >= std::ldexp(1.0, mbits + 1)) {
    ++e;
    r = std::ldexp(1.0, mbits);
  }
  if (e > emax) return sign | inf;
  uint32_t man = static_cast<uint32_t>(r) - (1u << mbits);
  return sign | (static_cast<uint32_t>(e + bias) << mbits) | man;
}

int64_t double_to_int(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9223372036854775807.0) return std::numeric_limits<int64_t>::max();
  if (v <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

template <typename T>
T read_as(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
void write_as(char* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

}  // namespace

uint16_t double_to_half(double v) { return static_cast<uint16_t>(round_to_format(v, 5, 10)); }

uint16_t double_to_bf16(double v) { return static_cast<uint16_t>(round_to_format(v, 8, 7)); }

double load_f(const char* base, Type t, int64_t off) {
  const char* p = base + off * static_cast<int64_t>(elem_size(t));
  switch (t) {
    case Type::FLOAT:
      return read_as<float>(p);
    case Type::HALF:
      return half_to_float(read_as<uint16_t>(p));
    case Type::BFLOAT16:
      return bf16_to_float(read_as<uint16_t>(p));
    case Type::DOUBLE:
      return read_as<double>(p);
    default:
      return static_cast<double>(load_i(base, t, off));
  }
}

int64_t load_i(const char* base, Type t, int64_t off) {
  const char* p = base + off * static_cast<int64_t>(elem_size(t));
  switch (t) {
    case Type::INT8:
      return read_as<int8_t>(p);
    case Type::INT16:
      return read_as<int16_t>(p);
    case Type::INT32:
      return read_as<int32_t>(p);
    case Type::INT64:
      return read_as<int64_t>(p);
    case Type::UINT8:
      return read_as<uint8_t>(p);
    case Type::BOOL:
      return *p != 0 ? 1 : 0;
    default:
      return double_to_int(load_f(base, t, off));
  }
}

void store_f(char* base, Type t, int64_t off, double v) {
  char* p = base + off * static_cast<int64_t>(elem_size(t));
  switch (t) {
    case Type::FLOAT:
      write_as<float>(p, static_cast<float>(v));
      break;
    case Type::HALF:
      write_as<uint16_t>(p, double_to_half(v));
      break;
    case Type::BFLOAT16:
      write_as<uint16_t>(p, double_to_bf16(v));
      break;
    case Type::DOUBLE:
      write_as<double>(p, v);
      break;
    case Type::BOOL:
      *p = v != 0 ? 1 : 0;  // NaN is true, as a C++ bool conversion
      break;
    default:
      store_i(base, t, off, double_to_int(v));
      break;
  }
}

void store_i(char* base, Type t, int64_t off, int64_t v) {
  char* p = base + off * static_cast<int64_t>(elem_size(t));
  switch (t) {
    case Type::INT8:
      write_as<uint8_t>(p, static_cast<uint8_t>(v));
      break;
    case Type::UINT8:
      write_as<uint8_t>(p, static_cast<uint8_t>(v));
      break;
    case Type::INT16:
      write_as<uint16_t>(p, static_cast<uint16_t>(v));
      break;
    case Type::INT32:
      write_as<uint32_t>(p, static_cast<uint32_t>(v));
      break;
    case Type::INT64:
      write_as<int64_t>(p, v);
      break;
    case Type::BOOL:
      *p = v != 0 ? 1 : 0;
      break;
    default:
      store_f(base, t, off, static_cast<double>(v));
      break;
  }
}

bool same_dims(const Tensor& a, const Tensor& b) {
  if (a.GetNdims() != b.GetNdims()) return false;
  for (int d = 0; d < a.GetNdims(); ++d)
    if (a.GetDims()[d] != b.GetDims()[d]) return false;
  return true;
}

bool offset_span(const Tensor& t, int64_t* lo, int64_t* hi) {
  int64_t l = 0, h = 0;
  for (int d = 0; d < t.GetNdims(); ++d) {
    int64_t ext;
    if (t.GetDims()[d] == 0) {
      *lo = *hi = 0;
      return true;
    }
    if (__builtin_mul_overflow(t.GetDims()[d] - 1, t.GetStrides()[d], &ext)) return false;
    if (__builtin_add_overflow(ext < 0 ? l : h, ext, ext < 0 ? &l : &h)) return false;
  }
  *lo = l;
  *hi = h;
  return true;
}

bool spans_overlap(const Tensor& a, const Tensor& b, bool* same) {
  if (same) {
    *same = a.GetAddr() == b.GetAddr() && a.GetType() == b.GetType() && same_dims(a, b);
    for (int d = 0; *same && d < a.GetNdims(); ++d)
      if (a.GetDims()[d] > 1 && a.GetStrides()[d] != b.GetStrides()[d]) *same = false;
  }
  if (a.GetElementCount() == 0 || b.GetElementCount() == 0) return false;
  int64_t alo, ahi, blo, bhi;
  if (!offset_span(a, &alo, &ahi) || !offset_span(b, &blo, &bhi)) return true;
  const auto start = [](const Tensor& t, int64_t off) {
    return reinterpret_cast<intptr_t>(t.GetAddr()) +
           static_cast<intptr_t>(off * static_cast<int64_t>(elem_size(t.GetType())));
  };
  const intptr_t a0 = start(a, alo), a1 = start(a, ahi + 1), b0 = start(b, blo),
                 b1 = start(b, bhi + 1);
  return a0 < b1 && b0 < a1;
}

bool self_overlaps(const Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (|stride|, size) of the dims that repeat
  for (int d = 0; d < t.GetNdims(); ++d) {
    int64_t n = t.GetDims()[d], s = t.GetStrides()[d];
    if (n == 0) return false;  // no element at all
    if (n > 1) dims.emplace_back(s < 0 ? -s : s, n);
  }
  std::sort(dims.begin(), dims.end());
  // Each dim must step past everything the smaller-strided ones reach.
  int64_t reach = 1;
  for (auto& [s, n] : dims) {
    if (s < reach) return true;
    int64_t ext;
    if (__builtin_mul_overflow(s, n - 1, &ext) || __builtin_add_overflow(reach, ext, &reach))
      return true;
  }
  return false;
}

bool integral_alpha(double alpha, int64_t* out) {
  if (!(alpha == std::trunc(alpha)) || std::fabs(alpha) >= 9223372036854775807.0) return false;
  *out = static_cast<int64_t>(alpha);
  return true;
}

std::vector<double> View::gather_f() const {
  std::vector<double> v;
  v.reserve(static_cast<size_t>(numel()));
  for_each_offset(nd(), dims(), t.GetStrides(),
                  [&](int64_t off) { v.push_back(load_f(base, type(), off)); });
  return v;
}

std::vector<int64_t> View::gather_i() const {
  std::vector<int64_t> v;
  v.reserve(static_cast<size_t>(numel()));
  for_each_offset(nd(), dims(), t.GetStrides(),
                  [&](int64_t off) { v.push_back(load_i(base, type(), off)); });
  return v;
}

void View::scatter_f(const std::vector<double>& vals) const {
  size_t i = 0;
  for_each_offset(nd(), dims(), t.GetStrides(),
                  [&](int64_t off) { store_f(base, type(), off, vals[i++]); });
}

void View::scatter_i(const std::vector<int64_t>& vals) const {
  size_t i = 0;
  for_each_offset(nd(), dims(), t.GetStrides(),
                  [&](int64_t off) { store_i(base, type(), off, vals[i++]); });
}

Status Launch::submit(std::function<void(const std::vector<View>&)> compute) {
  char msg[512];
  for (const Op& o : ops_) {
    if (o.output && self_overlaps(o.t)) {
      std::snprintf(msg, sizeof msg, "%s: output %s overlaps itself (a zero or interleaved stride)",
                    op_, o.role);
      musa_emu::violation(msg);
      return Status::INVALID_PARAMETER;
    }
  }
  const int current = musa_emu::current_device();
  if (h_.GetDeviceId() != current) {
    std::snprintf(msg, sizeof msg, "%s: the handle's device %d is not the current device %d", op_,
                  h_.GetDeviceId(), current);
    musa_emu::violation(msg);
    return Status::INVALID_PARAMETER;
  }

  // One range per non-empty operand: the bytes from its lowest to its highest element.
  std::vector<musa_emu::Range> ranges;
  std::vector<size_t> range_op;
  std::vector<int> op_range(ops_.size(), -1);
  std::vector<int64_t> lo_bytes(ops_.size(), 0);
  for (size_t i = 0; i < ops_.size(); ++i) {
    const Tensor& t = ops_[i].t;
    if (t.GetElementCount() == 0) continue;
    const int64_t es = static_cast<int64_t>(elem_size(t.GetType()));
    int64_t lo, hi, lo_b, len;
    if (!offset_span(t, &lo, &hi) || __builtin_mul_overflow(lo, es, &lo_b) ||
        __builtin_mul_overflow(hi - lo + 1, es, &len)) {
      std::snprintf(msg, sizeof msg, "%s: %s spans more memory than exists", op_, ops_[i].role);
      musa_emu::violation(msg);
      return Status::INVALID_PARAMETER;
    }
    uintptr_t start = reinterpret_cast<uintptr_t>(t.GetAddr()) + static_cast<uintptr_t>(lo_b);
    op_range[i] = static_cast<int>(ranges.size());
    lo_bytes[i] = lo_b;
    range_op.push_back(i);
    ranges.push_back({reinterpret_cast<const void*>(start), static_cast<size_t>(len)});
  }

  std::vector<View> views(ops_.size());
  for (size_t i = 0; i < ops_.size(); ++i) views[i].t = ops_[i].t;
  auto work = [views = std::move(views), op_range, lo_bytes, compute = std::move(compute)](
                  void* const* host, char* err, size_t len) -> int {
    std::vector<View> v = views;
    for (size_t i = 0; i < v.size(); ++i)
      if (op_range[i] >= 0) v[i].base = static_cast<char*>(host[op_range[i]]) - lo_bytes[i];
    try {
      compute(v);
    } catch (const std::bad_alloc&) {
      std::snprintf(err, len, "out of host memory");
      return musaErrorMemoryAllocation;
    }
    return 0;
  };
  int rc = musa_emu::submit(op_, h_.GetStream(), ranges.data(), ranges.size(), std::move(work));
  if (rc == 0) return Status::SUCCESS;
  // The kernel launch failed: the stream's capture was invalidated earlier.
  if (rc == -2) return Status::EXECUTION_FAILED;
  if (rc > 0 && static_cast<size_t>(rc) <= ranges.size()) {
    const musa_emu::Range& r = ranges[rc - 1];
    std::snprintf(msg, sizeof msg,
                  "%s: %s [%p, +%zu bytes) is not inside one live allocation of device %d", op_,
                  ops_[range_op[rc - 1]].role, r.ptr, r.bytes, current);
  } else {
    std::snprintf(msg, sizeof msg, "%s: the handle's stream is not a live stream of device %d", op_,
                  current);
  }
  musa_emu::violation(msg);
  return Status::INVALID_PARAMETER;
}

}  // namespace emu
}  // namespace dnn
}  // namespace musa
