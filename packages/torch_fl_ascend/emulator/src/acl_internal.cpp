// What the op libraries (emu_internal.h) and the tests (ascend_emulator.h) reach beyond CANN's API.
#include <algorithm>

#include "acl_capture.h"
#include "acl_state.h"
#include "emu_kit/controls.h"
// The emulator-only and internal entry points are exported like the CANN ones.
#pragma GCC visibility push(default)
#include "ascend_emulator.h"
#include "emu_internal.h"
#pragma GCC visibility pop

using namespace acl_emu;

namespace {
emu_kit::DeviceMemory device_memory(int device) {
  std::lock_guard<std::mutex> lk(S().mu);
  return valid_device(device) ? S().devices[static_cast<size_t>(device)].memory
                              : emu_kit::DeviceMemory{};
}
}  // namespace

EMU_KIT_CONTROLS(acl, S().ledger, device_memory)

extern "C" {

int aclEmuInternalInitialized(void) { return S().initialized ? 1 : 0; }

int32_t aclEmuInternalCurrentDevice(void) { return t_device; }

void* aclEmuInternalResolve(int32_t device, const void* ptr, size_t bytes) {
  std::lock_guard<std::mutex> lk(S().mu);
  return S().allocs.resolve(device, ptr, bytes);
}

int32_t aclEmuInternalPointerDevice(const void* ptr, size_t bytes) {
  std::lock_guard<std::mutex> lk(S().mu);
  AllocRef a = S().allocs.range(ptr, bytes);
  return a ? a->device : -1;
}

int32_t aclEmuInternalStreamDevice(aclrtStream stream) {
  StreamRef st = lookup_stream(stream);
  return st ? st->device() : -1;
}

aclError aclEmuInternalEnqueue(aclrtStream stream, const char* name, aclEmuWorkFn fn, void* arg,
                               aclEmuCleanupFn cleanup, const aclEmuRange* ranges, size_t nRanges) {
  const char* label = name ? name : "work";
  auto drop = [&] {
    if (cleanup) cleanup(arg);
  };
  StreamRef st = lookup_stream(stream);
  if (!st) {
    drop();
    return fail(ACL_ERROR_INVALID_PARAM, "%s: stream %p is not a live stream", label, stream);
  }
  emu_kit::WorkItem it;
  it.name = label;
  {
    std::lock_guard<std::mutex> lk(S().mu);
    for (size_t i = 0; i < nRanges; ++i) {
      AllocRef a = S().allocs.range(ranges[i].ptr, ranges[i].bytes);
      if (!a || a->device != st->device()) {
        int32_t owner = a ? a->device : -1;
        drop();
        return fail(ACL_ERROR_INVALID_PARAM,
                    "%s: device memory [%p, +%zu) is not inside one live allocation of device "
                    "%d (the stream's device; it belongs to %s%d)",
                    label, ranges[i].ptr, ranges[i].bytes, st->device(),
                    owner < 0 ? "no device, " : "device ", owner);
      }
      if (std::find(it.allocs.begin(), it.allocs.end(), a) == it.allocs.end())
        it.allocs.push_back(a);
    }
  }
  it.run = [fn, arg](char* msg, size_t len) { return fn ? fn(arg, msg, len) : ACL_SUCCESS; };
  it.cleanup = [cleanup, arg] {
    if (cleanup) cleanup(arg);
  };
  return enqueue(label, st, std::move(it));
}

int aclEmuInternalEnter(const char* name) { return S().ledger.enter(name ? name : "?"); }

void aclEmuInternalSetErrMsg(const char* msg) { set_err(msg ? msg : ""); }

void aclEmuInternalViolation(const char* msg) { S().ledger.violation(msg ? msg : "(no message)"); }

}  // extern "C"
