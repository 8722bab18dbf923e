#include "aclrt_device.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>

#include "aclrt_fork.h"
#include "aclrt_stream.h"

namespace tfl_aclrt {

namespace {

std::mutex g_init_mutex;
std::atomic<bool> g_ready{false};
int g_count = 0;

}  // namespace

tfl_status rt_init() {
  if (g_ready.load(std::memory_order_acquire)) return TFL_OK;
  std::lock_guard<std::mutex> lock(g_init_mutex);
  if (g_ready.load(std::memory_order_relaxed)) return TFL_OK;
  const aclError e = aclInit(nullptr);
  if (e != ACL_SUCCESS && e != ACL_ERROR_REPEAT_INITIALIZE) return fail_acl("aclInit", -1, e);
  uint32_t n = 0;
  const aclError c = aclrtGetDeviceCount(&n);
  if (c == ACL_ERROR_RT_NO_DEVICE) {
    n = 0;  // initialised, but no NPU: device_count reports 0
  } else if (c != ACL_SUCCESS) {
    return fail_acl("aclrtGetDeviceCount", -1, c);
  }
  reset_default_streams(static_cast<int>(n));
  g_count = static_cast<int>(n);
  g_ready.store(true, std::memory_order_release);
  return TFL_OK;
}

int visible_devices() { return g_count; }

tfl_status check_device(int device) {
  if (device < 0 || device >= g_count) {
    return fail(TFL_ERROR_INVALID_DEVICE, "no Ascend NPU " + std::to_string(device) + " (" +
                                              std::to_string(g_count) + " visible)");
  }
  return TFL_OK;
}

aclError thread_device(int32_t* device, const char** call) {
  *call = "aclrtGetDevice";
  const aclError g = aclrtGetDevice(device);
  if (g != ACL_ERROR_RT_CONTEXT_NULL) return g;  // success, or a real failure
  (void)aclGetRecentErrMsg();  // consume the "no context" text: it is not an error here
  *call = "aclrtSetDevice";
  const aclError e = aclrtSetDevice(0);
  if (e == ACL_SUCCESS) *device = 0;
  return e;
}

tfl_status rt_device_count(int* count) {
  if (!count) return fail(TFL_ERROR_INVALID_VALUE, "device_count: NULL out-parameter");
  READY();
  *count = g_count;
  return TFL_OK;
}

tfl_status rt_get_device(int* device) {
  if (!device) return fail(TFL_ERROR_INVALID_VALUE, "get_device: NULL out-parameter");
  READY();
  CURRENT(d);
  *device = d;
  return TFL_OK;
}

tfl_status rt_set_device(int device) {
  READY();
  if (tfl_status s = check_device(device)) return s;
  ACL_CHECK(device, aclrtSetDevice(device));
  return TFL_OK;
}

tfl_status rt_device_synchronize() {
  READY();
  CURRENT(device);
  ACL_CHECK(device, aclrtSynchronizeDevice());
  return TFL_OK;
}

tfl_status rt_mem_get_info(size_t* free_bytes, size_t* total_bytes) {
  if (!free_bytes || !total_bytes)
    return fail(TFL_ERROR_INVALID_VALUE, "mem_get_info: NULL out-parameter");
  READY();
  CURRENT(device);
  size_t f = 0, t = 0;
  ACL_CHECK(device, aclrtGetMemInfo(ACL_HBM_MEM, &f, &t));
  *free_bytes = f;
  *total_bytes = t;
  return TFL_OK;
}

tfl_status rt_device_name(int device, char* buf, size_t len) {
  if (!buf || len == 0) return fail(TFL_ERROR_INVALID_VALUE, "device_name: empty buffer");
  READY();
  if (tfl_status s = check_device(device)) return s;
  // One SoC per machine: aclrtGetSocName names the chip ("Ascend910B1"), the index tells
  // the cards apart.
  const char* soc = aclrtGetSocName();
  std::snprintf(buf, len, "%s (NPU %d)", soc && *soc ? soc : "Ascend", device);
  return TFL_OK;
}

// v1.2: presence check without torch: aclInit and the number of NPUs, or a message why not.
tfl_status rt_probe(int* count, char* msg, size_t len) {
  if (count) *count = 0;
  if (msg && len) msg[0] = '\0';
  if (!count) return fail(TFL_ERROR_INVALID_VALUE, "probe: NULL out-parameter");
  if (tfl_status s = rt_init()) {
    if (msg && len) std::snprintf(msg, len, "%s", torch_fl::kit::last_error());
    return s;
  }
  *count = g_count;
  if (g_count == 0 && msg && len) std::snprintf(msg, len, "aclrtGetDeviceCount reports no NPU");
  return TFL_OK;
}

void forget_devices_after_fork() {
  remake(g_init_mutex);
  g_ready.store(false);
  g_count = 0;
}

}  // namespace tfl_aclrt
