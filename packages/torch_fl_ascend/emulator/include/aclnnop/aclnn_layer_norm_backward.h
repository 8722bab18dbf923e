// aclnnLayerNormBackward: the two-phase aclnn interface as CANN declares it in
// aclnnop/aclnn_layer_norm_backward.h.
#ifndef ACLNNOP_ACLNN_LAYER_NORM_BACKWARD_H_
#define ACLNNOP_ACLNN_LAYER_NORM_BACKWARD_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnLayerNormBackwardGetWorkspaceSize(
    const aclTensor* gradOut, const aclTensor* input, const aclIntArray* normalizedShape,
    const aclTensor* mean, const aclTensor* rstd, const aclTensor* weightOptional,
    const aclTensor* biasOptional, const aclBoolArray* outputMask, aclTensor* gradInputOut,
    aclTensor* gradWeightOut, aclTensor* gradBiasOut, uint64_t* workspaceSize,
    aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnLayerNormBackward(void* workspace, uint64_t workspaceSize,
                                                       aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_LAYER_NORM_BACKWARD_H_
