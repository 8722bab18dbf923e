// topsaten: the TopsRider ATen-style operator library (libtopsaten.so), the
// subset torch-fl's generator knows, with the SDK's naming and calling
// convention (docs/gcu.md, "Kernels"): functions in
// namespace topsaten named topsaten<PascalName>, one call per op (no
// workspace phase), outputs first, then inputs, then attributes, the stream
// last; a topsatenStatus_t result.
//
// Part of the torch-fl TopsRider EMULATOR (never shipped in a wheel). Which
// ops exist is whatever `nm -DC libtopsaten.so` shows; the emulator can be
// built without some (-DTOPS_EMU_OMIT=...) to prove the generator skips them.
#ifndef TOPSATEN_TOPSATEN_H_
#define TOPSATEN_TOPSATEN_H_

#include <cstdint>
#include <vector>

#include "tops_runtime_api.h"

namespace topsaten {

typedef enum {
  TOPSATEN_STATUS_SUCCESS = 0,
  TOPSATEN_STATUS_ALLOC_FAILED = 1,
  TOPSATEN_STATUS_BAD_PARAM = 2,
  TOPSATEN_STATUS_NOT_SUPPORT = 3,
  TOPSATEN_STATUS_INTERNAL_ERROR = 4,
  TOPSATEN_STATUS_RUNTIME_ERROR = 5,
  TOPSATEN_STATUS_EXECUTE_ERROR = 6,
} topsatenStatus_t;

typedef enum {
  TOPSATEN_DATA_NONE = -1,  // an absent (optional) tensor
  TOPSATEN_DATA_FP32 = 0,
  TOPSATEN_DATA_F64 = 1,
  TOPSATEN_DATA_FP16 = 2,
  TOPSATEN_DATA_BF16 = 3,
  TOPSATEN_DATA_I64 = 4,
  TOPSATEN_DATA_I32 = 5,
  TOPSATEN_DATA_I16 = 6,
  TOPSATEN_DATA_I8 = 7,
  TOPSATEN_DATA_U8 = 8,
  TOPSATEN_DATA_PRED = 9,
} topsatenDataType_t;

// Non-owning view of an int64 array (dims, strides, reduction dims).
struct topsatenSize_t {
  const int64_t* data = nullptr;
  int64_t len = 0;
  topsatenSize_t() = default;
  topsatenSize_t(const int64_t* d, int64_t n) : data(d), len(n) {}
};

struct topsatenScalar_t {
  topsatenDataType_t dtype;
  union {
    double fval;
    int64_t ival;
  };
};

class topsatenTensor {
 public:
  topsatenTensor();  // absent tensor (TOPSATEN_DATA_NONE)
  topsatenTensor(topsatenSize_t dims, topsatenSize_t strides, topsatenDataType_t dtype, void* data);
  const std::vector<int64_t>& dims() const { return dims_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  topsatenDataType_t dtype() const { return dtype_; }
  void* data() const { return data_; }
  bool defined() const { return dtype_ != TOPSATEN_DATA_NONE; }

 private:
  std::vector<int64_t> dims_;
  std::vector<int64_t> strides_;
  topsatenDataType_t dtype_;
  void* data_;
};

// ---- allocator callbacks and init (register before topsatenInit) ----
typedef void* (*topsatenMallocFunc_t)(size_t bytes);
typedef void (*topsatenFreeFunc_t)(void* ptr);
typedef void* (*topsatenMallocAsyncFunc_t)(size_t bytes, topsStream_t stream);
typedef void (*topsatenFreeAsyncFunc_t)(void* ptr, topsStream_t stream);
topsatenStatus_t topsatenMallocFuncRegister(topsatenMallocFunc_t fn);
topsatenStatus_t topsatenFreeFuncRegister(topsatenFreeFunc_t fn);
topsatenStatus_t topsatenMallocAsyncFuncRegister(topsatenMallocAsyncFunc_t fn);
topsatenStatus_t topsatenFreeAsyncFuncRegister(topsatenFreeAsyncFunc_t fn);
topsatenStatus_t topsatenInit();
topsatenStatus_t topsatenFinalize();

using T = topsatenTensor;
using S = topsatenScalar_t;
using Z = topsatenSize_t;
using St = topsStream_t;

// ---- unary: (out, self) ----
topsatenStatus_t topsatenAbs(T& out, const T& self, St stream);
topsatenStatus_t topsatenNeg(T& out, const T& self, St stream);
topsatenStatus_t topsatenSqrt(T& out, const T& self, St stream);
topsatenStatus_t topsatenRsqrt(T& out, const T& self, St stream);
topsatenStatus_t topsatenExp(T& out, const T& self, St stream);
topsatenStatus_t topsatenLog(T& out, const T& self, St stream);
topsatenStatus_t topsatenSin(T& out, const T& self, St stream);
topsatenStatus_t topsatenCos(T& out, const T& self, St stream);
topsatenStatus_t topsatenTanh(T& out, const T& self, St stream);
topsatenStatus_t topsatenSigmoid(T& out, const T& self, St stream);
topsatenStatus_t topsatenRelu(T& out, const T& self, St stream);
topsatenStatus_t topsatenReciprocal(T& out, const T& self, St stream);
topsatenStatus_t topsatenErf(T& out, const T& self, St stream);
topsatenStatus_t topsatenFloor(T& out, const T& self, St stream);
topsatenStatus_t topsatenCeil(T& out, const T& self, St stream);
topsatenStatus_t topsatenSilu(T& out, const T& self, St stream);
topsatenStatus_t topsatenLogicalNot(T& out, const T& self, St stream);
// ---- binary: (out, self, other) -- same shapes, no broadcasting ----
topsatenStatus_t topsatenMul(T& out, const T& self, const T& other, St stream);
topsatenStatus_t topsatenDiv(T& out, const T& self, const T& other, St stream);
topsatenStatus_t topsatenMaximum(T& out, const T& self, const T& other, St stream);
topsatenStatus_t topsatenMinimum(T& out, const T& self, const T& other, St stream);
topsatenStatus_t topsatenPow(T& out, const T& self, const T& other, St stream);
// ---- activation backward: grad_input from grad_output and the forward output / input ----
topsatenStatus_t topsatenTanhBackward(T& grad_input, const T& grad_output, const T& output,
                                      St stream);
topsatenStatus_t topsatenSigmoidBackward(T& grad_input, const T& grad_output, const T& output,
                                         St stream);
topsatenStatus_t topsatenThresholdBackward(T& grad_input, const T& grad_output, const T& self,
                                           const S& threshold, St stream);
// ---- binary with alpha: out = self + alpha * other ----
topsatenStatus_t topsatenAdd(T& out, const T& self, const T& other, const S& alpha, St stream);
topsatenStatus_t topsatenSub(T& out, const T& self, const T& other, const S& alpha, St stream);
// ---- compare: PRED out ----
topsatenStatus_t topsatenEq(T& out, const T& self, const T& other, St stream);
topsatenStatus_t topsatenNe(T& out, const T& self, const T& other, St stream);
topsatenStatus_t topsatenLt(T& out, const T& self, const T& other, St stream);
topsatenStatus_t topsatenLe(T& out, const T& self, const T& other, St stream);
topsatenStatus_t topsatenGt(T& out, const T& self, const T& other, St stream);
topsatenStatus_t topsatenGe(T& out, const T& self, const T& other, St stream);
// ---- pointwise with three operands: out = self + value * t1 {*,/} t2; out = self + w * (end -
// self) ----
topsatenStatus_t topsatenAddcmul(T& out, const T& self, const T& tensor1, const T& tensor2,
                                 const S& value, St stream);
topsatenStatus_t topsatenAddcdiv(T& out, const T& self, const T& tensor1, const T& tensor2,
                                 const S& value, St stream);
topsatenStatus_t topsatenLerp(T& out, const T& self, const T& end, const S& weight, St stream);
// ---- reductions ----
topsatenStatus_t topsatenSum(T& out, const T& self, Z dims, bool keepdim, topsatenDataType_t dtype,
                             St stream);
topsatenStatus_t topsatenMean(T& out, const T& self, Z dims, bool keepdim, topsatenDataType_t dtype,
                              St stream);
topsatenStatus_t topsatenAmax(T& out, const T& self, Z dims, bool keepdim, St stream);
topsatenStatus_t topsatenAmin(T& out, const T& self, Z dims, bool keepdim, St stream);
topsatenStatus_t topsatenAll(T& out, const T& self, St stream);
topsatenStatus_t topsatenLinalgVectorNorm(T& out, const T& self, const S& ord, Z dims, bool keepdim,
                                          topsatenDataType_t dtype, St stream);
// ---- matmul family ----
topsatenStatus_t topsatenMm(T& out, const T& self, const T& mat2, St stream);
topsatenStatus_t topsatenBmm(T& out, const T& self, const T& mat2, St stream);
topsatenStatus_t topsatenAddmm(T& out, const T& self, const T& mat1, const T& mat2, const S& beta,
                               const S& alpha, St stream);
// ---- softmax ----
topsatenStatus_t topsatenSoftmaxForward(T& out, const T& self, int64_t dim, bool half_to_float,
                                        St stream);
topsatenStatus_t topsatenSoftmaxBackward(T& grad_input, const T& grad_output, const T& output,
                                         int64_t dim, St stream);
topsatenStatus_t topsatenLogSoftmaxForward(T& out, const T& self, int64_t dim, bool half_to_float,
                                           St stream);
topsatenStatus_t topsatenLogSoftmaxBackward(T& grad_input, const T& grad_output, const T& output,
                                            int64_t dim, St stream);
// ---- norms: normalized over the trailing dims; weight/bias may be absent ----
// Measured on the S60: returns SUCCESS and writes nothing (the emulator reproduces it).
topsatenStatus_t topsatenNativeLayerNormBackward(T& grad_input, T& grad_weight, T& grad_bias,
                                                 const T& grad_out, const T& input,
                                                 Z normalized_shape, const T& mean, const T& rstd,
                                                 const T& weight, const T& bias, St stream);
topsatenStatus_t topsatenNativeLayerNorm(T& out, T& mean, T& rstd, const T& input,
                                         Z normalized_shape, const T& weight, const T& bias,
                                         double eps, St stream);
// ---- factories and in-place ----
topsatenStatus_t topsatenArange(T& out, const S& start, const S& end, const S& step,
                                topsatenDataType_t dtype, int64_t layout, bool pin_memory,
                                St stream);
topsatenStatus_t topsatenFill_(T& self, const S& value, St stream);
topsatenStatus_t topsatenZero(T& self, St stream);
// Honours both tensors' strides and converts to self's dtype (no broadcasting, no non_blocking).
topsatenStatus_t topsatenCopy(T& self, const T& src, bool non_blocking, St stream);
topsatenStatus_t topsatenMasked_fill(T& out, const T& self, const T& mask, const S& value,
                                     St stream);
topsatenStatus_t topsatenWhere(T& out, const T& condition, const T& self, const T& other,
                               St stream);
// ---- indexing: index tensors are I32 ----
topsatenStatus_t topsatenIndexSelect(T& out, const T& self, int64_t dim, const T& index, St stream);
topsatenStatus_t topsatenIndexFill(T& out, const T& self, int64_t dim, const T& index,
                                   const S& value, St stream);
topsatenStatus_t topsatenEmbeddingDenseBackward(T& out, const T& grad, const T& indices,
                                                int64_t num_weights, int64_t padding_idx,
                                                bool scale_grad_by_freq, St stream);
// Coordinates of the non-zero elements of self, row-major: out is I32 [numel, rank]
// (allocated by the caller for the worst case); *num_nonzero receives the row count.
topsatenStatus_t topsatenNonzero(T& out, int64_t* num_nonzero, const T& self, St stream);
// Advanced indexing by leading index tensors (I32, all of one shape, negative wraps):
// out = self[i0, i1, ..., :] with shape index_shape + self.shape[len(indices):].
topsatenStatus_t topsatenIndex(T& out, const T& self, const std::vector<T>& indices, St stream);
topsatenStatus_t topsatenCat(T& out, const std::vector<T>& tensors, int64_t dim, St stream);
topsatenStatus_t topsatenUpsampleNearestExact2d(T& out, const T& self, Z output_size,
                                                double scales_h, double scales_w, St stream);

}  // namespace topsaten

#endif  // TOPSATEN_TOPSATEN_H_
