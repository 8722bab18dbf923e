// aclnnMinDim: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_min_dim.h.
#ifndef ACLNNOP_ACLNN_MIN_DIM_H_
#define ACLNNOP_ACLNN_MIN_DIM_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnMinDimGetWorkspaceSize(const aclTensor* self, int64_t dim,
                                                            bool keepdim, aclTensor* out,
                                                            aclTensor* indices,
                                                            uint64_t* workspaceSize,
                                                            aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnMinDim(void* workspace, uint64_t workspaceSize,
                                            aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_MIN_DIM_H_
