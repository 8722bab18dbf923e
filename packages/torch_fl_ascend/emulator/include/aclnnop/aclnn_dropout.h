// aclnnDropout: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_dropout.h.
#ifndef ACLNNOP_ACLNN_DROPOUT_H_
#define ACLNNOP_ACLNN_DROPOUT_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnDropoutGetWorkspaceSize(
    const aclTensor* input, double p, bool train, int64_t seed, int64_t offset, aclTensor* out,
    aclTensor* maskOut, uint64_t* workspaceSize, aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnDropout(void* workspace, uint64_t workspaceSize,
                                             aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_DROPOUT_H_
