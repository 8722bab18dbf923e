// aclnnConvolution: the two-phase aclnn interface as CANN declares it in
// aclnnop/aclnn_convolution.h.
#ifndef ACLNNOP_ACLNN_CONVOLUTION_H_
#define ACLNNOP_ACLNN_CONVOLUTION_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnConvolutionGetWorkspaceSize(
    const aclTensor* input, const aclTensor* weight, const aclTensor* bias,
    const aclIntArray* stride, const aclIntArray* padding, const aclIntArray* dilation,
    bool transposed, const aclIntArray* outputPadding, const int64_t groups, aclTensor* output,
    int8_t cubeMathType, uint64_t* workspaceSize, aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnConvolution(void* workspace, uint64_t workspaceSize,
                                                 aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_CONVOLUTION_H_
