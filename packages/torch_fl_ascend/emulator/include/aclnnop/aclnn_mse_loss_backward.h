// aclnnMseLossBackward: the two-phase aclnn interface as CANN declares it in
// aclnnop/aclnn_mse_loss_backward.h.
#ifndef ACLNNOP_ACLNN_MSE_LOSS_BACKWARD_H_
#define ACLNNOP_ACLNN_MSE_LOSS_BACKWARD_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnMseLossBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* self, const aclTensor* target, int64_t reduction,
    aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnMseLossBackward(void* workspace, uint64_t workspaceSize,
                                                     aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_MSE_LOSS_BACKWARD_H_
