// aclnn parameter objects (CANN's aclnn/acl_meta.h): opaque tensor / scalar / array / list
// handles that the two-phase aclnn ops take, and the executor handle they return.
#ifndef ACLNN_ACL_META_H_
#define ACLNN_ACL_META_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "acl/acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef ACL_FUNC_VISIBILITY
#define ACL_FUNC_VISIBILITY __attribute__((visibility("default")))
#endif

#ifndef ACLNN_META
#define ACLNN_META
typedef struct aclOpExecutor aclOpExecutor;
typedef struct aclTensor aclTensor;
typedef struct aclScalar aclScalar;
typedef struct aclIntArray aclIntArray;
typedef struct aclFloatArray aclFloatArray;
typedef struct aclBoolArray aclBoolArray;
typedef struct aclTensorList aclTensorList;
typedef struct aclScalarList aclScalarList;

typedef int32_t aclnnStatus;
#endif

// A view of `viewDims` with element `stride` starting `offset` elements into the storage of
// `storageDims` elements at `tensorData` (a device address; may be NULL for an empty tensor).
ACL_FUNC_VISIBILITY aclTensor* aclCreateTensor(const int64_t* viewDims, uint64_t viewDimsNum,
                                               aclDataType dataType, const int64_t* stride,
                                               int64_t offset, aclFormat format,
                                               const int64_t* storageDims, uint64_t storageDimsNum,
                                               void* tensorData);
// `value` is a host pointer to one element of `dataType`; it is copied.
ACL_FUNC_VISIBILITY aclScalar* aclCreateScalar(void* value, aclDataType dataType);
ACL_FUNC_VISIBILITY aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size);
ACL_FUNC_VISIBILITY aclFloatArray* aclCreateFloatArray(const float* value, uint64_t size);
ACL_FUNC_VISIBILITY aclBoolArray* aclCreateBoolArray(const bool* value, uint64_t size);
ACL_FUNC_VISIBILITY aclTensorList* aclCreateTensorList(const aclTensor* const* value,
                                                       uint64_t size);
ACL_FUNC_VISIBILITY aclScalarList* aclCreateScalarList(const aclScalar* const* value,
                                                       uint64_t size);

ACL_FUNC_VISIBILITY aclnnStatus aclDestroyTensor(const aclTensor* tensor);
ACL_FUNC_VISIBILITY aclnnStatus aclDestroyScalar(const aclScalar* scalar);
ACL_FUNC_VISIBILITY aclnnStatus aclDestroyIntArray(const aclIntArray* array);
ACL_FUNC_VISIBILITY aclnnStatus aclDestroyFloatArray(const aclFloatArray* array);
ACL_FUNC_VISIBILITY aclnnStatus aclDestroyBoolArray(const aclBoolArray* array);
// Destroys the list and the tensors in it (the list owns them, as in CANN).
ACL_FUNC_VISIBILITY aclnnStatus aclDestroyTensorList(const aclTensorList* array);
ACL_FUNC_VISIBILITY aclnnStatus aclDestroyScalarList(const aclScalarList* array);

ACL_FUNC_VISIBILITY aclnnStatus aclGetViewShape(const aclTensor* tensor, int64_t** viewDims,
                                                uint64_t* viewDimsNum);
ACL_FUNC_VISIBILITY aclnnStatus aclGetStorageShape(const aclTensor* tensor, int64_t** storageDims,
                                                   uint64_t* storageDimsNum);
ACL_FUNC_VISIBILITY aclnnStatus aclGetViewStrides(const aclTensor* tensor, int64_t** stridesValue,
                                                  uint64_t* stridesNum);
ACL_FUNC_VISIBILITY aclnnStatus aclGetViewOffset(const aclTensor* tensor, int64_t* offset);
ACL_FUNC_VISIBILITY aclnnStatus aclGetFormat(const aclTensor* tensor, aclFormat* format);
ACL_FUNC_VISIBILITY aclnnStatus aclGetDataType(const aclTensor* tensor, aclDataType* dataType);
ACL_FUNC_VISIBILITY aclnnStatus aclGetIntArraySize(const aclIntArray* array, uint64_t* size);
ACL_FUNC_VISIBILITY aclnnStatus aclGetFloatArraySize(const aclFloatArray* array, uint64_t* size);
ACL_FUNC_VISIBILITY aclnnStatus aclGetBoolArraySize(const aclBoolArray* array, uint64_t* size);
ACL_FUNC_VISIBILITY aclnnStatus aclGetTensorListSize(const aclTensorList* tensorList,
                                                     uint64_t* size);
ACL_FUNC_VISIBILITY aclnnStatus aclGetScalarListSize(const aclScalarList* scalarList,
                                                     uint64_t* size);

// Executor cache: a repeatable executor may be launched any number of times (each launch reads
// the tensors' current addresses) until aclDestroyAclOpExecutor; otherwise one launch frees it.
ACL_FUNC_VISIBILITY aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor* executor);
ACL_FUNC_VISIBILITY aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor* executor);
// Re-points a tensor's storage (for a repeatable executor's next launch).
ACL_FUNC_VISIBILITY aclnnStatus aclSetRawTensorAddr(aclTensor* tensor, void* addr);
ACL_FUNC_VISIBILITY aclnnStatus aclGetRawTensorAddr(const aclTensor* tensor, void** addr);

#ifdef __cplusplus
}
#endif

#endif  // ACLNN_ACL_META_H_
