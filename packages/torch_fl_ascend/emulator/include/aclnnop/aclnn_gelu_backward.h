// aclnnGeluBackward: the two-phase aclnn interface as CANN declares it in
// aclnnop/aclnn_gelu_backward.h.
#ifndef ACLNNOP_ACLNN_GELU_BACKWARD_H_
#define ACLNNOP_ACLNN_GELU_BACKWARD_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnGeluBackwardGetWorkspaceSize(const aclTensor* gradOutput,
                                                                  const aclTensor* self,
                                                                  aclTensor* gradInput,
                                                                  uint64_t* workspaceSize,
                                                                  aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnGeluBackward(void* workspace, uint64_t workspaceSize,
                                                  aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_GELU_BACKWARD_H_
