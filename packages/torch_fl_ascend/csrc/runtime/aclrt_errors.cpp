#include "aclrt_errors.h"

#include <cstring>
#include <utility>

namespace tfl_aclrt {

const char* acl_error_name(aclError e) {
  switch (e) {
    case ACL_SUCCESS:
      return "ACL_SUCCESS";
    case ACL_ERROR_INVALID_PARAM:
      return "ACL_ERROR_INVALID_PARAM";
    case ACL_ERROR_UNINITIALIZE:
      return "ACL_ERROR_UNINITIALIZE";
    case ACL_ERROR_REPEAT_INITIALIZE:
      return "ACL_ERROR_REPEAT_INITIALIZE";
    case ACL_ERROR_BAD_ALLOC:
      return "ACL_ERROR_BAD_ALLOC";
    case ACL_ERROR_API_NOT_SUPPORT:
      return "ACL_ERROR_API_NOT_SUPPORT";
    case ACL_ERROR_INVALID_DEVICE:
      return "ACL_ERROR_INVALID_DEVICE";
    case ACL_ERROR_MEMORY_ADDRESS_UNALIGNED:
      return "ACL_ERROR_MEMORY_ADDRESS_UNALIGNED";
    case ACL_ERROR_RESOURCE_NOT_MATCH:
      return "ACL_ERROR_RESOURCE_NOT_MATCH";
    case ACL_ERROR_INVALID_RESOURCE_HANDLE:
      return "ACL_ERROR_INVALID_RESOURCE_HANDLE";
    case ACL_ERROR_FEATURE_UNSUPPORTED:
      return "ACL_ERROR_FEATURE_UNSUPPORTED";
    case ACL_ERROR_STORAGE_OVER_LIMIT:
      return "ACL_ERROR_STORAGE_OVER_LIMIT";
    case ACL_ERROR_INTERNAL_ERROR:
      return "ACL_ERROR_INTERNAL_ERROR";
    case ACL_ERROR_FAILURE:
      return "ACL_ERROR_FAILURE";
    case ACL_ERROR_RT_PARAM_INVALID:
      return "ACL_ERROR_RT_PARAM_INVALID";
    case ACL_ERROR_RT_INVALID_DEVICEID:
      return "ACL_ERROR_RT_INVALID_DEVICEID";
    case ACL_ERROR_RT_CONTEXT_NULL:
      return "ACL_ERROR_RT_CONTEXT_NULL";
    case ACL_ERROR_RT_STREAM_CONTEXT:
      return "ACL_ERROR_RT_STREAM_CONTEXT";
    case ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID:
      return "ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID";
    case ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL:
      return "ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL";
    case ACL_ERROR_RT_STREAM_SUBSCRIBE:
      return "ACL_ERROR_RT_STREAM_SUBSCRIBE";
    case ACL_ERROR_RT_THREAD_SUBSCRIBE:
      return "ACL_ERROR_RT_THREAD_SUBSCRIBE";
    case ACL_ERROR_RT_STREAM_NO_CB_REG:
      return "ACL_ERROR_RT_STREAM_NO_CB_REG";
    case ACL_ERROR_RT_INVALID_MEMORY_TYPE:
      return "ACL_ERROR_RT_INVALID_MEMORY_TYPE";
    case ACL_ERROR_RT_INVALID_HANDLE:
      return "ACL_ERROR_RT_INVALID_HANDLE";
    case ACL_ERROR_RT_INVALID_MALLOC_TYPE:
      return "ACL_ERROR_RT_INVALID_MALLOC_TYPE";
    case ACL_ERROR_RT_WAIT_TIMEOUT:
      return "ACL_ERROR_RT_WAIT_TIMEOUT";
    case ACL_ERROR_RT_FEATURE_NOT_SUPPORT:
      return "ACL_ERROR_RT_FEATURE_NOT_SUPPORT";
    case ACL_ERROR_RT_MEMORY_ALLOCATION:
      return "ACL_ERROR_RT_MEMORY_ALLOCATION";
    case ACL_ERROR_RT_MEMORY_FREE:
      return "ACL_ERROR_RT_MEMORY_FREE";
    case ACL_ERROR_RT_NO_DEVICE:
      return "ACL_ERROR_RT_NO_DEVICE";
    case ACL_ERROR_RT_NO_PERMISSION:
      return "ACL_ERROR_RT_NO_PERMISSION";
    case ACL_ERROR_RT_INTERNAL_ERROR:
      return "ACL_ERROR_RT_INTERNAL_ERROR";
    case ACL_ERROR_RT_STREAM_NOT_COMPLETE:
      return "ACL_ERROR_RT_STREAM_NOT_COMPLETE";
    case ACL_ERROR_RT_EVENT_NOT_COMPLETE:
      return "ACL_ERROR_RT_EVENT_NOT_COMPLETE";
    case ACL_ERROR_RT_REPORT_TIMEOUT:
      return "ACL_ERROR_RT_REPORT_TIMEOUT";
    case ACL_ERROR_RT_AICORE_EXCEPTION:
      return "ACL_ERROR_RT_AICORE_EXCEPTION";
    case ACL_ERROR_RT_DEV_SETUP_ERROR:
      return "ACL_ERROR_RT_DEV_SETUP_ERROR";
    case ACL_ERROR_RT_CAPTURE_DEPENDENCY:
      return "ACL_ERROR_RT_CAPTURE_DEPENDENCY";
    case ACL_ERROR_RT_STREAM_UNJOINED:
      return "ACL_ERROR_RT_STREAM_UNJOINED";
    case ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED:
      return "ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED";
    case ACL_ERROR_RT_MODEL_CAPTURED:
      return "ACL_ERROR_RT_MODEL_CAPTURED";
    case ACL_ERROR_RT_STREAM_CAPTURED:
      return "ACL_ERROR_RT_STREAM_CAPTURED";
    case ACL_ERROR_RT_EVENT_CAPTURED:
      return "ACL_ERROR_RT_EVENT_CAPTURED";
    case ACL_ERROR_RT_STREAM_NOT_CAPTURED:
      return "ACL_ERROR_RT_STREAM_NOT_CAPTURED";
    case ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT:
      return "ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT";
    case ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD:
      return "ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD";
    case ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED:
      return "ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED";
    default:
      return nullptr;
  }
}

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

std::string acl_error_text(aclError e) {
  const char* name = acl_error_name(e);
  return std::string(name ? name : "aclError") + " (aclError " + std::to_string(e) + ")";
}

// "aclrtMalloc(&p, size, ...)" -> "aclrtMalloc": the call's name for messages.
std::string call_name(const char* expr) {
  const char* paren = std::strchr(expr, '(');
  return paren ? std::string(expr, paren) : std::string(expr);
}

// The toolkit's text for the calling thread's latest failure (real CANN clears it on read),
// trimmed and bounded: it can be a multi-line report with a traceback.
std::string recent_error_message() {
  const char* raw = aclGetRecentErrMsg();
  if (!raw) return "";
  std::string s(raw, strnlen(raw, 2048));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// Records "<call> on Ascend NPU N failed: <status> (aclError N); <detail>; CANN: <message>"
// and maps the status.
tfl_status fail_acl(const std::string& call, int device, aclError e, const std::string& detail) {
  const std::string recent = recent_error_message();
  std::string msg = call;
  if (device >= 0) msg += " on Ascend NPU " + std::to_string(device);
  msg += " failed: " + acl_error_text(e);
  if (!detail.empty()) msg += "; " + detail;
  if (!recent.empty()) msg += "; CANN: " + recent;
  return torch_fl::kit::fail(to_status(e), std::move(msg));
}

tfl_status fail(tfl_status s, const std::string& msg) {
  return torch_fl::kit::fail(s, "aclrt runtime: " + msg);
}

}  // namespace tfl_aclrt
