#include "aclrt_errors.h"

#include <cstring>

namespace tfl_aclrt {

namespace {

// The status's name as CANN's headers spell it, or nullptr for one not listed here.
const char* acl_error_name(aclError e) {
  switch (e) {
#define TFL_ACL_NAME(status) \
  case status:               \
    return #status;
    TFL_ACL_NAME(ACL_SUCCESS)
    TFL_ACL_NAME(ACL_ERROR_INVALID_PARAM)
    TFL_ACL_NAME(ACL_ERROR_UNINITIALIZE)
    TFL_ACL_NAME(ACL_ERROR_REPEAT_INITIALIZE)
    TFL_ACL_NAME(ACL_ERROR_BAD_ALLOC)
    TFL_ACL_NAME(ACL_ERROR_API_NOT_SUPPORT)
    TFL_ACL_NAME(ACL_ERROR_INVALID_DEVICE)
    TFL_ACL_NAME(ACL_ERROR_MEMORY_ADDRESS_UNALIGNED)
    TFL_ACL_NAME(ACL_ERROR_RESOURCE_NOT_MATCH)
    TFL_ACL_NAME(ACL_ERROR_INVALID_RESOURCE_HANDLE)
    TFL_ACL_NAME(ACL_ERROR_FEATURE_UNSUPPORTED)
    TFL_ACL_NAME(ACL_ERROR_STORAGE_OVER_LIMIT)
    TFL_ACL_NAME(ACL_ERROR_INTERNAL_ERROR)
    TFL_ACL_NAME(ACL_ERROR_FAILURE)
    TFL_ACL_NAME(ACL_ERROR_RT_PARAM_INVALID)
    TFL_ACL_NAME(ACL_ERROR_RT_INVALID_DEVICEID)
    TFL_ACL_NAME(ACL_ERROR_RT_CONTEXT_NULL)
    TFL_ACL_NAME(ACL_ERROR_RT_STREAM_CONTEXT)
    TFL_ACL_NAME(ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID)
    TFL_ACL_NAME(ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL)
    TFL_ACL_NAME(ACL_ERROR_RT_STREAM_SUBSCRIBE)
    TFL_ACL_NAME(ACL_ERROR_RT_THREAD_SUBSCRIBE)
    TFL_ACL_NAME(ACL_ERROR_RT_STREAM_NO_CB_REG)
    TFL_ACL_NAME(ACL_ERROR_RT_INVALID_MEMORY_TYPE)
    TFL_ACL_NAME(ACL_ERROR_RT_INVALID_HANDLE)
    TFL_ACL_NAME(ACL_ERROR_RT_INVALID_MALLOC_TYPE)
    TFL_ACL_NAME(ACL_ERROR_RT_WAIT_TIMEOUT)
    TFL_ACL_NAME(ACL_ERROR_RT_FEATURE_NOT_SUPPORT)
    TFL_ACL_NAME(ACL_ERROR_RT_MEMORY_ALLOCATION)
    TFL_ACL_NAME(ACL_ERROR_RT_MEMORY_FREE)
    TFL_ACL_NAME(ACL_ERROR_RT_NO_DEVICE)
    TFL_ACL_NAME(ACL_ERROR_RT_NO_PERMISSION)
    TFL_ACL_NAME(ACL_ERROR_RT_INTERNAL_ERROR)
    TFL_ACL_NAME(ACL_ERROR_RT_STREAM_NOT_COMPLETE)
    TFL_ACL_NAME(ACL_ERROR_RT_EVENT_NOT_COMPLETE)
    TFL_ACL_NAME(ACL_ERROR_RT_REPORT_TIMEOUT)
    TFL_ACL_NAME(ACL_ERROR_RT_AICORE_EXCEPTION)
    TFL_ACL_NAME(ACL_ERROR_RT_DEV_SETUP_ERROR)
    TFL_ACL_NAME(ACL_ERROR_RT_CAPTURE_DEPENDENCY)
    TFL_ACL_NAME(ACL_ERROR_RT_STREAM_UNJOINED)
    TFL_ACL_NAME(ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED)
    TFL_ACL_NAME(ACL_ERROR_RT_MODEL_CAPTURED)
    TFL_ACL_NAME(ACL_ERROR_RT_STREAM_CAPTURED)
    TFL_ACL_NAME(ACL_ERROR_RT_EVENT_CAPTURED)
    TFL_ACL_NAME(ACL_ERROR_RT_STREAM_NOT_CAPTURED)
    TFL_ACL_NAME(ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT)
    TFL_ACL_NAME(ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD)
    TFL_ACL_NAME(ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED)
#undef TFL_ACL_NAME
    default:
      return nullptr;
  }
}

}  // namespace

tfl_status to_status(aclError e) {
  switch (e) {
    case ACL_SUCCESS:
      return TFL_OK;
    case ACL_ERROR_INVALID_PARAM:
    case ACL_ERROR_RT_PARAM_INVALID:
    case ACL_ERROR_MEMORY_ADDRESS_UNALIGNED:
      return TFL_ERROR_INVALID_VALUE;
    case ACL_ERROR_UNINITIALIZE:
      return TFL_ERROR_NOT_INITIALIZED;
    case ACL_ERROR_BAD_ALLOC:
    case ACL_ERROR_RT_MEMORY_ALLOCATION:
      return TFL_ERROR_OUT_OF_MEMORY;
    case ACL_ERROR_INVALID_DEVICE:
    case ACL_ERROR_RT_INVALID_DEVICEID:
    case ACL_ERROR_RT_NO_DEVICE:
      return TFL_ERROR_INVALID_DEVICE;
    case ACL_ERROR_INVALID_RESOURCE_HANDLE:
    case ACL_ERROR_RT_INVALID_HANDLE:
    case ACL_ERROR_RT_STREAM_CONTEXT:
      return TFL_ERROR_INVALID_HANDLE;
    case ACL_ERROR_RT_INVALID_MEMORY_TYPE:
    case ACL_ERROR_RT_MEMORY_FREE:
      return TFL_ERROR_INVALID_POINTER;
    case ACL_ERROR_API_NOT_SUPPORT:
    case ACL_ERROR_FEATURE_UNSUPPORTED:
    case ACL_ERROR_RT_FEATURE_NOT_SUPPORT:
      return TFL_ERROR_NOT_SUPPORTED;
    case ACL_ERROR_RT_STREAM_NOT_COMPLETE:
    case ACL_ERROR_RT_EVENT_NOT_COMPLETE:
      return TFL_ERROR_NOT_READY;
    // A call a stream capture forbids, work on a capture that one invalidated, or the end of a
    // capture that a joined stream left unjoined or that a joined stream tried to end.
    case ACL_ERROR_RT_CAPTURE_DEPENDENCY:
    case ACL_ERROR_RT_STREAM_UNJOINED:
    case ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED:
    case ACL_ERROR_RT_MODEL_CAPTURED:
    case ACL_ERROR_RT_STREAM_CAPTURED:
    case ACL_ERROR_RT_EVENT_CAPTURED:
    case ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT:
    case ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD:
    case ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED:
      return TFL_ERROR_CAPTURE;
    case ACL_ERROR_RT_STREAM_NOT_CAPTURED:
      return TFL_ERROR_INVALID_VALUE;
    default:
      return TFL_ERROR_DEVICE;
  }
}

const char* error_name(aclError e) {
  const char* name = acl_error_name(e);
  return name ? name : "aclError";
}

// The toolkit's text for the calling thread's latest failure (real CANN clears it on read),
// trimmed and bounded: it can be a multi-line report with a traceback.
static std::string recent_error_message() {
  const char* raw = aclGetRecentErrMsg();
  if (!raw) return "";
  std::string s(raw, strnlen(raw, 2048));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string failure_text(const char* call, int device, aclError e, const std::string& detail) {
  const std::string recent = recent_error_message();
  std::string msg = call;
  if (device >= 0) msg += " on Ascend NPU " + std::to_string(device);
  msg += std::string(" failed: ") + error_name(e) + " (aclError " + std::to_string(e) + ")";
  if (!detail.empty()) msg += "; " + detail;
  if (!recent.empty()) msg += "; CANN: " + recent;
  return msg;
}

}  // namespace tfl_aclrt
