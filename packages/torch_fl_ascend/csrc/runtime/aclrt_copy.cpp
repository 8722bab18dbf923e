#include "aclrt_copy.h"

#include <torch_fl/kit/runtime_stream_order.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "aclrt_device.h"
#include "aclrt_errors.h"
#include "aclrt_fork.h"
#include "aclrt_memory.h"
#include "aclrt_stream.h"

namespace tfl_aclrt {

namespace {

aclrtMemcpyKind acl_kind(tfl_memcpy_kind k) {
  switch (k) {
    case TFL_MEMCPY_HOST_TO_HOST:
      return ACL_MEMCPY_HOST_TO_HOST;
    case TFL_MEMCPY_HOST_TO_DEVICE:
      return ACL_MEMCPY_HOST_TO_DEVICE;
    case TFL_MEMCPY_DEVICE_TO_HOST:
      return ACL_MEMCPY_DEVICE_TO_HOST;
    case TFL_MEMCPY_DEVICE_TO_DEVICE:
      return ACL_MEMCPY_DEVICE_TO_DEVICE;
  }
  return ACL_MEMCPY_DEFAULT;
}

std::string where(int device) {
  return device >= 0 ? "Ascend NPU " + std::to_string(device) : std::string("host");
}

// The device a copy runs on (the one owning the pointer that decides; for D2D the source) and,
// for D2D, the destination's device. A kind that does not fit the pointers is refused.
tfl_status copy_device(void* dst, const void* src, size_t n, tfl_memcpy_kind kind, int* device,
                       int* other) {
  if (kind < TFL_MEMCPY_HOST_TO_HOST || kind > TFL_MEMCPY_DEVICE_TO_DEVICE) {
    return fail(TFL_ERROR_INVALID_VALUE,
                "unknown memcpy kind " + std::to_string(static_cast<int>(kind)));
  }
  const int d = owner_of(dst), s = owner_of(src);
  torch_fl::kit::CopyRoute route;
  const bool fits = torch_fl::kit::copy_route(kind, d, s, &route);
  *device = route.device;
  *other = route.other;
  if (!fits) {
    return fail(TFL_ERROR_INVALID_MEMCPY_KIND,
                std::string("memcpy kind ") + memcpy_kind_name(kind) + " does not match dst " +
                    pointer_text(dst) + " (" + where(d) + ") and src " + pointer_text(src) + " (" +
                    where(s) + ")");
  }
  if (tfl_status st = check_range("memcpy dst", dst, n)) return st;
  return check_range("memcpy src", src, n);
}

std::string copy_detail(tfl_memcpy_kind kind, size_t n) {
  return std::string(memcpy_kind_name(kind)) + ", " + std::to_string(n) + " bytes";
}

// Peer access between two NPUs, enabled once per pair in both directions (CANN's rule: each
// direction is enabled with its own device current).
std::mutex g_peer_mutex;
std::map<std::pair<int, int>, bool> g_peer;  // (low, high) -> enabled

tfl_status ensure_peer(int a, int b) {
  std::lock_guard<std::mutex> lock(g_peer_mutex);
  const auto key = std::minmax(a, b);
  if (g_peer.count(key)) return TFL_OK;
  for (const auto& dir : {std::make_pair(a, b), std::make_pair(b, a)}) {
    int32_t can = 0;
    ACL_CHECK(dir.first, aclrtDeviceCanAccessPeer(&can, dir.first, dir.second));
    if (can != 1) {
      return fail(TFL_ERROR_NOT_SUPPORTED,
                  "Ascend NPU " + std::to_string(dir.first) + " cannot copy to or from NPU " +
                      std::to_string(dir.second) + " (aclrtDeviceCanAccessPeer reports 0)");
    }
  }
  for (const auto& dir : {std::make_pair(a, b), std::make_pair(b, a)}) {
    ENTER_DEVICE(dir.first);
    ACL_CHECK(dir.first, aclrtDeviceEnablePeerAccess(dir.second, 0));
  }
  g_peer[key] = true;
  return TFL_OK;
}

std::string peer_detail(int src, int dst, size_t n) {
  return "Ascend NPU " + std::to_string(src) + " -> NPU " + std::to_string(dst) + ", " +
         std::to_string(n) + " bytes";
}

}  // namespace

tfl_status rt_memcpy(void* dst, const void* src, size_t n, tfl_memcpy_kind kind) {
  if (n == 0) return TFL_OK;
  READY();
  int device = -1, other = -1;
  if (tfl_status s = copy_device(dst, src, n, kind, &device, &other)) return s;
  if (kind == TFL_MEMCPY_HOST_TO_HOST) {
    std::memmove(dst, src, n);
    return TFL_OK;
  }
  // "after the current device's default stream work": the devices involved drain first.
  for (int d : {device, other}) {
    if (d < 0) continue;
    tfl_stream_st* ds = nullptr;
    if (tfl_status s = default_stream(d, &ds)) return s;
    ENTER_DEVICE(d);
    ACL_CHECK(d, aclrtSynchronizeStream(ds->stream));
  }
  if (kind == TFL_MEMCPY_DEVICE_TO_DEVICE && other != device) {
    if (tfl_status s = ensure_peer(device, other)) return s;
    ENTER_DEVICE(device);
    ACL_CHECK(device, aclrtMemcpy(dst, n, src, n, ACL_MEMCPY_DEVICE_TO_DEVICE),
              peer_detail(device, other, n));
    return TFL_OK;
  }
  ENTER_DEVICE(device);
  ACL_CHECK(device, aclrtMemcpy(dst, n, src, n, acl_kind(kind)), copy_detail(kind, n));
  return TFL_OK;
}

tfl_status rt_memcpy_async(void* dst, const void* src, size_t n, tfl_memcpy_kind kind,
                           tfl_stream stream) {
  if (n == 0) return TFL_OK;
  READY();
  int device = -1, other = -1;
  if (tfl_status s = copy_device(dst, src, n, kind, &device, &other)) return s;
  if (kind == TFL_MEMCPY_DEVICE_TO_DEVICE && other != device)
    return rt_memcpy_peer_async(dst, other, src, device, n, stream);
  RESOLVE(st, stream);
  if (kind == TFL_MEMCPY_HOST_TO_HOST) {
    ENTER_DEVICE(st->device);
    ACL_CHECK(st->device, aclrtSynchronizeStream(st->stream));
    std::memmove(dst, src, n);
    return TFL_OK;
  }
  if (st->device != device) {
    return fail(TFL_ERROR_INVALID_VALUE, std::string("memcpy_async ") + memcpy_kind_name(kind) +
                                             " on Ascend NPU " + std::to_string(device) +
                                             " was given a stream of NPU " +
                                             std::to_string(st->device));
  }
  ENTER_DEVICE(device);
  const void* host = kind == TFL_MEMCPY_HOST_TO_DEVICE   ? src
                     : kind == TFL_MEMCPY_DEVICE_TO_HOST ? static_cast<const void*>(dst)
                                                         : nullptr;
  if (host && !pinned_range(host, n)) {
    // Pageable host memory: CANN's async copy may not touch it, so the bytes move now, after
    // the stream's earlier work (which is what stream order asks of them). A capturing stream
    // refuses the wait: CANN counts async copies of pageable memory among a capture's unsafe
    // calls, so such a copy is never recorded.
    ACL_CHECK(device, aclrtSynchronizeStream(st->stream),
              copy_detail(kind, n) + ", pageable host memory: copied after the stream's work");
    ACL_CHECK(device, aclrtMemcpy(dst, n, src, n, acl_kind(kind)),
              copy_detail(kind, n) + ", pageable host memory");
    return TFL_OK;
  }
  ACL_CHECK(device, aclrtMemcpyAsync(dst, n, src, n, acl_kind(kind), st->stream),
            copy_detail(kind, n));
  return TFL_OK;
}

tfl_status rt_memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device,
                                size_t n, tfl_stream stream) {
  if (n == 0) return TFL_OK;
  READY();
  const int d = owner_of(dst), s = owner_of(src);
  if (d != dst_device || s != src_device) {
    return fail(TFL_ERROR_INVALID_POINTER,
                "memcpy_peer_async dst " + pointer_text(dst) + " is on " + where(d) +
                    " (expected NPU " + std::to_string(dst_device) + "), src " + pointer_text(src) +
                    " is on " + where(s) + " (expected NPU " + std::to_string(src_device) + ")");
  }
  if (tfl_status st = check_range("memcpy_peer_async dst", dst, n)) return st;
  if (tfl_status st = check_range("memcpy_peer_async src", src, n)) return st;
  RESOLVE(st, stream);
  if (dst_device == src_device) {
    if (st->device != src_device) {
      return fail(TFL_ERROR_INVALID_VALUE,
                  "memcpy_peer_async within Ascend NPU " + std::to_string(src_device) +
                      " was given a stream of NPU " + std::to_string(st->device));
    }
    ENTER_DEVICE(src_device);
    ACL_CHECK(src_device, aclrtMemcpyAsync(dst, n, src, n, ACL_MEMCPY_DEVICE_TO_DEVICE, st->stream),
              copy_detail(TFL_MEMCPY_DEVICE_TO_DEVICE, n));
    return TFL_OK;
  }
  if (tfl_status e = ensure_peer(src_device, dst_device)) return e;
  if (st->device == src_device) {
    ENTER_DEVICE(src_device);
    ACL_CHECK(src_device, aclrtMemcpyAsync(dst, n, src, n, ACL_MEMCPY_DEVICE_TO_DEVICE, st->stream),
              peer_detail(src_device, dst_device, n));
    return TFL_OK;
  }
  // A stream of another device: the copy runs on the source's default stream, ordered after
  // `stream`, and `stream` is ordered after it.
  tfl_stream_st* src_default = nullptr;
  if (tfl_status e = default_stream(src_device, &src_default)) return e;
  return torch_fl::kit::run_in_order_of(st, src_default, stream_after, [&](tfl_stream_st* runner) {
    ENTER_DEVICE(src_device);
    ACL_CHECK(src_device,
              aclrtMemcpyAsync(dst, n, src, n, ACL_MEMCPY_DEVICE_TO_DEVICE, runner->stream),
              peer_detail(src_device, dst_device, n));
    return TFL_OK;
  });
}

tfl_status rt_memset_async(void* ptr, int value, size_t n, tfl_stream stream) {
  if (n == 0) return TFL_OK;
  READY();
  const int device = owner_of(ptr);
  if (device < 0) {
    return fail(TFL_ERROR_INVALID_POINTER,
                "memset_async of " + pointer_text(ptr) + ", which no Ascend NPU allocated here");
  }
  if (tfl_status s = check_range("memset_async", ptr, n)) return s;
  RESOLVE(st, stream);
  if (st->device != device) {
    return fail(TFL_ERROR_INVALID_VALUE, "memset_async of an Ascend NPU " + std::to_string(device) +
                                             " pointer on a stream of NPU " +
                                             std::to_string(st->device));
  }
  ENTER_DEVICE(device);
  ACL_CHECK(device, aclrtMemsetAsync(ptr, n, value, n, st->stream), std::to_string(n) + " bytes");
  return TFL_OK;
}

void forget_peer_access_after_fork() {
  remake(g_peer_mutex);
  new (&g_peer) std::map<std::pair<int, int>, bool>();
}

}  // namespace tfl_aclrt
