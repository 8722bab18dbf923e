// aclnnDropoutDoMask: the two-phase aclnn interface as CANN declares it in
// aclnnop/aclnn_dropout_do_mask.h.
#ifndef ACLNNOP_ACLNN_DROPOUT_DO_MASK_H_
#define ACLNNOP_ACLNN_DROPOUT_DO_MASK_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnDropoutDoMaskGetWorkspaceSize(const aclTensor* self,
                                                                   const aclTensor* mask,
                                                                   double prob, aclTensor* out,
                                                                   uint64_t* workspaceSize,
                                                                   aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnDropoutDoMask(void* workspace, uint64_t workspaceSize,
                                                   aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_DROPOUT_DO_MASK_H_
