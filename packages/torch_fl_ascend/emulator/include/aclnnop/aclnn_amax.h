// aclnnAmax: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_amax.h.
#ifndef ACLNNOP_ACLNN_AMAX_H_
#define ACLNNOP_ACLNN_AMAX_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnAmaxGetWorkspaceSize(const aclTensor* self,
                                                          const aclIntArray* dim, bool keepDim,
                                                          aclTensor* out, uint64_t* workspaceSize,
                                                          aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnAmax(void* workspace, uint64_t workspaceSize,
                                          aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_AMAX_H_
