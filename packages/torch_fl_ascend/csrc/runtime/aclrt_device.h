// Initialisation, device count and the calling thread's device. aclrt acts on the current device,
// so most table functions run inside a DeviceScope of the device they touch.
#pragma once

#include <acl/acl.h>
#include <torch_fl/runtime.h>

#include "aclrt_errors.h"

namespace tfl_aclrt {

// aclInit and the device count, once (a failure is retried on the next call).
tfl_status rt_init();
// The NPUs visible once initialised.
int visible_devices();
tfl_status check_device(int device);
// The calling thread's device. A thread that never chose one is on NPU 0 (as with CUDA); CANN
// has no current device until aclrtSetDevice, so that is made explicit here.
aclError thread_device(int32_t* device, const char** call);

#define READY() \
  if (tfl_status _st = rt_init()) return _st

#define CURRENT(var)                                                          \
  int32_t var = -1;                                                           \
  do {                                                                        \
    const char* _call = nullptr;                                              \
    const aclError _ce = thread_device(&var, &_call);                         \
    if (_ce != ACL_SUCCESS)                                                   \
      return fail_acl(_call, -1, _ce, "finding the calling thread's device"); \
  } while (0)

// Makes `device` current for the scope (aclrt acts on the current device), then restores.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    status_ = thread_device(&prev_, &call_);
    if (status_ != ACL_SUCCESS) return;
    if (prev_ != device) {
      call_ = "aclrtSetDevice";
      status_ = aclrtSetDevice(device);
      switched_ = status_ == ACL_SUCCESS;
    }
  }
  ~DeviceScope() {
    if (switched_) (void)aclrtSetDevice(prev_);
  }
  aclError status() const { return status_; }
  const char* call() const { return call_; }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int32_t prev_ = -1;
  const char* call_ = "aclrtSetDevice";
  bool switched_ = false;
  aclError status_ = ACL_SUCCESS;
};

#define ENTER_DEVICE(device)  \
  DeviceScope _scope(device); \
  if (_scope.status() != ACL_SUCCESS) return fail_acl(_scope.call(), (device), _scope.status())

tfl_status rt_device_count(int* count);
tfl_status rt_get_device(int* device);
tfl_status rt_set_device(int device);
tfl_status rt_device_synchronize();
tfl_status rt_mem_get_info(size_t* free_bytes, size_t* total_bytes);
tfl_status rt_device_name(int device, char* buf, size_t len);
tfl_status rt_probe(int* count, char* msg, size_t len);

// Fork: the child forgets the parent's initialisation (aclrt_fork.cpp).
void forget_devices_after_fork();

}  // namespace tfl_aclrt
