// aclnnRmsNorm: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_rms_norm.h.
#ifndef ACLNNOP_ACLNN_RMS_NORM_H_
#define ACLNNOP_ACLNN_RMS_NORM_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnRmsNormGetWorkspaceSize(
    const aclTensor* x, const aclTensor* gamma, double epsilon, const aclTensor* yOut,
    const aclTensor* rstdOut, uint64_t* workspaceSize, aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnRmsNorm(void* workspace, uint64_t workspaceSize,
                                             aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_RMS_NORM_H_
