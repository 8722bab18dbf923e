// aclnnScatterAdd: the two-phase aclnn interface as CANN declares it in
// aclnnop/aclnn_scatter_add.h.
#ifndef ACLNNOP_ACLNN_SCATTER_ADD_H_
#define ACLNNOP_ACLNN_SCATTER_ADD_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnScatterAddGetWorkspaceSize(
    const aclTensor* self, int64_t dim, const aclTensor* index, const aclTensor* src,
    aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnScatterAdd(void* workspace, uint64_t workspaceSize,
                                                aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_SCATTER_ADD_H_
