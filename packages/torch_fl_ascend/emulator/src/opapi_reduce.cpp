// Reductions, scans, matrix products and softmax.
#include <algorithm>

#include "opapi_common.h"

#include "aclnnop/aclnn_reduce_sum.h"
#include "aclnnop/aclnn_mean.h"
#include "aclnnop/aclnn_amax.h"
#include "aclnnop/aclnn_amin.h"
#include "aclnnop/aclnn_max_dim.h"
#include "aclnnop/aclnn_min_dim.h"
#include "aclnnop/aclnn_argmax.h"
#include "aclnnop/aclnn_argmin.h"
#include "aclnnop/aclnn_all.h"
#include "aclnnop/aclnn_any.h"
#include "aclnnop/aclnn_cumsum.h"
#include "aclnnop/aclnn_mm.h"
#include "aclnnop/aclnn_batch_matmul.h"
#include "aclnnop/aclnn_addmm.h"
#include "aclnnop/aclnn_matmul.h"
#include "aclnnop/aclnn_softmax.h"
#include "aclnnop/aclnn_log_softmax.h"
#include "aclnnop/aclnn_softmax_backward.h"
#include "aclnnop/aclnn_log_softmax_backward.h"

using namespace emu_op;

namespace {

int64_t Numel(const aclTensor* t) {
  if (t == nullptr) return 0;
  int64_t n = 1;
  for (int64_t d : t->viewDims) n *= d;
  return n;
}

// An empty dim list reduces over every dimension (CANN and ATen agree).
at::Tensor ReduceAll(const at::Tensor& r, const at::Tensor& x, bool keep) {
  if (!keep) return r;
  return r.reshape(std::vector<int64_t>(x.dim(), 1));
}

}  // namespace

OPAPI_EXPORT aclnnStatus aclnnReduceSumGetWorkspaceSize(const aclTensor* self,
                                                        const aclIntArray* dim, bool keepDim,
                                                        aclDataType dtype, aclTensor* out,
                                                        uint64_t* workspaceSize,
                                                        aclOpExecutor** ex) {
  Op op("aclnnReduceSum");
  int s = op.in("self", self, kWithBool);
  auto dims = op.ints("dim", dim);
  int o = op.out("out", out, kArith);
  const at::ScalarType st = ToAten(dtype);
  op.require(emu_nn::DtypeSize(dtype) != 0 && dtype != ACL_DOUBLE,
             std::string("dtype ") + emu_nn::DtypeName(dtype) + " is not supported");
  return op.build(workspaceSize, ex, ScratchBytes(Numel(self)),
                  [=](Ctx& c) { c.set(o, at::sum(c.t[s], dims, keepDim, st)); });
}
EMU_LAUNCH(ReduceSum)

OPAPI_EXPORT aclnnStatus aclnnCumsumGetWorkspaceSize(const aclTensor* self, int64_t dim,
                                                     aclDataType dtype, aclTensor* out,
                                                     uint64_t* workspaceSize, aclOpExecutor** ex) {
  Op op("aclnnCumsum");
  int s = op.in("self", self, kArith);
  int o = op.out("out", out, kArith);
  op.require(emu_nn::DtypeSize(dtype) != 0 && dtype != ACL_DOUBLE,
             std::string("dtype ") + emu_nn::DtypeName(dtype) + " is not supported");
  const at::ScalarType st = ToAten(dtype);
  return op.build(workspaceSize, ex, ScratchBytes(Numel(self)),
                  [=](Ctx& c) { c.set(o, at::cumsum(c.t[s], dim, st)); });
}
EMU_LAUNCH(Cumsum)

OPAPI_EXPORT aclnnStatus aclnnMeanGetWorkspaceSize(const aclTensor* self, const aclIntArray* dim,
                                                   bool keepDim, aclDataType dtype, aclTensor* out,
                                                   uint64_t* workspaceSize, aclOpExecutor** ex) {
  Op op("aclnnMean");
  int s = op.in("self", self, kFloating);
  auto dims = op.ints("dim", dim);
  int o = op.out("out", out, kFloating);
  op.require((Bit(dtype) & kFloating) != 0,
             std::string("dtype ") + emu_nn::DtypeName(dtype) + " is not supported");
  const at::ScalarType st = ToAten(dtype);
  return op.build(workspaceSize, ex, ScratchBytes(Numel(self)),
                  [=](Ctx& c) { c.set(o, at::mean(c.t[s], dims, keepDim, st)); });
}
EMU_LAUNCH(Mean)

#define EMU_AMAX(Name, FN)                                                         \
  OPAPI_EXPORT aclnnStatus aclnn##Name##GetWorkspaceSize(                          \
      const aclTensor* self, const aclIntArray* dim, bool keepDim, aclTensor* out, \
      uint64_t* workspaceSize, aclOpExecutor** ex) {                               \
    Op op("aclnn" #Name);                                                          \
    int s = op.in("self", self, kArith);                                           \
    auto dims = op.ints("dim", dim);                                               \
    int o = op.out("out", out, kArith);                                            \
    return op.build(workspaceSize, ex, ScratchBytes(Numel(self)),                  \
                    [=](Ctx& c) { c.set(o, FN(c.t[s], dims, keepDim)); });         \
  }                                                                                \
  EMU_LAUNCH(Name)

EMU_AMAX(Amax, at::amax)
EMU_AMAX(Amin, at::amin)

#define EMU_MAXDIM(Name, FN)                                                                \
  OPAPI_EXPORT aclnnStatus aclnn##Name##GetWorkspaceSize(                                   \
      const aclTensor* self, int64_t dim, bool keepdim, aclTensor* out, aclTensor* indices, \
      uint64_t* workspaceSize, aclOpExecutor** ex) {                                        \
    Op op("aclnn" #Name);                                                                   \
    int s = op.in("self", self, kArith);                                                    \
    int o = op.out("out", out, kArith);                                                     \
    int i = op.out("indices", indices, kIndex);                                             \
    return op.build(workspaceSize, ex, ScratchBytes(Numel(self)), [=](Ctx& c) {             \
      auto r = FN(c.t[s], dim, keepdim);                                                    \
      c.set(o, std::get<0>(r));                                                             \
      c.set(i, std::get<1>(r));                                                             \
    });                                                                                     \
  }                                                                                         \
  EMU_LAUNCH(Name)

EMU_MAXDIM(MaxDim, at::max)
EMU_MAXDIM(MinDim, at::min)

#define EMU_ARGMAX(Name, FN)                                                                     \
  OPAPI_EXPORT aclnnStatus aclnn##Name##GetWorkspaceSize(                                        \
      const aclTensor* self, int64_t dim, bool keepdim, aclTensor* out, uint64_t* workspaceSize, \
      aclOpExecutor** ex) {                                                                      \
    Op op("aclnn" #Name);                                                                        \
    int s = op.in("self", self, kArith);                                                         \
    int o = op.out("out", out, kIndex);                                                          \
    return op.build(workspaceSize, ex, ScratchBytes(Numel(self)),                                \
                    [=](Ctx& c) { c.set(o, FN(c.t[s], dim, keepdim)); });                        \
  }                                                                                              \
  EMU_LAUNCH(Name)

EMU_ARGMAX(ArgMax, at::argmax)
EMU_ARGMAX(ArgMin, at::argmin)

#define EMU_ALL(Name, FN)                                                          \
  OPAPI_EXPORT aclnnStatus aclnn##Name##GetWorkspaceSize(                          \
      const aclTensor* self, const aclIntArray* dim, bool keepdim, aclTensor* out, \
      uint64_t* workspaceSize, aclOpExecutor** ex) {                               \
    Op op("aclnn" #Name);                                                          \
    int s = op.in("self", self, kWithBool);                                        \
    auto dims = op.ints("dim", dim);                                               \
    int o = op.out("out", out, kWithBool);                                         \
    return op.build(workspaceSize, ex, ScratchBytes(Numel(self)), [=](Ctx& c) {    \
      const at::Tensor& x = c.t[s];                                                \
      if (dims.empty()) {                                                          \
        c.set(o, ReduceAll(FN(x), x, keepdim));                                    \
      } else {                                                                     \
        at::Tensor r = x;                                                          \
        std::vector<int64_t> sorted = dims;                                        \
        for (auto& d : sorted) d = d < 0 ? d + x.dim() : d;                        \
        std::sort(sorted.rbegin(), sorted.rend());                                 \
        for (int64_t d : sorted) r = FN(r, d, keepdim);                            \
        c.set(o, r);                                                               \
      }                                                                            \
    });                                                                            \
  }                                                                                \
  EMU_LAUNCH(Name)

EMU_ALL(All, at::all)
EMU_ALL(Any, at::any)

namespace {
void CheckCube(Op& op, int8_t cubeMathType) {
  op.require(cubeMathType >= 0 && cubeMathType <= 3,
             "cubeMathType must be 0..3 (KEEP_DTYPE, ALLOW_FP32_DOWN_PRECISION, USE_FP16, "
             "USE_HF32), got " +
                 std::to_string(cubeMathType));
}
}  // namespace

#define EMU_MATMUL(Name, ARG, FN)                                                       \
  OPAPI_EXPORT aclnnStatus aclnn##Name##GetWorkspaceSize(                               \
      const aclTensor* self, const aclTensor* ARG, aclTensor* out, int8_t cubeMathType, \
      uint64_t* workspaceSize, aclOpExecutor** ex) {                                    \
    Op op("aclnn" #Name);                                                               \
    int s = op.in("self", self, kFloating);                                             \
    int m = op.in(#ARG, ARG, kFloating);                                                \
    int o = op.out("out", out, kFloating);                                              \
    CheckCube(op, cubeMathType);                                                        \
    return op.build(workspaceSize, ex, ScratchBytes(Numel(out)),                        \
                    [=](Ctx& c) { c.set(o, FN(c.t[s], c.t[m])); });                     \
  }                                                                                     \
  EMU_LAUNCH(Name)

EMU_MATMUL(Mm, mat2, at::mm)
EMU_MATMUL(BatchMatMul, mat2, at::bmm)
EMU_MATMUL(Matmul, other, at::matmul)

OPAPI_EXPORT aclnnStatus aclnnAddmmGetWorkspaceSize(const aclTensor* self, const aclTensor* mat1,
                                                    const aclTensor* mat2, const aclScalar* beta,
                                                    const aclScalar* alpha, aclTensor* out,
                                                    int8_t cubeMathType, uint64_t* workspaceSize,
                                                    aclOpExecutor** ex) {
  Op op("aclnnAddmm");
  int s = op.in("self", self, kFloating);
  int a = op.in("mat1", mat1, kFloating);
  int b = op.in("mat2", mat2, kFloating);
  at::Scalar be = op.scalar("beta", beta);
  at::Scalar al = op.scalar("alpha", alpha);
  int o = op.out("out", out, kFloating);
  CheckCube(op, cubeMathType);
  return op.build(workspaceSize, ex, ScratchBytes(Numel(out)),
                  [=](Ctx& c) { c.set(o, at::addmm(c.t[s], c.t[a], c.t[b], be, al)); });
}
EMU_LAUNCH(Addmm)

#define EMU_SOFTMAX(Name, FN)                                                                     \
  OPAPI_EXPORT aclnnStatus aclnn##Name##GetWorkspaceSize(const aclTensor* self, int64_t dim,      \
                                                         aclTensor* out, uint64_t* workspaceSize, \
                                                         aclOpExecutor** ex) {                    \
    Op op("aclnn" #Name);                                                                         \
    int s = op.in("self", self, kFloating);                                                       \
    int o = op.out("out", out, kFloating);                                                        \
    return op.build(workspaceSize, ex, ScratchBytes(Numel(self)),                                 \
                    [=](Ctx& c) { c.set(o, FN(c.t[s], dim, std::nullopt)); });                    \
  }                                                                                               \
  EMU_LAUNCH(Name)

EMU_SOFTMAX(Softmax, at::softmax)
EMU_SOFTMAX(LogSoftmax, at::log_softmax)

#define EMU_SOFTMAX_BWD(Name, OUTARG, FN)                                                   \
  OPAPI_EXPORT aclnnStatus aclnn##Name##GetWorkspaceSize(                                   \
      const aclTensor* gradOutput, const aclTensor* output, int64_t dim, aclTensor* OUTARG, \
      uint64_t* workspaceSize, aclOpExecutor** ex) {                                        \
    Op op("aclnn" #Name);                                                                   \
    int g = op.in("gradOutput", gradOutput, kFloating);                                     \
    int y = op.in("output", output, kFloating);                                             \
    int o = op.out(#OUTARG, OUTARG, kFloating);                                             \
    return op.build(workspaceSize, ex, ScratchBytes(Numel(output)), [=](Ctx& c) {           \
      const at::Tensor& gr = c.t[g];                                                        \
      const at::Tensor& yv = c.t[y];                                                        \
      at::Tensor yc = yv.scalar_type() == gr.scalar_type() ? yv : yv.to(gr.scalar_type());  \
      c.set(o, FN(gr, yc, dim, gr.scalar_type()));                                          \
    });                                                                                     \
  }                                                                                         \
  EMU_LAUNCH(Name)

EMU_SOFTMAX_BWD(SoftmaxBackward, gradInput, at::_softmax_backward_data)
EMU_SOFTMAX_BWD(LogSoftmaxBackward, out, at::_log_softmax_backward_data)
