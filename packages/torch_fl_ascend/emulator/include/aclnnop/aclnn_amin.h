// aclnnAmin: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_amin.h.
#ifndef ACLNNOP_ACLNN_AMIN_H_
#define ACLNNOP_ACLNN_AMIN_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnAminGetWorkspaceSize(const aclTensor* self,
                                                          const aclIntArray* dim, bool keepDim,
                                                          aclTensor* out, uint64_t* workspaceSize,
                                                          aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnAmin(void* workspace, uint64_t workspaceSize,
                                          aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_AMIN_H_
