// aclnnLogSoftmax: the two-phase aclnn interface as CANN declares it in
// aclnnop/aclnn_log_softmax.h.
#ifndef ACLNNOP_ACLNN_LOG_SOFTMAX_H_
#define ACLNNOP_ACLNN_LOG_SOFTMAX_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnLogSoftmaxGetWorkspaceSize(const aclTensor* self, int64_t dim,
                                                                aclTensor* out,
                                                                uint64_t* workspaceSize,
                                                                aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnLogSoftmax(void* workspace, uint64_t workspaceSize,
                                                aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_LOG_SOFTMAX_H_
