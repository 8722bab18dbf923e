// aclnn base (CANN's aclnn/aclnn_base.h): status codes and aclnnInit/aclnnFinalize.
#ifndef ACLNN_ACLNN_BASE_H_
#define ACLNN_ACLNN_BASE_H_

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

// aclnn status codes (the values of CANN's opdev/op_errno.h).
#ifndef ACLNN_SUCCESS
#define ACLNN_SUCCESS 0
#define ACLNN_ERR_PARAM_NULLPTR 161001
#define ACLNN_ERR_PARAM_INVALID 161002
#define ACLNN_ERR_RUNTIME_ERROR 361001
#define ACLNN_ERR_INNER 561000
#define ACLNN_ERR_INNER_INFERSHAPE_ERROR 561001
#define ACLNN_ERR_INNER_TILING_ERROR 561002
#define ACLNN_ERR_INNER_FIND_KERNEL_ERROR 561003
#define ACLNN_ERR_INNER_CREATE_EXECUTOR 561101
#define ACLNN_ERR_INNER_NOT_TRANS_EXECUTOR 561102
#define ACLNN_ERR_INNER_NULLPTR 561103
#define ACLNN_ERR_INNER_WRONG_ATTR_INFO_SIZE 561104
#define ACLNN_ERR_INNER_KEY_CONFILICT 561105
#define ACLNN_ERR_INNER_INVALID_IMPL_MODE 561106
#define ACLNN_ERR_INNER_OPP_PATH_NOT_FOUND 561107
#define ACLNN_ERR_INNER_LOAD_JSON_FAILED 561108
#define ACLNN_ERR_INNER_JSON_VALUE_NOT_FOUND 561109
#define ACLNN_ERR_INNER_JSON_FORMAT_INVALID 561110
#define ACLNN_ERR_INNER_JSON_DTYPE_INVALID 561111
#define ACLNN_ERR_INNER_OPP_KERNEL_PKG_NOT_FOUND 561112
#endif

// The emulator accepts at most 50 tensors in one aclTensorList passed to an op (callers split
// longer lists); a longer list makes the op's GetWorkspaceSize return ACLNN_ERR_PARAM_INVALID.

ACL_FUNC_VISIBILITY aclnnStatus aclnnInit(const char* configPath);
ACL_FUNC_VISIBILITY aclnnStatus aclnnFinalize();

#ifdef __cplusplus
}
#endif

#endif  // ACLNN_ACLNN_BASE_H_
