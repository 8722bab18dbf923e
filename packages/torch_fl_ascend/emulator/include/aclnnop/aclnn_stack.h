// aclnnStack: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_stack.h.
#ifndef ACLNNOP_ACLNN_STACK_H_
#define ACLNNOP_ACLNN_STACK_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnStackGetWorkspaceSize(const aclTensorList* tensors,
                                                           int64_t dim, aclTensor* out,
                                                           uint64_t* workspaceSize,
                                                           aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnStack(void* workspace, uint64_t workspaceSize,
                                           aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_STACK_H_
