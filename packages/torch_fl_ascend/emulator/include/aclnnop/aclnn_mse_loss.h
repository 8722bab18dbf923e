// aclnnMseLoss: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_mse_loss.h.
#ifndef ACLNNOP_ACLNN_MSE_LOSS_H_
#define ACLNNOP_ACLNN_MSE_LOSS_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnMseLossGetWorkspaceSize(const aclTensor* self,
                                                             const aclTensor* target,
                                                             int64_t reduction, aclTensor* out,
                                                             uint64_t* workspaceSize,
                                                             aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnMseLoss(void* workspace, uint64_t workspaceSize,
                                             aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_MSE_LOSS_H_
