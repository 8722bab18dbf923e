// aclnnAdd, aclnnAdds: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_add.h.
#ifndef ACLNNOP_ACLNN_ADD_H_
#define ACLNNOP_ACLNN_ADD_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor* self,
                                                         const aclTensor* other,
                                                         const aclScalar* alpha, aclTensor* out,
                                                         uint64_t* workspaceSize,
                                                         aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnAdd(void* workspace, uint64_t workspaceSize,
                                         aclOpExecutor* executor, aclrtStream stream);

ACL_FUNC_VISIBILITY aclnnStatus aclnnAddsGetWorkspaceSize(const aclTensor* self,
                                                          const aclScalar* other,
                                                          const aclScalar* alpha, aclTensor* out,
                                                          uint64_t* workspaceSize,
                                                          aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnAdds(void* workspace, uint64_t workspaceSize,
                                          aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_ADD_H_
