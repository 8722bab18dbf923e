// aclnnPowTensorScalar: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_pow.h.
#ifndef ACLNNOP_ACLNN_POW_H_
#define ACLNNOP_ACLNN_POW_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnPowTensorScalarGetWorkspaceSize(const aclTensor* self,
                                                                     const aclScalar* exponent,
                                                                     aclTensor* out,
                                                                     uint64_t* workspaceSize,
                                                                     aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnPowTensorScalar(void* workspace, uint64_t workspaceSize,
                                                     aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_POW_H_
