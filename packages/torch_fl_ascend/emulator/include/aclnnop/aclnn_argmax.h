// aclnnArgMax: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_argmax.h.
#ifndef ACLNNOP_ACLNN_ARGMAX_H_
#define ACLNNOP_ACLNN_ARGMAX_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnArgMaxGetWorkspaceSize(const aclTensor* self, int64_t dim,
                                                            bool keepdim, aclTensor* out,
                                                            uint64_t* workspaceSize,
                                                            aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnArgMax(void* workspace, uint64_t workspaceSize,
                                            aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_ARGMAX_H_
