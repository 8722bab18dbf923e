// aclnnCumsum: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_cumsum.h.
#ifndef ACLNNOP_ACLNN_CUMSUM_H_
#define ACLNNOP_ACLNN_CUMSUM_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnCumsumGetWorkspaceSize(const aclTensor* self, int64_t dim,
                                                            aclDataType dtype, aclTensor* out,
                                                            uint64_t* workspaceSize,
                                                            aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnCumsum(void* workspace, uint64_t workspaceSize,
                                            aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_CUMSUM_H_
