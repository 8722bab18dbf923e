// aclnnInplaceMaskedFillScalar: the two-phase aclnn interface as CANN declares it in
// aclnnop/aclnn_masked_fill_scalar.h.
#ifndef ACLNNOP_ACLNN_MASKED_FILL_SCALAR_H_
#define ACLNNOP_ACLNN_MASKED_FILL_SCALAR_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnInplaceMaskedFillScalarGetWorkspaceSize(
    aclTensor* selfRef, const aclTensor* mask, const aclScalar* value, uint64_t* workspaceSize,
    aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnInplaceMaskedFillScalar(void* workspace,
                                                             uint64_t workspaceSize,
                                                             aclOpExecutor* executor,
                                                             aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_MASKED_FILL_SCALAR_H_
