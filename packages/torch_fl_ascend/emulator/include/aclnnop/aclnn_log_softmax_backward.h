// aclnnLogSoftmaxBackward: the two-phase aclnn interface as CANN declares it in
// aclnnop/aclnn_log_softmax_backward.h.
#ifndef ACLNNOP_ACLNN_LOG_SOFTMAX_BACKWARD_H_
#define ACLNNOP_ACLNN_LOG_SOFTMAX_BACKWARD_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnLogSoftmaxBackwardGetWorkspaceSize(const aclTensor* gradOutput,
                                                                        const aclTensor* output,
                                                                        int64_t dim, aclTensor* out,
                                                                        uint64_t* workspaceSize,
                                                                        aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnLogSoftmaxBackward(void* workspace, uint64_t workspaceSize,
                                                        aclOpExecutor* executor,
                                                        aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_LOG_SOFTMAX_BACKWARD_H_
