// aclnnLeTensor: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_le_tensor.h.
#ifndef ACLNNOP_ACLNN_LE_TENSOR_H_
#define ACLNNOP_ACLNN_LE_TENSOR_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnLeTensorGetWorkspaceSize(const aclTensor* self,
                                                              const aclTensor* other,
                                                              aclTensor* out,
                                                              uint64_t* workspaceSize,
                                                              aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnLeTensor(void* workspace, uint64_t workspaceSize,
                                              aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_LE_TENSOR_H_
