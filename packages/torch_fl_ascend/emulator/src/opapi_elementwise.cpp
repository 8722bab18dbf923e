// Elementwise aclnn ops: unary math, casts/copies, binary arithmetic, comparisons, where/fill,
// activations and their backward ops.
#include <cstring>

#include "opapi_common.h"

#include "aclnnop/aclnn_abs.h"
#include "aclnnop/aclnn_neg.h"
#include "aclnnop/aclnn_exp.h"
#include "aclnnop/aclnn_log.h"
#include "aclnnop/aclnn_sqrt.h"
#include "aclnnop/aclnn_rsqrt.h"
#include "aclnnop/aclnn_sin.h"
#include "aclnnop/aclnn_cos.h"
#include "aclnnop/aclnn_tanh.h"
#include "aclnnop/aclnn_sigmoid.h"
#include "aclnnop/aclnn_reciprocal.h"
#include "aclnnop/aclnn_erf.h"
#include "aclnnop/aclnn_floor.h"
#include "aclnnop/aclnn_ceil.h"
#include "aclnnop/aclnn_relu.h"
#include "aclnnop/aclnn_silu.h"
#include "aclnnop/aclnn_logical_not.h"
#include "aclnnop/aclnn_cast.h"
#include "aclnnop/aclnn_copy.h"
#include "aclnnop/aclnn_add.h"
#include "aclnnop/aclnn_sub.h"
#include "aclnnop/aclnn_mul.h"
#include "aclnnop/aclnn_div.h"
#include "aclnnop/aclnn_maximum.h"
#include "aclnnop/aclnn_minimum.h"
#include "aclnnop/aclnn_pow.h"
#include "aclnnop/aclnn_pow_tensor_tensor.h"
#include "aclnnop/aclnn_eq_tensor.h"
#include "aclnnop/aclnn_eq_scalar.h"
#include "aclnnop/aclnn_ne_tensor.h"
#include "aclnnop/aclnn_ne_scalar.h"
#include "aclnnop/aclnn_lt_tensor.h"
#include "aclnnop/aclnn_lt_scalar.h"
#include "aclnnop/aclnn_le_tensor.h"
#include "aclnnop/aclnn_le_scalar.h"
#include "aclnnop/aclnn_gt_tensor.h"
#include "aclnnop/aclnn_gt_scalar.h"
#include "aclnnop/aclnn_ge_tensor.h"
#include "aclnnop/aclnn_ge_scalar.h"
#include "aclnnop/aclnn_s_where.h"
#include "aclnnop/aclnn_masked_fill_scalar.h"
#include "aclnnop/aclnn_fill_scalar.h"
#include "aclnnop/aclnn_zero.h"
#include "aclnnop/aclnn_gelu.h"
#include "aclnnop/aclnn_gelu_v2.h"
#include "aclnnop/aclnn_gelu_backward.h"
#include "aclnnop/aclnn_gelu_backward_v2.h"
#include "aclnnop/aclnn_silu_backward.h"
#include "aclnnop/aclnn_threshold_backward.h"
#include "aclnnop/aclnn_sigmoid_backward.h"
#include "aclnnop/aclnn_tanh_backward.h"

using namespace emu_op;

#define EMU_UNARY(Name, IN, OUT, EXPR)                                                      \
  OPAPI_EXPORT aclnnStatus aclnn##Name##GetWorkspaceSize(                                   \
      const aclTensor* self, aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** ex) { \
    Op op("aclnn" #Name);                                                                   \
    int s = op.in("self", self, IN);                                                        \
    int o = op.out("out", out, OUT);                                                        \
    return op.build(workspaceSize, ex, 0, [s, o](Ctx& c) {                                  \
      const at::Tensor& x = c.t[s];                                                         \
      c.set(o, EXPR);                                                                       \
    });                                                                                     \
  }                                                                                         \
  EMU_LAUNCH(Name)

EMU_UNARY(Abs, kArith, kArith, at::abs(x))
EMU_UNARY(Neg, kArith, kArith, at::neg(x))
EMU_UNARY(Exp, kFloating, kFloating, at::exp(x))
EMU_UNARY(Log, kFloating, kFloating, at::log(x))
EMU_UNARY(Sqrt, kFloating, kFloating, at::sqrt(x))
EMU_UNARY(Rsqrt, kFloating, kFloating, at::rsqrt(x))
EMU_UNARY(Sin, kFloating, kFloating, at::sin(x))
EMU_UNARY(Cos, kFloating, kFloating, at::cos(x))
EMU_UNARY(Tanh, kFloating, kFloating, at::tanh(x))
EMU_UNARY(Sigmoid, kFloating, kFloating, at::sigmoid(x))
EMU_UNARY(Reciprocal, kFloating, kFloating, at::reciprocal(x))
EMU_UNARY(Erf, kFloating, kFloating, at::erf(x))
EMU_UNARY(Floor, kFloating, kFloating, at::floor(x))
EMU_UNARY(Ceil, kFloating, kFloating, at::ceil(x))
EMU_UNARY(Relu, kArith, kArith, at::relu(x))
EMU_UNARY(Silu, kFloating, kFloating, at::silu(x))
EMU_UNARY(LogicalNot, kWithBool, kWithBool, at::logical_not(x))
// CANN's aclnnGelu is the tanh approximation.
EMU_UNARY(Gelu, kFloating, kFloating, at::gelu(x, "tanh"))

OPAPI_EXPORT aclnnStatus aclnnCastGetWorkspaceSize(const aclTensor* self, const aclDataType dtype,
                                                   aclTensor* out, uint64_t* workspaceSize,
                                                   aclOpExecutor** ex) {
  Op op("aclnnCast");
  int s = op.in("self", self, kAny);
  int o = op.out("out", out, kAny);
  if (out != nullptr)
    op.require(out->dtype == dtype, std::string("dtype ") + emu_nn::DtypeName(dtype) +
                                        " differs from out's dtype " +
                                        emu_nn::DtypeName(out->dtype));
  const at::ScalarType st = ToAten(dtype);
  return op.build(workspaceSize, ex, 0, [s, o, st](Ctx& c) { c.set(o, c.t[s].to(st)); });
}
EMU_LAUNCH(Cast)

OPAPI_EXPORT aclnnStatus aclnnInplaceCopyGetWorkspaceSize(aclTensor* selfRef, const aclTensor* src,
                                                          uint64_t* workspaceSize,
                                                          aclOpExecutor** ex) {
  Op op("aclnnInplaceCopy");
  int d = op.out("selfRef", selfRef, kAny);
  int s = op.in("src", src, kAny);
  // src broadcasts into selfRef and converts to its dtype.
  return op.build(workspaceSize, ex, 0, [d, s](Ctx& c) { c.t[d].copy_(c.t[s]); });
}
EMU_LAUNCH(InplaceCopy)

#define EMU_BINARY_ALPHA(Name, FN)                                                               \
  OPAPI_EXPORT aclnnStatus aclnn##Name##GetWorkspaceSize(                                        \
      const aclTensor* self, const aclTensor* other, const aclScalar* alpha, aclTensor* out,     \
      uint64_t* workspaceSize, aclOpExecutor** ex) {                                             \
    Op op("aclnn" #Name);                                                                        \
    int s = op.in("self", self, kArith);                                                         \
    int t = op.in("other", other, kArith);                                                       \
    at::Scalar a = op.scalar("alpha", alpha);                                                    \
    int o = op.out("out", out, kArith);                                                          \
    return op.build(workspaceSize, ex, 0,                                                        \
                    [s, t, a, o](Ctx& c) { c.set(o, FN(c.t[s], c.t[t], a)); });                  \
  }                                                                                              \
  EMU_LAUNCH(Name)                                                                               \
  OPAPI_EXPORT aclnnStatus aclnn##Name##sGetWorkspaceSize(                                       \
      const aclTensor* self, const aclScalar* other, const aclScalar* alpha, aclTensor* out,     \
      uint64_t* workspaceSize, aclOpExecutor** ex) {                                             \
    Op op("aclnn" #Name "s");                                                                    \
    int s = op.in("self", self, kArith);                                                         \
    at::Scalar b = op.scalar("other", other);                                                    \
    at::Scalar a = op.scalar("alpha", alpha);                                                    \
    int o = op.out("out", out, kArith);                                                          \
    return op.build(workspaceSize, ex, 0, [s, b, a, o](Ctx& c) { c.set(o, FN(c.t[s], b, a)); }); \
  }                                                                                              \
  EMU_LAUNCH(Name##s)

EMU_BINARY_ALPHA(Add, at::add)
EMU_BINARY_ALPHA(Sub, at::sub)

#define EMU_BINARY(Name, DT, OUTDT, EXPR)                                                     \
  OPAPI_EXPORT aclnnStatus aclnn##Name##GetWorkspaceSize(                                     \
      const aclTensor* self, const aclTensor* other, aclTensor* out, uint64_t* workspaceSize, \
      aclOpExecutor** ex) {                                                                   \
    Op op("aclnn" #Name);                                                                     \
    int s = op.in("self", self, DT);                                                          \
    int t = op.in("other", other, DT);                                                        \
    int o = op.out("out", out, OUTDT);                                                        \
    return op.build(workspaceSize, ex, 0, [s, t, o](Ctx& c) {                                 \
      const at::Tensor& x = c.t[s];                                                           \
      const at::Tensor& y = c.t[t];                                                           \
      c.set(o, EXPR);                                                                         \
    });                                                                                       \
  }                                                                                           \
  EMU_LAUNCH(Name)

#define EMU_BINARY_SCALAR(Name, ARG, DT, OUTDT, EXPR)                                       \
  OPAPI_EXPORT aclnnStatus aclnn##Name##GetWorkspaceSize(                                   \
      const aclTensor* self, const aclScalar* ARG, aclTensor* out, uint64_t* workspaceSize, \
      aclOpExecutor** ex) {                                                                 \
    Op op("aclnn" #Name);                                                                   \
    int s = op.in("self", self, DT);                                                        \
    at::Scalar y = op.scalar(#ARG, ARG);                                                    \
    int o = op.out("out", out, OUTDT);                                                      \
    return op.build(workspaceSize, ex, 0, [s, y, o](Ctx& c) {                               \
      const at::Tensor& x = c.t[s];                                                         \
      c.set(o, EXPR);                                                                       \
    });                                                                                     \
  }                                                                                         \
  EMU_LAUNCH(Name)

EMU_BINARY(Mul, kArith, kArith, at::mul(x, y))
EMU_BINARY_SCALAR(Muls, other, kArith, kArith, at::mul(x, y))
EMU_BINARY(Div, kArith, kArith, at::div(x, y))
EMU_BINARY_SCALAR(Divs, other, kArith, kArith, at::div(x, y))
EMU_BINARY(Maximum, kArith, kArith, at::maximum(x, y))
EMU_BINARY(Minimum, kArith, kArith, at::minimum(x, y))
EMU_BINARY(PowTensorTensor, kArith, kArith, at::pow(x, y))
EMU_BINARY_SCALAR(PowTensorScalar, exponent, kArith, kArith, at::pow(x, y))

#define EMU_COMPARE(C, FN)                              \
  EMU_BINARY(C##Tensor, kWithBool, kWithBool, FN(x, y)) \
  EMU_BINARY_SCALAR(C##Scalar, other, kWithBool, kWithBool, FN(x, y))

EMU_COMPARE(Eq, at::eq)
EMU_COMPARE(Ne, at::ne)
EMU_COMPARE(Lt, at::lt)
EMU_COMPARE(Le, at::le)
EMU_COMPARE(Gt, at::gt)
EMU_COMPARE(Ge, at::ge)

OPAPI_EXPORT aclnnStatus aclnnSWhereGetWorkspaceSize(const aclTensor* condition,
                                                     const aclTensor* self, const aclTensor* other,
                                                     aclTensor* out, uint64_t* workspaceSize,
                                                     aclOpExecutor** ex) {
  Op op("aclnnSWhere");
  int k = op.in("condition", condition, Bit(ACL_BOOL) | Bit(ACL_UINT8));
  int s = op.in("self", self, kWithBool);
  int t = op.in("other", other, kWithBool);
  int o = op.out("out", out, kWithBool);
  return op.build(workspaceSize, ex, 0, [k, s, t, o](Ctx& c) {
    c.set(o, at::where(c.t[k].to(at::kBool), c.t[s], c.t[t]));
  });
}
EMU_LAUNCH(SWhere)

OPAPI_EXPORT aclnnStatus aclnnInplaceMaskedFillScalarGetWorkspaceSize(aclTensor* selfRef,
                                                                      const aclTensor* mask,
                                                                      const aclScalar* value,
                                                                      uint64_t* workspaceSize,
                                                                      aclOpExecutor** ex) {
  Op op("aclnnInplaceMaskedFillScalar");
  int s = op.out("selfRef", selfRef, kWithBool);
  int m = op.in("mask", mask, Bit(ACL_BOOL));
  at::Scalar v = op.scalar("value", value);
  return op.build(workspaceSize, ex, 0, [s, m, v](Ctx& c) { c.t[s].masked_fill_(c.t[m], v); });
}
EMU_LAUNCH(InplaceMaskedFillScalar)

OPAPI_EXPORT aclnnStatus aclnnInplaceFillScalarGetWorkspaceSize(aclTensor* selfRef,
                                                                const aclScalar* value,
                                                                uint64_t* workspaceSize,
                                                                aclOpExecutor** ex) {
  Op op("aclnnInplaceFillScalar");
  int s = op.out("selfRef", selfRef, kAny);
  at::Scalar v = op.scalar("value", value);
  return op.build(workspaceSize, ex, 0, [s, v](Ctx& c) { c.t[s].fill_(v); });
}
EMU_LAUNCH(InplaceFillScalar)

OPAPI_EXPORT aclnnStatus aclnnInplaceZeroGetWorkspaceSize(aclTensor* selfRef,
                                                          uint64_t* workspaceSize,
                                                          aclOpExecutor** ex) {
  Op op("aclnnInplaceZero");
  int s = op.out("selfRef", selfRef, kAny);
  return op.build(workspaceSize, ex, 0, [s](Ctx& c) { c.t[s].zero_(); });
}
EMU_LAUNCH(InplaceZero)

OPAPI_EXPORT aclnnStatus aclnnGeluV2GetWorkspaceSize(const aclTensor* self, int64_t approximate,
                                                     aclTensor* out, uint64_t* workspaceSize,
                                                     aclOpExecutor** ex) {
  Op op("aclnnGeluV2");
  int s = op.in("self", self, kFloating);
  int o = op.out("out", out, kFloating);
  op.require(approximate == 0 || approximate == 1,
             "approximate must be 0 (none) or 1 (tanh), got " + std::to_string(approximate));
  const char* mode = approximate == 1 ? "tanh" : "none";
  return op.build(workspaceSize, ex, 0, [s, o, mode](Ctx& c) { c.set(o, at::gelu(c.t[s], mode)); });
}
EMU_LAUNCH(GeluV2)

#define EMU_GRAD(Name, A, B, EXPR)                                                              \
  OPAPI_EXPORT aclnnStatus aclnn##Name##GetWorkspaceSize(                                       \
      const aclTensor* gradOutput, const aclTensor* B, aclTensor* out, uint64_t* workspaceSize, \
      aclOpExecutor** ex) {                                                                     \
    Op op("aclnn" #Name);                                                                       \
    int g = op.in("gradOutput", gradOutput, kFloating);                                         \
    int v = op.in(#B, B, kFloating);                                                            \
    int o = op.out("gradInput", out, kFloating);                                                \
    return op.build(workspaceSize, ex, 0, [g, v, o](Ctx& c) {                                   \
      const at::Tensor& grad = c.t[g];                                                          \
      const at::Tensor& A = c.t[v];                                                             \
      c.set(o, EXPR);                                                                           \
    });                                                                                         \
  }                                                                                             \
  EMU_LAUNCH(Name)

EMU_GRAD(GeluBackward, x, self, at::gelu_backward(grad, x, "tanh"))
EMU_GRAD(SiluBackward, x, self, at::silu_backward(grad, x))
EMU_GRAD(SigmoidBackward, y, output, at::sigmoid_backward(grad, y))
EMU_GRAD(TanhBackward, y, output, at::tanh_backward(grad, y))

OPAPI_EXPORT aclnnStatus aclnnGeluBackwardV2GetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* self, char* approximate, aclTensor* gradInput,
    uint64_t* workspaceSize, aclOpExecutor** ex) {
  Op op("aclnnGeluBackwardV2");
  int g = op.in("gradOutput", gradOutput, kFloating);
  int s = op.in("self", self, kFloating);
  int o = op.out("gradInput", gradInput, kFloating);
  std::string mode = approximate ? approximate : "";
  op.require(approximate != nullptr, "approximate is NULL");
  op.require(approximate == nullptr || mode == "none" || mode == "tanh",
             "approximate must be \"none\" or \"tanh\", got \"" + mode + "\"");
  return op.build(workspaceSize, ex, 0,
                  [g, s, o, mode](Ctx& c) { c.set(o, at::gelu_backward(c.t[g], c.t[s], mode)); });
}
EMU_LAUNCH(GeluBackwardV2)

OPAPI_EXPORT aclnnStatus aclnnThresholdBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* self, const aclScalar* threshold,
    aclTensor* gradInput, uint64_t* workspaceSize, aclOpExecutor** ex) {
  Op op("aclnnThresholdBackward");
  int g = op.in("gradOutput", gradOutput, kArith);
  int s = op.in("self", self, kArith);
  at::Scalar th = op.scalar("threshold", threshold);
  int o = op.out("gradInput", gradInput, kArith);
  return op.build(workspaceSize, ex, 0,
                  [g, s, th, o](Ctx& c) { c.set(o, at::threshold_backward(c.t[g], c.t[s], th)); });
}
EMU_LAUNCH(ThresholdBackward)
