// aclnnEmbedding: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_embedding.h.
#ifndef ACLNNOP_ACLNN_EMBEDDING_H_
#define ACLNNOP_ACLNN_EMBEDDING_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnEmbeddingGetWorkspaceSize(const aclTensor* weight,
                                                               const aclTensor* indices,
                                                               const aclTensor* out,
                                                               uint64_t* workspaceSize,
                                                               aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnEmbedding(void* workspace, uint64_t workspaceSize,
                                               aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_EMBEDDING_H_
