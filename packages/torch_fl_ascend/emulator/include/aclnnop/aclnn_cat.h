// aclnnCat: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_cat.h.
#ifndef ACLNNOP_ACLNN_CAT_H_
#define ACLNNOP_ACLNN_CAT_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnCatGetWorkspaceSize(const aclTensorList* tensors, int64_t dim,
                                                         aclTensor* out, uint64_t* workspaceSize,
                                                         aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnCat(void* workspace, uint64_t workspaceSize,
                                         aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_CAT_H_
