// aclnnLayerNorm: the two-phase aclnn interface as CANN declares it in aclnnop/aclnn_layer_norm.h.
#ifndef ACLNNOP_ACLNN_LAYER_NORM_H_
#define ACLNNOP_ACLNN_LAYER_NORM_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnLayerNormGetWorkspaceSize(
    const aclTensor* input, const aclIntArray* normalizedShape, const aclTensor* weightOptional,
    const aclTensor* biasOptional, double eps, aclTensor* out, aclTensor* meanOutOptional,
    aclTensor* rstdOutOptional, uint64_t* workspaceSize, aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnLayerNorm(void* workspace, uint64_t workspaceSize,
                                               aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_LAYER_NORM_H_
