// aclnnConvolutionBackward: the two-phase aclnn interface as CANN declares it in
// aclnnop/aclnn_convolution_backward.h.
#ifndef ACLNNOP_ACLNN_CONVOLUTION_BACKWARD_H_
#define ACLNNOP_ACLNN_CONVOLUTION_BACKWARD_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnConvolutionBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* input, const aclTensor* weight,
    const aclIntArray* biasSizes, const aclIntArray* stride, const aclIntArray* padding,
    const aclIntArray* dilation, bool transposed, const aclIntArray* outputPadding, int groups,
    const aclBoolArray* outputMask, int8_t cubeMathType, aclTensor* gradInput,
    aclTensor* gradWeight, aclTensor* gradBias, uint64_t* workspaceSize, aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnConvolutionBackward(void* workspace, uint64_t workspaceSize,
                                                         aclOpExecutor* executor,
                                                         aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_CONVOLUTION_BACKWARD_H_
