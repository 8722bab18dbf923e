// aclnnGeluV2: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_gelu_v2.h.
#ifndef ACLNNOP_ACLNN_GELU_V2_H_
#define ACLNNOP_ACLNN_GELU_V2_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnGeluV2GetWorkspaceSize(const aclTensor* self,
                                                            int64_t approximate, aclTensor* out,
                                                            uint64_t* workspaceSize,
                                                            aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnGeluV2(void* workspace, uint64_t workspaceSize,
                                            aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_GELU_V2_H_
