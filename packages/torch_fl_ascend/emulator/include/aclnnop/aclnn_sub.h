// aclnnSub, aclnnSubs: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_sub.h.
#ifndef ACLNNOP_ACLNN_SUB_H_
#define ACLNNOP_ACLNN_SUB_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnSubGetWorkspaceSize(const aclTensor* self,
                                                         const aclTensor* other,
                                                         const aclScalar* alpha, aclTensor* out,
                                                         uint64_t* workspaceSize,
                                                         aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnSub(void* workspace, uint64_t workspaceSize,
                                         aclOpExecutor* executor, aclrtStream stream);

ACL_FUNC_VISIBILITY aclnnStatus aclnnSubsGetWorkspaceSize(const aclTensor* self,
                                                          const aclScalar* other,
                                                          const aclScalar* alpha, aclTensor* out,
                                                          uint64_t* workspaceSize,
                                                          aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnSubs(void* workspace, uint64_t workspaceSize,
                                          aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_SUB_H_
