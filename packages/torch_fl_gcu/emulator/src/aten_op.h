// libtopsaten.so internals shared by its op files (not SDK API). Every op enforces the
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
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "emu_internal.h"
#include "topsaten/topsaten.h"

#define ATEN_API __attribute__((visibility("default")))

namespace topsaten {
// Hidden: the library exports the SDK's C++ API by default visibility, and only that.
namespace emu __attribute__((visibility("hidden"))) {

  // Whether topsatenInit ran (and topsatenFinalize did not).
  bool initialized();

  int64_t numel(const std::vector<int64_t>& d);
  size_t elem_size(topsatenDataType_t t);
  bool is_float(topsatenDataType_t t);
  float half_to_float(uint16_t h);
  uint16_t float_to_half(float f);
  float bf16_to_float(uint16_t b);
  uint16_t float_to_bf16(float f);

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
      if (!initialized()) {
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

  double sval(const S& s);
  topsatenStatus_t unary(const char* name, T& out, const T& self, St stream, double (*f)(double));

  template <typename F>
  topsatenStatus_t binary(const char* name, T& out, const T& self, const T& other, St stream, F f) {
    Call c(name, stream);
    Buf o = c.take(out), a = c.take(self), b = c.take(other);
    c.require(o.dims == a.dims && a.dims == b.dims);  // no broadcasting
    if (!c.ok()) return c.status();
    for (int64_t i = 0; i < a.n; ++i) o.set(i, f(a.get(i), b.get(i)));
    return TOPSATEN_STATUS_SUCCESS;
  }

  double trunc_if_int(const Buf& o, double v);
  // Reduction geometry: for each input element, the output element it folds into.
  bool reduce_map(const std::vector<int64_t>& in, Z dims, bool keepdim,
                  const std::vector<int64_t>& out_dims, std::vector<int64_t>* map, int64_t* group);
  // Outer/dim/inner split of a shape at `dim`.
  bool split(const std::vector<int64_t>& d, int64_t dim, int64_t* outer, int64_t* len,
             int64_t* inner);

}  // namespace emu
using namespace emu;
}  // namespace topsaten
