// aclnnExp: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_exp.h.
#ifndef ACLNNOP_ACLNN_EXP_H_
#define ACLNNOP_ACLNN_EXP_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnExpGetWorkspaceSize(const aclTensor* self, aclTensor* out,
                                                         uint64_t* workspaceSize,
                                                         aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnExp(void* workspace, uint64_t workspaceSize,
                                         aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_EXP_H_
