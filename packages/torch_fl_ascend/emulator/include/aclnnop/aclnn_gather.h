// aclnnGather: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_gather.h.
#ifndef ACLNNOP_ACLNN_GATHER_H_
#define ACLNNOP_ACLNN_GATHER_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnGatherGetWorkspaceSize(const aclTensor* self, int64_t dim,
                                                            const aclTensor* index, aclTensor* out,
                                                            uint64_t* workspaceSize,
                                                            aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnGather(void* workspace, uint64_t workspaceSize,
                                            aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_GATHER_H_
