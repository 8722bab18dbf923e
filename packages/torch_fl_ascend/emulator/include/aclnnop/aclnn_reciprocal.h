// aclnnReciprocal: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_reciprocal.h.
#ifndef ACLNNOP_ACLNN_RECIPROCAL_H_
#define ACLNNOP_ACLNN_RECIPROCAL_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnReciprocalGetWorkspaceSize(const aclTensor* self,
                                                                aclTensor* out,
                                                                uint64_t* workspaceSize,
                                                                aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnReciprocal(void* workspace, uint64_t workspaceSize,
                                                aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_RECIPROCAL_H_
