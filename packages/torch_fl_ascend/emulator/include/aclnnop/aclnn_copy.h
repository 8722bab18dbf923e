// aclnnInplaceCopy: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_copy.h.
#ifndef ACLNNOP_ACLNN_COPY_H_
#define ACLNNOP_ACLNN_COPY_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnInplaceCopyGetWorkspaceSize(aclTensor* selfRef,
                                                                 const aclTensor* src,
                                                                 uint64_t* workspaceSize,
                                                                 aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnInplaceCopy(void* workspace, uint64_t workspaceSize,
                                                 aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_COPY_H_
