// aclnnArange: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_arange.h.
#ifndef ACLNNOP_ACLNN_ARANGE_H_
#define ACLNNOP_ACLNN_ARANGE_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnArangeGetWorkspaceSize(const aclScalar* start,
                                                            const aclScalar* end,
                                                            const aclScalar* step, aclTensor* out,
                                                            uint64_t* workspaceSize,
                                                            aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnArange(void* workspace, uint64_t workspaceSize,
                                            aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_ARANGE_H_
