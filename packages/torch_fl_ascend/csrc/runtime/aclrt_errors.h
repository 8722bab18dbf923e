// aclError -> tfl_status, and the message of a failed CANN call: "<call> on Ascend NPU N failed:
// <status> (aclError N); <detail>; CANN: <the toolkit's own message>".
#pragma once

#include <acl/acl.h>
#include <torch_fl/runtime.h>

#include <string>

namespace tfl_aclrt {

tfl_status to_status(aclError e);
// The status's name ("ACL_ERROR_RT_NO_DEVICE"), or "aclError" for one without a name here.
const char* error_name(aclError e);
// The message of `call` failing on `device` (-1: none); reads (and so clears) CANN's recent
// error message of the calling thread.
std::string failure_text(const char* call, int device, aclError e, const std::string& detail);

}  // namespace tfl_aclrt
