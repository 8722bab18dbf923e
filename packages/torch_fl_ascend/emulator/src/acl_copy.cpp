// Copies and memsets: every pointer checked against the copy kind, the current device and (for
// device-to-device copies) its enabled peers; asynchronous ones need pinned host memory.
#include <cstring>

#include "acl_capture.h"
#include "acl_state.h"

using namespace acl_emu;

namespace {

const char* kind_name(aclrtMemcpyKind k) {
  switch (k) {
    case ACL_MEMCPY_HOST_TO_HOST:
      return "ACL_MEMCPY_HOST_TO_HOST";
    case ACL_MEMCPY_HOST_TO_DEVICE:
      return "ACL_MEMCPY_HOST_TO_DEVICE";
    case ACL_MEMCPY_DEVICE_TO_HOST:
      return "ACL_MEMCPY_DEVICE_TO_HOST";
    case ACL_MEMCPY_DEVICE_TO_DEVICE:
      return "ACL_MEMCPY_DEVICE_TO_DEVICE";
    case ACL_MEMCPY_DEFAULT:
      return "ACL_MEMCPY_DEFAULT";
  }
  return "an unknown aclrtMemcpyKind";
}

// Checks one pointer of a copy against the kind and the current device. `want_device`: the
// kind says device memory (-1: ACL_MEMCPY_DEFAULT, either). Peers count only for D2D/DEFAULT.
// The host side of an asynchronous copy must be aclrtMallocHost memory: the stream reads or
// writes it later, which pageable memory does not allow. *out: the device allocation, the
// pinned block of an asynchronous copy's host side, or nullptr (a synchronous copy's host side).
aclError check_side(const char* fn, const char* role, const void* p, size_t n, int want_device,
                    aclrtMemcpyKind kind, int32_t cur, bool async, AllocRef* out) {
  State& s = S();
  std::lock_guard<std::mutex> lk(s.mu);
  AllocRef a = s.allocs.containing(p);
  if (!a) {
    // Not inside any device block: host memory (pinned or pageable).
    if (want_device == 1)
      return fail(ACL_ERROR_INVALID_PARAM,
                  "%s: %s %p is not device memory (kind %s wants a device pointer of device %d)",
                  fn, role, p, kind_name(kind), cur);
    *out = nullptr;
    if (async && n > 0) {
      *out = s.host_allocs.range(p, n);
      if (!*out)
        return fail(ACL_ERROR_INVALID_PARAM,
                    "%s: %s [%p, +%zu) is pageable host memory; an asynchronous copy needs "
                    "aclrtMallocHost memory (or use aclrtMemcpy)",
                    fn, role, p, n);
    }
    return ACL_SUCCESS;
  }
  if (want_device == 0)
    return fail(ACL_ERROR_INVALID_PARAM,
                "%s: %s %p is device memory of device %d but kind %s wants host memory", fn, role,
                p, a->device, kind_name(kind));
  if (n > a->end() - reinterpret_cast<uintptr_t>(p))
    return fail(ACL_ERROR_INVALID_PARAM,
                "%s: %s range [%p, +%zu) overruns its allocation of %zu bytes at %p (device %d)",
                fn, role, p, n, a->bytes, reinterpret_cast<void*>(a->base), a->device);
  if (a->device != cur) {
    bool d2d = kind == ACL_MEMCPY_DEVICE_TO_DEVICE || kind == ACL_MEMCPY_DEFAULT;
    if (!d2d)
      return fail(ACL_ERROR_INVALID_PARAM,
                  "%s: %s %p belongs to device %d but device %d is current", fn, role, p, a->device,
                  cur);
    if (!s.devices[static_cast<size_t>(cur)].peer[static_cast<size_t>(a->device)])
      return fail(ACL_ERROR_INVALID_PARAM,
                  "%s: %s %p belongs to device %d; device %d (current) has not enabled peer "
                  "access to it (aclrtDeviceEnablePeerAccess)",
                  fn, role, p, a->device, cur);
  }
  *out = a;
  return ACL_SUCCESS;
}

aclError check_copy(const char* fn, void* dst, size_t destMax, const void* src, size_t count,
                    aclrtMemcpyKind kind, int32_t cur, bool async, AllocRef* d, AllocRef* sside) {
  if (dst == nullptr || src == nullptr)
    return fail(ACL_ERROR_INVALID_PARAM, "%s: %s is NULL", fn, dst ? "src" : "dst");
  if (count > destMax)
    return fail(ACL_ERROR_INVALID_PARAM, "%s: count %zu exceeds destMax %zu", fn, count, destMax);
  int want_dst, want_src;
  switch (kind) {
    case ACL_MEMCPY_HOST_TO_HOST:
      want_dst = 0, want_src = 0;
      break;
    case ACL_MEMCPY_HOST_TO_DEVICE:
      want_dst = 1, want_src = 0;
      break;
    case ACL_MEMCPY_DEVICE_TO_HOST:
      want_dst = 0, want_src = 1;
      break;
    case ACL_MEMCPY_DEVICE_TO_DEVICE:
      want_dst = 1, want_src = 1;
      break;
    case ACL_MEMCPY_DEFAULT:
      want_dst = -1, want_src = -1;
      break;
    default:
      return fail(ACL_ERROR_INVALID_PARAM, "%s: kind %d is not an aclrtMemcpyKind", fn,
                  static_cast<int>(kind));
  }
  aclError e = check_side(fn, "dst", dst, count, want_dst, kind, cur, async, d);
  if (e != ACL_SUCCESS) return e;
  return check_side(fn, "src", src, count, want_src, kind, cur, async, sside);
}

aclError check_memset(const char* fn, void* p, size_t maxCount, size_t count, int32_t cur,
                      AllocRef* out) {
  if (p == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "%s: devPtr is NULL", fn);
  if (count > maxCount)
    return fail(ACL_ERROR_INVALID_PARAM, "%s: count %zu exceeds maxCount %zu", fn, count, maxCount);
  return check_side(fn, "devPtr", p, count, 1, ACL_MEMCPY_HOST_TO_DEVICE, cur, false, out);
}

// An asynchronous call needs a stream of the current device.
aclError check_stream_device(const char* fn, const StreamRef& st, aclrtStream stream, int32_t dev) {
  if (st->device() == dev) return ACL_SUCCESS;
  return fail(ACL_ERROR_RT_STREAM_CONTEXT,
              "%s: stream %p belongs to device %d but device %d is current", fn, stream,
              st->device(), dev);
}

}  // namespace

extern "C" {

aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count,
                     aclrtMemcpyKind kind) {
  ACL_ENTER("aclrtMemcpy");
  ACL_NEED_DEVICE("aclrtMemcpy", dev);
  if (aclError e = check_unsafe_call("aclrtMemcpy", dev)) return e;
  AllocRef d, s;
  aclError e = check_copy("aclrtMemcpy", dst, destMax, src, count, kind, dev, false, &d, &s);
  if (e != ACL_SUCCESS) return e;
  // Synchronous with respect to the host only: queued stream work is not waited for.
  if (count) std::memmove(dst, src, count);
  return ACL_SUCCESS;
}

aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src, size_t count,
                          aclrtMemcpyKind kind, aclrtStream stream) {
  ACL_ENTER("aclrtMemcpyAsync");
  ACL_NEED_DEVICE("aclrtMemcpyAsync", dev);
  ACL_NEED_STREAM("aclrtMemcpyAsync", st, stream);
  if (aclError e = check_stream_device("aclrtMemcpyAsync", st, stream, dev)) return e;
  AllocRef d, s;
  aclError e = check_copy("aclrtMemcpyAsync", dst, destMax, src, count, kind, dev, true, &d, &s);
  if (e != ACL_SUCCESS) return e;
  emu_kit::WorkItem it;
  it.name = "aclrtMemcpyAsync";
  it.run = [dst, src, count](char*, size_t) {
    if (count) std::memmove(dst, src, count);
    return ACL_SUCCESS;
  };
  if (d) it.allocs.push_back(d);
  if (s) it.allocs.push_back(s);
  return enqueue("aclrtMemcpyAsync", st, std::move(it));
}

aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value, size_t count) {
  ACL_ENTER("aclrtMemset");
  ACL_NEED_DEVICE("aclrtMemset", dev);
  if (aclError e = check_unsafe_call("aclrtMemset", dev)) return e;
  AllocRef d;
  aclError e = check_memset("aclrtMemset", devPtr, maxCount, count, dev, &d);
  if (e != ACL_SUCCESS) return e;
  if (count) std::memset(devPtr, value, count);
  return ACL_SUCCESS;
}

aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value, size_t count,
                          aclrtStream stream) {
  ACL_ENTER("aclrtMemsetAsync");
  ACL_NEED_DEVICE("aclrtMemsetAsync", dev);
  ACL_NEED_STREAM("aclrtMemsetAsync", st, stream);
  if (aclError e = check_stream_device("aclrtMemsetAsync", st, stream, dev)) return e;
  AllocRef d;
  aclError e = check_memset("aclrtMemsetAsync", devPtr, maxCount, count, dev, &d);
  if (e != ACL_SUCCESS) return e;
  emu_kit::WorkItem it;
  it.name = "aclrtMemsetAsync";
  it.run = [devPtr, value, count](char*, size_t) {
    if (count) std::memset(devPtr, value, count);
    return ACL_SUCCESS;
  };
  it.allocs.push_back(d);
  return enqueue("aclrtMemsetAsync", st, std::move(it));
}

}  // extern "C"
