// aclnnEmbeddingDenseBackward: the two-phase aclnn interface as CANN declares it in
// aclnnop/aclnn_embedding_dense_backward.h.
#ifndef ACLNNOP_ACLNN_EMBEDDING_DENSE_BACKWARD_H_
#define ACLNNOP_ACLNN_EMBEDDING_DENSE_BACKWARD_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnEmbeddingDenseBackwardGetWorkspaceSize(
    const aclTensor* grad, const aclTensor* sortIndices, uint64_t numWeights, uint64_t paddingIdx,
    bool scaleGradByFreq, const aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnEmbeddingDenseBackward(void* workspace, uint64_t workspaceSize,
                                                            aclOpExecutor* executor,
                                                            aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_EMBEDDING_DENSE_BACKWARD_H_
