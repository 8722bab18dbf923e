// aclnnGeluBackwardV2: the two-phase aclnn interface as CANN declares it in
// aclnnop/aclnn_gelu_backward_v2.h.
#ifndef ACLNNOP_ACLNN_GELU_BACKWARD_V2_H_
#define ACLNNOP_ACLNN_GELU_BACKWARD_V2_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnGeluBackwardV2GetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* self, char* approximate, aclTensor* gradInput,
    uint64_t* workspaceSize, aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnGeluBackwardV2(void* workspace, uint64_t workspaceSize,
                                                    aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_GELU_BACKWARD_V2_H_
