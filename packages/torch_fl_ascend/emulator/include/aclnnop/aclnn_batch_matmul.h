// aclnnBatchMatMul: the two-phase aclnn interface as CANN declares it in
// aclnnop/aclnn_batch_matmul.h.
#ifndef ACLNNOP_ACLNN_BATCH_MATMUL_H_
#define ACLNNOP_ACLNN_BATCH_MATMUL_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnBatchMatMulGetWorkspaceSize(
    const aclTensor* self, const aclTensor* mat2, aclTensor* out, int8_t cubeMathType,
    uint64_t* workspaceSize, aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnBatchMatMul(void* workspace, uint64_t workspaceSize,
                                                 aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_BATCH_MATMUL_H_
