/*
 * Runtime error codes of the torch-fl CANN emulator: CANN's acl/error_codes/rt_error_codes.h
 * names and values (the subset the emulated runtime and its users need).
 */
#ifndef ACL_ERROR_CODES_RT_ERROR_CODES_H_
#define ACL_ERROR_CODES_RT_ERROR_CODES_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

static const int32_t ACL_RT_SUCCESS = 0;

static const int32_t ACL_ERROR_RT_PARAM_INVALID = 107000;
static const int32_t ACL_ERROR_RT_INVALID_DEVICEID = 107001;
static const int32_t ACL_ERROR_RT_CONTEXT_NULL = 107002;
static const int32_t ACL_ERROR_RT_STREAM_CONTEXT = 107003;
static const int32_t ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID = 107006;
static const int32_t ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL = 107007;
static const int32_t ACL_ERROR_RT_STREAM_SUBSCRIBE = 107011;
static const int32_t ACL_ERROR_RT_THREAD_SUBSCRIBE = 107012;
static const int32_t ACL_ERROR_RT_STREAM_NO_CB_REG = 107015;
static const int32_t ACL_ERROR_RT_INVALID_MEMORY_TYPE = 107016;
static const int32_t ACL_ERROR_RT_INVALID_HANDLE = 107017;
static const int32_t ACL_ERROR_RT_INVALID_MALLOC_TYPE = 107018;
static const int32_t ACL_ERROR_RT_WAIT_TIMEOUT = 107019;
/* stream capture (aclmdlRICapture*) */
static const int32_t ACL_ERROR_RT_CAPTURE_DEPENDENCY = 107024;
static const int32_t ACL_ERROR_RT_STREAM_UNJOINED = 107025;
static const int32_t ACL_ERROR_RT_MODEL_CAPTURED = 107026;
static const int32_t ACL_ERROR_RT_STREAM_CAPTURED = 107027;
static const int32_t ACL_ERROR_RT_EVENT_CAPTURED = 107028;
static const int32_t ACL_ERROR_RT_STREAM_NOT_CAPTURED = 107029;
static const int32_t ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT = 107030;
static const int32_t ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED = 107036;
static const int32_t ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD = 107038;

static const int32_t ACL_ERROR_RT_FEATURE_NOT_SUPPORT = 207000;
static const int32_t ACL_ERROR_RT_MEMORY_ALLOCATION = 207001;
static const int32_t ACL_ERROR_RT_MEMORY_FREE = 207002;
static const int32_t ACL_ERROR_RT_NO_DEVICE = 207004;
static const int32_t ACL_ERROR_RT_NO_PERMISSION = 207006;

static const int32_t ACL_ERROR_RT_INTERNAL_ERROR = 507000;
static const int32_t ACL_ERROR_RT_STREAM_NOT_COMPLETE = 507004;
static const int32_t ACL_ERROR_RT_EVENT_NOT_COMPLETE = 507006;
static const int32_t ACL_ERROR_RT_REPORT_TIMEOUT = 507012;
static const int32_t ACL_ERROR_RT_AICORE_EXCEPTION = 507015;
static const int32_t ACL_ERROR_RT_DEV_SETUP_ERROR = 507033;
static const int32_t ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED = 507903;

#ifdef __cplusplus
}
#endif

#endif /* ACL_ERROR_CODES_RT_ERROR_CODES_H_ */
