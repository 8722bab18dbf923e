// Losses: mean squared error, forward and backward.
#include "opapi_common.h"

#include "aclnnop/aclnn_mse_loss.h"
#include "aclnnop/aclnn_mse_loss_backward.h"

using namespace emu_op;

namespace {

int64_t Numel(const aclTensor* t) {
  if (t == nullptr) return 0;
  int64_t n = 1;
  for (int64_t d : t->viewDims) n *= d;
  return n;
}

// CANN's reduction values are ATen's: 0 none, 1 mean, 2 sum.
void NeedReduction(Op& op, int64_t reduction) {
  op.require(reduction >= 0 && reduction <= 2,
             "reduction " + std::to_string(reduction) + " is not 0 (none), 1 (mean) or 2 (sum)");
}

}  // namespace

OPAPI_EXPORT aclnnStatus aclnnMseLossGetWorkspaceSize(const aclTensor* self,
                                                      const aclTensor* target, int64_t reduction,
                                                      aclTensor* out, uint64_t* workspaceSize,
                                                      aclOpExecutor** ex) {
  Op op("aclnnMseLoss");
  int s = op.in("self", self, kFloating);
  int t = op.in("target", target, kFloating);
  int o = op.out("out", out, kFloating);
  NeedReduction(op, reduction);
  return op.build(workspaceSize, ex, ScratchBytes(Numel(self)),
                  [=](Ctx& c) { c.set(o, at::mse_loss(c.t[s], c.t[t], reduction)); });
}
EMU_LAUNCH(MseLoss)

OPAPI_EXPORT aclnnStatus aclnnMseLossBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* self, const aclTensor* target, int64_t reduction,
    aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** ex) {
  Op op("aclnnMseLossBackward");
  int g = op.in("gradOutput", gradOutput, kFloating);
  int s = op.in("self", self, kFloating);
  int t = op.in("target", target, kFloating);
  int o = op.out("out", out, kFloating);
  NeedReduction(op, reduction);
  return op.build(workspaceSize, ex, ScratchBytes(Numel(self)), [=](Ctx& c) {
    c.set(o, at::mse_loss_backward(c.t[g], c.t[s], c.t[t], reduction));
  });
}
EMU_LAUNCH(MseLossBackward)
