// aclnnCast: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_cast.h.
#ifndef ACLNNOP_ACLNN_CAST_H_
#define ACLNNOP_ACLNN_CAST_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnCastGetWorkspaceSize(const aclTensor* self,
                                                          const aclDataType dtype, aclTensor* out,
                                                          uint64_t* workspaceSize,
                                                          aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnCast(void* workspace, uint64_t workspaceSize,
                                          aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_CAST_H_
