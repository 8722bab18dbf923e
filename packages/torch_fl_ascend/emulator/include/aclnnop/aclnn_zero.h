// aclnnInplaceZero: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_zero.h.
#ifndef ACLNNOP_ACLNN_ZERO_H_
#define ACLNNOP_ACLNN_ZERO_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnInplaceZeroGetWorkspaceSize(aclTensor* selfRef,
                                                                 uint64_t* workspaceSize,
                                                                 aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnInplaceZero(void* workspace, uint64_t workspaceSize,
                                                 aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_ZERO_H_
