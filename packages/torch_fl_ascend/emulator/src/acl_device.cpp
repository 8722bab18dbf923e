// Devices, their contexts and peer access.
#include "acl_capture.h"
#include "acl_state.h"

using namespace acl_emu;

namespace {
constexpr const char* kSocName = "Ascend910B2";
}  // namespace

extern "C" {

aclError aclrtGetDeviceCount(uint32_t* count) {
  ACL_ENTER("aclrtGetDeviceCount");
  if (!count) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDeviceCount: count is NULL");
  if (S().devices.empty())
    return fail(ACL_ERROR_RT_NO_DEVICE, "aclrtGetDeviceCount: no NPU (ASCEND_EMU_DEVICES=0)");
  *count = static_cast<uint32_t>(S().devices.size());
  return ACL_SUCCESS;
}

aclError aclrtSetDevice(int32_t deviceId) {
  ACL_ENTER("aclrtSetDevice");
  if (!valid_device(deviceId))
    return fail(ACL_ERROR_RT_INVALID_DEVICEID,
                "aclrtSetDevice: device %d does not exist (%zu NPUs)", deviceId,
                S().devices.size());
  t_device = deviceId;
  std::lock_guard<std::mutex> lk(S().mu);
  default_stream_locked(deviceId);
  return ACL_SUCCESS;
}

aclError aclrtGetDevice(int32_t* deviceId) {
  ACL_ENTER("aclrtGetDevice");
  if (!deviceId) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDevice: deviceId is NULL");
  if (t_device < 0)
    return fail(ACL_ERROR_RT_CONTEXT_NULL, "aclrtGetDevice: no current device on this thread");
  *deviceId = t_device;
  return ACL_SUCCESS;
}

aclError aclrtResetDevice(int32_t deviceId) {
  ACL_ENTER("aclrtResetDevice");
  if (!valid_device(deviceId))
    return fail(ACL_ERROR_RT_INVALID_DEVICEID, "aclrtResetDevice: device %d does not exist",
                deviceId);
  std::string ignored;
  for (const StreamRef& st : device_streams(deviceId)) st->drain(&ignored);
  if (t_device == deviceId) t_device = -1;
  return ACL_SUCCESS;
}

aclError aclrtSynchronizeDevice(void) {
  ACL_ENTER("aclrtSynchronizeDevice");
  ACL_NEED_DEVICE("aclrtSynchronizeDevice", dev);
  if (aclError e = check_unsafe_call("aclrtSynchronizeDevice", dev)) return e;
  {
    std::lock_guard<std::mutex> lk(S().mu);
    default_stream_locked(dev);
  }
  aclError first = ACL_SUCCESS;
  std::string first_msg;
  for (const StreamRef& st : device_streams(dev)) {
    std::string msg;
    aclError e = st->drain(&msg);
    if (e != ACL_SUCCESS && first == ACL_SUCCESS) first = e, first_msg = msg;
  }
  return surface("aclrtSynchronizeDevice", first, first_msg);
}

aclError aclrtGetRunMode(aclrtRunMode* runMode) {
  ACL_ENTER("aclrtGetRunMode");
  if (!runMode) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetRunMode: runMode is NULL");
  *runMode = ACL_HOST;
  return ACL_SUCCESS;
}

const char* aclrtGetSocName() {
  if (S().ledger.enter("aclrtGetSocName") != 0 || !S().initialized) return nullptr;
  return kSocName;
}

aclError aclrtDeviceCanAccessPeer(int32_t* canAccessPeer, int32_t deviceId, int32_t peerDeviceId) {
  ACL_ENTER("aclrtDeviceCanAccessPeer");
  if (!canAccessPeer)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtDeviceCanAccessPeer: canAccessPeer is NULL");
  if (!valid_device(deviceId) || !valid_device(peerDeviceId))
    return fail(ACL_ERROR_RT_INVALID_DEVICEID,
                "aclrtDeviceCanAccessPeer: device %d or peer %d does not exist", deviceId,
                peerDeviceId);
  if (deviceId == peerDeviceId)
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtDeviceCanAccessPeer: deviceId and peerDeviceId are both %d", deviceId);
  *canAccessPeer = 1;
  return ACL_SUCCESS;
}

aclError aclrtDeviceEnablePeerAccess(int32_t peerDeviceId, uint32_t flags) {
  ACL_ENTER("aclrtDeviceEnablePeerAccess");
  ACL_NEED_DEVICE("aclrtDeviceEnablePeerAccess", dev);
  if (flags != 0)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtDeviceEnablePeerAccess: flags must be 0, got %u",
                flags);
  if (!valid_device(peerDeviceId) || peerDeviceId == dev)
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtDeviceEnablePeerAccess: peer %d is not another device (current %d)",
                peerDeviceId, dev);
  std::lock_guard<std::mutex> lk(S().mu);
  S().devices[static_cast<size_t>(dev)].peer[static_cast<size_t>(peerDeviceId)] = true;
  return ACL_SUCCESS;
}

aclError aclrtDeviceDisablePeerAccess(int32_t peerDeviceId) {
  ACL_ENTER("aclrtDeviceDisablePeerAccess");
  ACL_NEED_DEVICE("aclrtDeviceDisablePeerAccess", dev);
  std::lock_guard<std::mutex> lk(S().mu);
  if (!valid_device(peerDeviceId) ||
      !S().devices[static_cast<size_t>(dev)].peer[static_cast<size_t>(peerDeviceId)])
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtDeviceDisablePeerAccess: device %d has no peer access to %d enabled", dev,
                peerDeviceId);
  S().devices[static_cast<size_t>(dev)].peer[static_cast<size_t>(peerDeviceId)] = false;
  return ACL_SUCCESS;
}

aclError aclrtDeviceGetStreamPriorityRange(int32_t* leastPriority, int32_t* greatestPriority) {
  ACL_ENTER("aclrtDeviceGetStreamPriorityRange");
  if (!leastPriority || !greatestPriority)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtDeviceGetStreamPriorityRange: NULL output");
  *leastPriority = 7;
  *greatestPriority = 0;
  return ACL_SUCCESS;
}

// The context of a device is its Device record; setting one makes that device current.
aclError aclrtGetCurrentContext(aclrtContext* context) {
  ACL_ENTER("aclrtGetCurrentContext");
  if (!context) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetCurrentContext: context is NULL");
  if (t_device < 0)
    return fail(ACL_ERROR_RT_CONTEXT_NULL, "aclrtGetCurrentContext: no current context");
  *context = &S().devices[static_cast<size_t>(t_device)];
  return ACL_SUCCESS;
}

aclError aclrtSetCurrentContext(aclrtContext context) {
  ACL_ENTER("aclrtSetCurrentContext");
  for (Device& d : S().devices) {
    if (&d == context) {
      t_device = d.id;
      return ACL_SUCCESS;
    }
  }
  return fail(ACL_ERROR_INVALID_PARAM, "aclrtSetCurrentContext: %p is not a context", context);
}

}  // extern "C"
