// aclnnReduceSum: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_reduce_sum.h.
#ifndef ACLNNOP_ACLNN_REDUCE_SUM_H_
#define ACLNNOP_ACLNN_REDUCE_SUM_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnReduceSumGetWorkspaceSize(const aclTensor* self,
                                                               const aclIntArray* dim, bool keepDim,
                                                               aclDataType dtype, aclTensor* out,
                                                               uint64_t* workspaceSize,
                                                               aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnReduceSum(void* workspace, uint64_t workspaceSize,
                                               aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_REDUCE_SUM_H_
