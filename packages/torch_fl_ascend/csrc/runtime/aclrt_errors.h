// aclError -> tfl_status, and the messages failures record: "<call> on Ascend NPU N failed:
// <status> (aclError N); <detail>; CANN: <the toolkit's own message>".
#pragma once

#include <acl/acl.h>
#include <torch_fl/kit/runtime_copies.h>
#include <torch_fl/kit/runtime_errors.h>
#include <torch_fl/runtime.h>

#include <string>

namespace tfl_aclrt {

using torch_fl::kit::memcpy_kind_name;
using torch_fl::kit::pointer_text;

tfl_status to_status(aclError e);
// "aclrtMalloc(&p, size, ...)" -> "aclrtMalloc": the call's name for messages.
std::string call_name(const char* expr);
// Records the failure of `call` on `device` (-1: none) and maps its status.
tfl_status fail_acl(const std::string& call, int device, aclError e,
                    const std::string& detail = "");
// Records "aclrt runtime: <msg>".
tfl_status fail(tfl_status s, const std::string& msg);

}  // namespace tfl_aclrt

#define ACL_CHECK(device, call, ...)                                                       \
  do {                                                                                     \
    const aclError _e = (call);                                                            \
    if (_e != ACL_SUCCESS) return fail_acl(call_name(#call), (device), _e, ##__VA_ARGS__); \
  } while (0)
