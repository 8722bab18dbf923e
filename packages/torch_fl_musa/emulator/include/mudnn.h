/*
 * muDNN -- the subset torch-fl uses of Moore Threads' operator library, with
 * the object API of the SDK's mudnn.h: a Handle bound to a device and a
 * stream, Tensor descriptors (type, address, dims AND strides: muDNN honours
 * strides, so views are passed as they are), and one class per operator
 * family configured by setters (SetMode, SetDim, SetAlpha, ...) and run with
 * Run(handle, outputs..., inputs...). Every call returns a Status.
 *
 * This header belongs to the torch-fl MUSA EMULATOR: never shipped in a
 * wheel; code built against it must build unchanged against a real SDK.
 *
 * The contract the emulator enforces (docs/musa.md, "The SDK facts"):
 *  - every tensor's address range (its dims and strides from its address)
 *    must lie inside one live allocation of the handle's device, which must
 *    be the device current when Run is called; else INVALID_PARAMETER;
 *  - an output must not overlap itself (a zero or interleaved stride);
 *  - a dtype outside the operator mode's list is NOT_SUPPORTED (no 64-bit
 *    floating point anywhere; see each class);
 *  - work is queued on the handle's stream and runs later: memory freed
 *    before it ran fails the stream (musaErrorIllegalAddress).
 */
#ifndef MUDNN_H_
#define MUDNN_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "musa_runtime_api.h"

#define MUDNN_EXPORT __attribute__((visibility("default")))

namespace musa {
namespace dnn {

enum class Status : int {
  SUCCESS = 0,
  INVALID_PARAMETER = 1,
  NOT_INITIALIZED = 2,
  ALLOC_FAILED = 3,
  NOT_SUPPORTED = 4,
  INTERNAL_ERROR = 5,
  ARCH_MISMATCH = 6,
  EXECUTION_FAILED = 7,
};

// Scratch memory an operator asks its caller for (device memory on the handle's device).
using MemoryHandler = std::unique_ptr<void, std::function<void(void*)>>;
using MemoryMaintainer = std::function<MemoryHandler(size_t)>;

class MUDNN_EXPORT Handle {
 public:
  // Binds the handle to `device` (the device current when it is created, by default).
  explicit Handle(int device = -1);
  ~Handle();
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Status SetStream(musaStream_t stream);
  musaStream_t GetStream() const;
  int GetDeviceId() const;

 private:
  int device_;
  musaStream_t stream_ = nullptr;
};

class MUDNN_EXPORT Tensor {
 public:
  enum class Type : int {
    FLOAT = 0,
    HALF = 1,
    BFLOAT16 = 2,
    DOUBLE = 3,
    INT8 = 4,
    INT16 = 5,
    INT32 = 6,
    INT64 = 7,
    UINT8 = 8,
    BOOL = 9,
  };
  enum class Format : int { UNKNOWN = 0, NCHW = 1, NHWC = 2, NCW = 3, NDHWC = 4 };
  static constexpr int kMaxDims = 8;

  Tensor();
  Status SetType(Type type);
  Status SetFormat(Format format);
  Status SetAddr(const void* addr);
  // Contiguous strides.
  Status SetNdInfo(int ndims, const int64_t* dims);
  // Strides in elements; 0 is allowed for inputs (a broadcast dimension).
  Status SetNdInfo(int ndims, const int64_t* dims, const int64_t* strides);
  Type GetType() const { return type_; }
  void* GetAddr() const { return addr_; }
  int GetNdims() const { return ndims_; }
  const int64_t* GetDims() const { return dims_; }
  const int64_t* GetStrides() const { return strides_; }
  int64_t GetElementCount() const;

 private:
  Type type_ = Type::FLOAT;
  Format format_ = Format::UNKNOWN;
  void* addr_ = nullptr;
  int ndims_ = 0;
  int64_t dims_[kMaxDims] = {};
  int64_t strides_[kMaxDims] = {};
};

// out = f(in) elementwise; out and in have the same dims. Types: the floating ones (FLOAT, HALF,
// BFLOAT16) for every mode; INT32/INT64 also for ABS, NEG, RELU, ADD, MUL; BOOL in and out for
// LOGICAL_NOT (any type in). ADD: in + alpha, MUL: in * alpha, POW: in ^ alpha.
class MUDNN_EXPORT Unary {
 public:
  enum class Mode : int {
    ABS,
    NEG,
    SQRT,
    RSQRT,
    EXP,
    LOG,
    SIN,
    COS,
    TANH,
    SIGMOID,
    RELU,
    RECIPROCAL,
    ERF,
    FLOOR,
    CEIL,
    SILU,
    GELU,
    LOGICAL_NOT,
    ADD,
    MUL,
    POW,
  };
  Status SetMode(Mode mode);
  Status SetAlpha(double alpha);
  Status Run(Handle& h, Tensor& out, const Tensor& in) const;

 private:
  Mode mode_ = Mode::ABS;
  double alpha_ = 0.0;
};

// out = a OP b elementwise; all three have the same dims (broadcast with zero strides). Types:
// a and b of one type; FLOAT, HALF, BFLOAT16, INT32, INT64 (TRUEDIV and POW: floating only); the
// comparisons write BOOL. ADD and SUB compute a + alpha * b and a - alpha * b (alpha 1 by default).
class MUDNN_EXPORT Binary {
 public:
  enum class Mode : int {
    ADD,
    SUB,
    MUL,
    TRUEDIV,
    MAXIMUM,
    MINIMUM,
    POW,
    EQ,
    NE,
    LT,
    LE,
    GT,
    GE,
    LOGICAL_AND,
    LOGICAL_OR,
  };
  Status SetMode(Mode mode);
  Status SetAlpha(double alpha);
  Status Run(Handle& h, Tensor& out, const Tensor& a, const Tensor& b) const;

 private:
  Mode mode_ = Mode::ADD;
  double alpha_ = 1.0;
};

// Three operands, same dims (zero strides broadcast). ADDCMUL: a + alpha * b * c, ADDCDIV:
// a + alpha * b / c, LERP: a + (b - a) * c (floating types, one type for all four tensors);
// SELECT: a ? b : c (a BOOL, b, c and out of one type: floating, INT32, INT64, BOOL).
class MUDNN_EXPORT Ternary {
 public:
  enum class Mode : int { ADDCMUL, ADDCDIV, LERP, SELECT };
  Status SetMode(Mode mode);
  Status SetAlpha(double alpha);
  Status Run(Handle& h, Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c) const;

 private:
  Mode mode_ = Mode::ADDCMUL;
  double alpha_ = 1.0;
};

// Reduces `in` over the dims set by SetDim into `out`, whose rank is in's with each reduced dim of
// size 1. ADD, MEAN: floating types in and out (the sum accumulated in float), INT32/INT64 for ADD;
// MAX, MIN: floating, INT32, INT64; AND, OR: BOOL out (any type in). An empty reduction gives
// ADD 0, MEAN NaN, AND true, OR false; MAX/MIN of nothing is INVALID_PARAMETER.
// RunWithIndices (MAX, MIN over exactly one dim): also writes, into `indices` (INT64, out's dims),
// the position along the dim of the value chosen: the first extreme, or the first NaN (which is
// the value). `out` and `indices` must not overlap each other or `in`.
class MUDNN_EXPORT Reduce {
 public:
  enum class Mode : int { ADD, MEAN, MAX, MIN, AND, OR };
  Status SetMode(Mode mode);
  Status SetDim(int ndims, const int* dims);
  Status Run(Handle& h, Tensor& out, const Tensor& in, MemoryMaintainer maintainer) const;
  Status RunWithIndices(Handle& h, Tensor& out, Tensor& indices, const Tensor& in,
                        MemoryMaintainer maintainer) const;

 private:
  Mode mode_ = Mode::ADD;
  int ndims_ = 0;
  int dims_[Tensor::kMaxDims] = {};
};

// Cumulative ADD (sum) or MUL (product) of `in` along the dim set by SetDim (negative: from the
// end) into `out`, of in's dims. One type for in and out: FLOAT, HALF, BFLOAT16 (accumulated in
// float or wider), INT32, INT64 (wrapping). `out` may be `in` itself (the same elements), else must
// not overlap it.
class MUDNN_EXPORT Cum {
 public:
  enum class Mode : int { ADD, MUL };
  Status SetMode(Mode mode);
  Status SetDim(int dim);
  Status Run(Handle& h, Tensor& out, const Tensor& in, MemoryMaintainer maintainer) const;

 private:
  Mode mode_ = Mode::ADD;
  int dim_ = 0;
};

// out[m, n] = alpha * op(a)[m, k] @ op(b)[k, n] + beta * out (Run) or + beta * bias
// (RunWithBiasAdd: bias of out's dims, zero strides broadcast). op: transposed where
// SetTranspose says. FLOAT, HALF, BFLOAT16, one type for all; accumulation in float.
class MUDNN_EXPORT MatMul {
 public:
  Status SetTranspose(bool transpose_a, bool transpose_b);
  Status SetAlpha(double alpha);
  Status SetBeta(double beta);
  Status Run(Handle& h, Tensor& out, const Tensor& a, const Tensor& b) const;
  Status RunWithBiasAdd(Handle& h, Tensor& out, const Tensor& a, const Tensor& b,
                        const Tensor& bias) const;

 private:
  bool ta_ = false, tb_ = false;
  double alpha_ = 1.0, beta_ = 0.0;
};

// MatMul over a leading batch dim: a [B, M, K], b [B, K, N], out [B, M, N].
class MUDNN_EXPORT BatchMatMul {
 public:
  Status SetTranspose(bool transpose_a, bool transpose_b);
  Status SetAlpha(double alpha);
  Status SetBeta(double beta);
  Status Run(Handle& h, Tensor& out, const Tensor& a, const Tensor& b) const;

 private:
  bool ta_ = false, tb_ = false;
  double alpha_ = 1.0, beta_ = 0.0;
};

// Softmax or log-softmax over one dim; RunBwd computes the input gradient from the forward's
// output and the output gradient. FLOAT, HALF, BFLOAT16, one type for all.
class MUDNN_EXPORT Softmax {
 public:
  enum class Mode : int { SOFTMAX, LOGSOFTMAX };
  Status SetMode(Mode mode);
  Status SetDim(int dim);
  Status Run(Handle& h, Tensor& out, const Tensor& in) const;
  Status RunBwd(Handle& h, Tensor& grad_in, const Tensor& out, const Tensor& grad_out) const;

 private:
  Mode mode_ = Mode::SOFTMAX;
  int dim_ = -1;
};

// out = the inputs one after another along `axis` (SetAxis): every input of out's type and rank,
// with out's dims except on the axis, whose sizes add up to out's. Any type but DOUBLE; an input
// must not overlap out.
class MUDNN_EXPORT Concat {
 public:
  Status SetAxis(int axis);
  Status Run(Handle& h, Tensor& out, int num_inputs, const Tensor* inputs) const;

 private:
  int axis_ = 0;
};

// out = value everywhere (every type but DOUBLE).
class MUDNN_EXPORT Fill {
 public:
  Status SetValue(double value);
  // Integer types take the exact value (a double cannot hold every int64).
  Status SetValue(int64_t value);
  Status Run(Handle& h, Tensor& out) const;

 private:
  double value_ = 0.0;
  int64_t ivalue_ = 0;
  bool integral_ = false;
};

}  // namespace dnn
}  // namespace musa

#endif /* MUDNN_H_ */
