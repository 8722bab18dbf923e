// aclnnMm: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_mm.h.
#ifndef ACLNNOP_ACLNN_MM_H_
#define ACLNNOP_ACLNN_MM_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnMmGetWorkspaceSize(const aclTensor* self,
                                                        const aclTensor* mat2, aclTensor* out,
                                                        int8_t cubeMathType,
                                                        uint64_t* workspaceSize,
                                                        aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnMm(void* workspace, uint64_t workspaceSize,
                                        aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_MM_H_
