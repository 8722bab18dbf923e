// aclnnMaxDim: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_max_dim.h.
#ifndef ACLNNOP_ACLNN_MAX_DIM_H_
#define ACLNNOP_ACLNN_MAX_DIM_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnMaxDimGetWorkspaceSize(const aclTensor* self, int64_t dim,
                                                            bool keepdim, aclTensor* out,
                                                            aclTensor* indices,
                                                            uint64_t* workspaceSize,
                                                            aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnMaxDim(void* workspace, uint64_t workspaceSize,
                                            aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_MAX_DIM_H_
