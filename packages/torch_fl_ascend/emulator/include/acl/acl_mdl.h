/*
 * acl/acl_mdl.h of the torch-fl CANN emulator: the stream capture part of CANN's model API
 * (aclmdlRI, "ACL Graph"), with CANN's names, enum values and signatures. Between
 * aclmdlRICaptureBegin and aclmdlRICaptureEnd the tasks issued on a stream are recorded into a
 * model run instance instead of run; aclmdlRIExecuteAsync runs them.
 */
#ifndef ACL_ACL_MDL_H_
#define ACL_ACL_MDL_H_

#include <stddef.h>
#include <stdint.h>

#include "acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void* aclmdlRI;

/* How far a capture forbids the unsafe calls (aclrtMemcpy, aclrtMemset, aclrtMallocHost,
 * aclrtSynchronizeDevice): every thread, the capturing thread only, or none. */
typedef enum aclmdlRICaptureMode {
  ACL_MODEL_RI_CAPTURE_MODE_GLOBAL = 0,
  ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL,
  ACL_MODEL_RI_CAPTURE_MODE_RELAXED,
} aclmdlRICaptureMode;

typedef enum aclmdlRICaptureStatus {
  ACL_MODEL_RI_CAPTURE_STATUS_NONE = 0,
  ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE,
  ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED,
} aclmdlRICaptureStatus;

ACL_FUNC_VISIBILITY aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode);
/* status NONE: *modelRI is NULL; otherwise the instance the capture records into. */
ACL_FUNC_VISIBILITY aclError aclmdlRICaptureGetInfo(aclrtStream stream,
                                                    aclmdlRICaptureStatus* status,
                                                    aclmdlRI* modelRI);
ACL_FUNC_VISIBILITY aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI* modelRI);
ACL_FUNC_VISIBILITY aclError aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclmdlRIDestroy(aclmdlRI modelRI);

#ifdef __cplusplus
}
#endif

#endif /* ACL_ACL_MDL_H_ */
