// aclnnAddmm: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_addmm.h.
#ifndef ACLNNOP_ACLNN_ADDMM_H_
#define ACLNNOP_ACLNN_ADDMM_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus
aclnnAddmmGetWorkspaceSize(const aclTensor* self, const aclTensor* mat1, const aclTensor* mat2,
                           const aclScalar* beta, const aclScalar* alpha, aclTensor* out,
                           int8_t cubeMathType, uint64_t* workspaceSize, aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnAddmm(void* workspace, uint64_t workspaceSize,
                                           aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_ADDMM_H_
