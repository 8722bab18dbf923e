// Element types and reductions of the collective ABI: the host loops emulated
// collectives reduce with.
#include "emu_kit/comm_reduce.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace emu_kit {
namespace {

// IEEE half <-> float, round to nearest even: the SDK-free conversions a
// host reduction needs (no F16C assumption on the build machine).
float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    exp = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {
    // Subnormal or zero half: add 0.5 (as a float) so the FPU rounds the
    // mantissa to the half's subnormal step for us.
    float a;
    std::memcpy(&a, &abs, sizeof a);
    a += 0.5f;
    uint32_t r;
    std::memcpy(&r, &a, sizeof r);
    return static_cast<uint16_t>(sign | (r - 0x3f000000u));
  }
  const uint32_t odd = (abs >> 13) & 1u;
  const uint32_t rounded = abs + 0xc8000fffu + odd;  // rebias 127 -> 15 and round
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

float bf16_to_float(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

template <class T>
T fold(T a, T b, int op) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case TFL_REDUCE_PROD:
        return a * b;
      case TFL_REDUCE_MIN:
        return std::isnan(a) || std::isnan(b) ? a + b : (b < a ? b : a);
      case TFL_REDUCE_MAX:
        return std::isnan(a) || std::isnan(b) ? a + b : (b > a ? b : a);
      default:  // SUM, AVG (divided at the end)
        return a + b;
    }
  } else {
    // Wrap-around SUM/PROD without signed overflow: compute unsigned.
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case TFL_REDUCE_PROD:
        return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
      case TFL_REDUCE_MIN:
        return b < a ? b : a;
      case TFL_REDUCE_MAX:
        return b > a ? b : a;
      default:
        return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    }
  }
}

template <class T>
void reduce_native(T* dst, const void* const* srcs, int nsrc, size_t count, int op) {
  for (size_t i = 0; i < count; ++i) {
    T acc;
    std::memcpy(&acc, static_cast<const T*>(srcs[0]) + i, sizeof acc);
    for (int s = 1; s < nsrc; ++s) {
      T v;
      std::memcpy(&v, static_cast<const T*>(srcs[s]) + i, sizeof v);
      acc = fold(acc, v, op);
    }
    if constexpr (std::is_floating_point_v<T>) {
      if (op == TFL_REDUCE_AVG) acc = acc / static_cast<T>(nsrc);
    }
    std::memcpy(dst + i, &acc, sizeof acc);
  }
}

template <float (*Load)(uint16_t), uint16_t (*Store)(float)>
void reduce_16bit(uint16_t* dst, const void* const* srcs, int nsrc, size_t count, int op) {
  for (size_t i = 0; i < count; ++i) {
    float acc = Load(static_cast<const uint16_t*>(srcs[0])[i]);
    for (int s = 1; s < nsrc; ++s)
      acc = fold(acc, Load(static_cast<const uint16_t*>(srcs[s])[i]), op);
    if (op == TFL_REDUCE_AVG) acc /= static_cast<float>(nsrc);
    dst[i] = Store(acc);
  }
}

void reduce_bool(uint8_t* dst, const void* const* srcs, int nsrc, size_t count, int op) {
  const bool any = op == TFL_REDUCE_SUM || op == TFL_REDUCE_MAX;
  for (size_t i = 0; i < count; ++i) {
    bool acc = static_cast<const uint8_t*>(srcs[0])[i] != 0;
    for (int s = 1; s < nsrc; ++s) {
      const bool v = static_cast<const uint8_t*>(srcs[s])[i] != 0;
      acc = any ? (acc || v) : (acc && v);
    }
    dst[i] = acc ? 1 : 0;
  }
}

}  // namespace

size_t dtype_size(int dtype) noexcept {
  switch (dtype) {
    case TFL_DTYPE_F16:
    case TFL_DTYPE_BF16:
      return 2;
    case TFL_DTYPE_F32:
    case TFL_DTYPE_I32:
      return 4;
    case TFL_DTYPE_F64:
    case TFL_DTYPE_I64:
      return 8;
    case TFL_DTYPE_I8:
    case TFL_DTYPE_U8:
    case TFL_DTYPE_BOOL:
      return 1;
    default:
      return 0;
  }
}

const char* dtype_name(int dtype) noexcept {
  static const char* const kNames[TFL_DTYPE_COUNT] = {"f16", "bf16", "f32", "f64", "i8",
                                                      "u8",  "i32",  "i64", "bool"};
  return dtype >= 0 && dtype < TFL_DTYPE_COUNT ? kNames[dtype] : "an unknown dtype";
}

const char* reduce_op_name(int op) noexcept {
  static const char* const kNames[TFL_REDUCE_OP_COUNT] = {"sum", "prod", "min", "max", "avg"};
  return op >= 0 && op < TFL_REDUCE_OP_COUNT ? kNames[op] : "an unknown reduction";
}

bool reduction_supported(int dtype, int op) noexcept {
  if (dtype_size(dtype) == 0 || op < 0 || op >= TFL_REDUCE_OP_COUNT) return false;
  if (op != TFL_REDUCE_AVG) return true;
  return dtype == TFL_DTYPE_F16 || dtype == TFL_DTYPE_BF16 || dtype == TFL_DTYPE_F32 ||
         dtype == TFL_DTYPE_F64;
}

void reduce_buffers(void* dst, const void* const* srcs, int nsrc, size_t count, int dtype, int op) {
  switch (dtype) {
    case TFL_DTYPE_F16:
      return reduce_16bit<half_to_float, float_to_half>(static_cast<uint16_t*>(dst), srcs, nsrc,
                                                        count, op);
    case TFL_DTYPE_BF16:
      return reduce_16bit<bf16_to_float, float_to_bf16>(static_cast<uint16_t*>(dst), srcs, nsrc,
                                                        count, op);
    case TFL_DTYPE_F32:
      return reduce_native(static_cast<float*>(dst), srcs, nsrc, count, op);
    case TFL_DTYPE_F64:
      return reduce_native(static_cast<double*>(dst), srcs, nsrc, count, op);
    case TFL_DTYPE_I8:
      return reduce_native(static_cast<int8_t*>(dst), srcs, nsrc, count, op);
    case TFL_DTYPE_U8:
      return reduce_native(static_cast<uint8_t*>(dst), srcs, nsrc, count, op);
    case TFL_DTYPE_I32:
      return reduce_native(static_cast<int32_t*>(dst), srcs, nsrc, count, op);
    case TFL_DTYPE_I64:
      return reduce_native(static_cast<int64_t*>(dst), srcs, nsrc, count, op);
    case TFL_DTYPE_BOOL:
      return reduce_bool(static_cast<uint8_t*>(dst), srcs, nsrc, count, op);
    default:
      return;
  }
}

}  // namespace emu_kit
