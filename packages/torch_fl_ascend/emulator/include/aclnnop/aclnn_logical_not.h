// aclnnLogicalNot: the two-phase aclnn interface as CANN declares it in
// aclnnop/aclnn_logical_not.h.
#ifndef ACLNNOP_ACLNN_LOGICAL_NOT_H_
#define ACLNNOP_ACLNN_LOGICAL_NOT_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnLogicalNotGetWorkspaceSize(const aclTensor* self,
                                                                aclTensor* out,
                                                                uint64_t* workspaceSize,
                                                                aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnLogicalNot(void* workspace, uint64_t workspaceSize,
                                                aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_LOGICAL_NOT_H_
