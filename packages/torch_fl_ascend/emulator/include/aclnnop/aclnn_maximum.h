// aclnnMaximum: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_maximum.h.
#ifndef ACLNNOP_ACLNN_MAXIMUM_H_
#define ACLNNOP_ACLNN_MAXIMUM_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnMaximumGetWorkspaceSize(const aclTensor* self,
                                                             const aclTensor* other, aclTensor* out,
                                                             uint64_t* workspaceSize,
                                                             aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnMaximum(void* workspace, uint64_t workspaceSize,
                                             aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_MAXIMUM_H_
