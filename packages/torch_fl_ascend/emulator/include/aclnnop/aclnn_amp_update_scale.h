// aclnnAmpUpdateScale: the two-phase aclnn interface as CANN declares it in
// aclnnop/aclnn_amp_update_scale.h.
#ifndef ACLNNOP_ACLNN_AMP_UPDATE_SCALE_H_
#define ACLNNOP_ACLNN_AMP_UPDATE_SCALE_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnAmpUpdateScaleGetWorkspaceSize(
    const aclTensor* currentScale, const aclTensor* growthTracker, const aclTensor* foundInf,
    double growthFactor, double backoffFactor, int64_t growthInterval,
    const aclTensor* updatedScaleOut, const aclTensor* updatedGrowthTrackerOut,
    uint64_t* workspaceSize, aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnAmpUpdateScale(void* workspace, uint64_t workspaceSize,
                                                    aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_AMP_UPDATE_SCALE_H_
