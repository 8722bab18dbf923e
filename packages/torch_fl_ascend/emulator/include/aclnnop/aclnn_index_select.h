// aclnnIndexSelect: the two-phase aclnn interface as CANN declares it in
// aclnnop/aclnn_index_select.h.
#ifndef ACLNNOP_ACLNN_INDEX_SELECT_H_
#define ACLNNOP_ACLNN_INDEX_SELECT_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnIndexSelectGetWorkspaceSize(const aclTensor* self, int64_t dim,
                                                                 const aclTensor* index,
                                                                 aclTensor* out,
                                                                 uint64_t* workspaceSize,
                                                                 aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnIndexSelect(void* workspace, uint64_t workspaceSize,
                                                 aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_INDEX_SELECT_H_
