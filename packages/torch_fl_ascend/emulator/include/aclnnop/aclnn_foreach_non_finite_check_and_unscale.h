// aclnnForeachNonFiniteCheckAndUnscale: the two-phase aclnn interface as CANN declares it in
// aclnnop/aclnn_foreach_non_finite_check_and_unscale.h.
#ifndef ACLNNOP_ACLNN_FOREACH_NON_FINITE_CHECK_AND_UNSCALE_H_
#define ACLNNOP_ACLNN_FOREACH_NON_FINITE_CHECK_AND_UNSCALE_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnForeachNonFiniteCheckAndUnscaleGetWorkspaceSize(
    const aclTensorList* scaledGrads, const aclTensor* foundInf, const aclTensor* inScale,
    uint64_t* workspaceSize, aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnForeachNonFiniteCheckAndUnscale(void* workspace,
                                                                     uint64_t workspaceSize,
                                                                     aclOpExecutor* executor,
                                                                     aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_FOREACH_NON_FINITE_CHECK_AND_UNSCALE_H_
