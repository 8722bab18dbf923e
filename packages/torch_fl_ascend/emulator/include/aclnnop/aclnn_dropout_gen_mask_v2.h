// aclnnDropoutGenMaskV2: the two-phase aclnn interface as CANN declares it in
// aclnnop/aclnn_dropout_gen_mask_v2.h.
#ifndef ACLNNOP_ACLNN_DROPOUT_GEN_MASK_V2_H_
#define ACLNNOP_ACLNN_DROPOUT_GEN_MASK_V2_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnDropoutGenMaskV2GetWorkspaceSize(
    const aclIntArray* shape, double prob, int64_t seed, int64_t offset, aclDataType probDataType,
    aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnDropoutGenMaskV2(void* workspace, uint64_t workspaceSize,
                                                      aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNNOP_ACLNN_DROPOUT_GEN_MASK_V2_H_
