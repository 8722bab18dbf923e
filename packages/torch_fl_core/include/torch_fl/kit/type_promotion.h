// Compute and result dtypes of elementwise kernels as PyTorch promotes them, and the operand
// rules PyTorch raises on (a kernel declines those calls so the CPU raises PyTorch's error).
#ifndef TORCH_FL_KIT_TYPE_PROMOTION_H_
#define TORCH_FL_KIT_TYPE_PROMOTION_H_

#include <ATen/ATen.h>
#include <torch_fl/kit/kernel_call.h>

namespace torch_fl::kit {

// How an elementwise op's result dtype follows its promoted input dtype. FloatOnly: the input's
// dtype, floating inputs only (activations such as silu, whose kernels refuse integers in
// PyTorch: those calls are declined for the CPU to raise).
enum class UnaryKind { KeepsDtype, ToFloat, Logical, FloatOnly };
enum class BinaryKind { Arith, TrueDiv, Pow, Compare };

struct OpDtypes {
  at::ScalarType compute;  // the dtype the kernel computes in
  at::ScalarType result;   // the dtype of the result tensor
};

inline at::ScalarType default_float() { return at::typeMetaToScalarType(at::get_default_dtype()); }

// Integers (and bool) compute in the default float dtype for ToFloat ops (sqrt, exp, ...), as on
// CPU; logical ops give bool.
inline OpDtypes unary_dtypes(at::ScalarType t, UnaryKind kind) {
  if (kind == UnaryKind::ToFloat && at::isIntegralType(t, /*includeBool=*/true))
    return {default_float(), default_float()};
  return {t, kind == UnaryKind::Logical ? at::kBool : t};
}

// `promoted`: at::result_type of the operands. True division of integers computes in the
// default float dtype; comparisons give bool.
inline OpDtypes binary_dtypes(at::ScalarType promoted, BinaryKind kind) {
  if (kind == BinaryKind::TrueDiv && at::isIntegralType(promoted, /*includeBool=*/true))
    return {default_float(), default_float()};
  return {promoted, kind == BinaryKind::Compare ? at::kBool : promoted};
}

// The call's `alpha` (1 when the overload has none); a floating alpha with integral operands is
// PyTorch's error to raise, so such a call is declined.
inline at::Scalar checked_alpha(const KernelCall& c, at::ScalarType dt) {
  const at::Scalar alpha = c.has("alpha") ? c.scalar("alpha") : at::Scalar(1);
  if (at::isIntegralType(dt, /*includeBool=*/true) && alpha.isFloatingPoint())
    c.decline("a floating alpha with integral operands is PyTorch's error to raise");
  return alpha;
}

}  // namespace torch_fl::kit

#endif  // TORCH_FL_KIT_TYPE_PROMOTION_H_
