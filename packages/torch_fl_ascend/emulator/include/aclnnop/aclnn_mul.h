// aclnnMul, aclnnMuls: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_mul.h.
#ifndef ACLNNOP_ACLNN_MUL_H_
#define ACLNNOP_ACLNN_MUL_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnMulGetWorkspaceSize(const aclTensor* self,
                                                         const aclTensor* other, aclTensor* out,
                                                         uint64_t* workspaceSize,
                                                         aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnMul(void* workspace, uint64_t workspaceSize,
                                         aclOpExecutor* executor, aclrtStream stream);

ACL_FUNC_VISIBILITY aclnnStatus aclnnMulsGetWorkspaceSize(const aclTensor* self,
                                                          const aclScalar* other, aclTensor* out,
                                                          uint64_t* workspaceSize,
                                                          aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnMuls(void* workspace, uint64_t workspaceSize,
                                          aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_MUL_H_
