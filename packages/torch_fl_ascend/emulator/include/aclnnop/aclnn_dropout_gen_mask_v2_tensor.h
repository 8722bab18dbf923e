// aclnnDropoutGenMaskV2Tensor: the two-phase aclnn interface as CANN declares it in
// aclnnop/aclnn_dropout_gen_mask_v2_tensor.h. The seed and offset are device tensors, read when
// the op runs (so a captured graph draws anew each replay once they are rewritten).
#ifndef ACLNNOP_ACLNN_DROPOUT_GEN_MASK_V2_TENSOR_H_
#define ACLNNOP_ACLNN_DROPOUT_GEN_MASK_V2_TENSOR_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnDropoutGenMaskV2TensorGetWorkspaceSize(
    const aclIntArray* shape, double prob, const aclTensor* seedTensor,
    const aclTensor* offsetTensor, int64_t offset, aclDataType probDataType, aclTensor* out,
    uint64_t* workspaceSize, aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnDropoutGenMaskV2Tensor(void* workspace,
                                                            uint64_t workspaceSize,
                                                            aclOpExecutor* executor,
                                                            aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_DROPOUT_GEN_MASK_V2_TENSOR_H_
