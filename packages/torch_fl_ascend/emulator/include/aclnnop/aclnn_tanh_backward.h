// aclnnTanhBackward: the two-phase aclnn interface as CANN declares it in
// aclnnop/aclnn_tanh_backward.h.
#ifndef ACLNNOP_ACLNN_TANH_BACKWARD_H_
#define ACLNNOP_ACLNN_TANH_BACKWARD_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnTanhBackwardGetWorkspaceSize(const aclTensor* gradOutput,
                                                                  const aclTensor* output,
                                                                  aclTensor* gradInput,
                                                                  uint64_t* workspaceSize,
                                                                  aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnTanhBackward(void* workspace, uint64_t workspaceSize,
                                                  aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_TANH_BACKWARD_H_
