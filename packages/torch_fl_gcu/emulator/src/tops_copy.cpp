// Copies and memsets under the device-scoped pointer rules.
#include <cstring>

#include "tops_state.h"

using namespace tops_emu;

namespace {

// One copy with the rules of quirk 1 and 2. A stream orders nothing here: SDK work runs at
// submission, ahead of queued foreign work.
topsError_t copy_locked(void* dst, const void* src, size_t n, topsMemcpyKind kind) {
  if (n == 0) return topsSuccess;
  if (!dst || !src) return fail(topsErrorInvalidValue);
  if (kind == topsMemcpyDefault) {
    const bool d_dev = card_of_range(dst) >= 0, s_dev = card_of_range(src) >= 0;
    kind = d_dev ? (s_dev ? topsMemcpyDeviceToDevice : topsMemcpyHostToDevice)
                 : (s_dev ? topsMemcpyDeviceToHost : topsMemcpyHostToHost);
  }
  switch (kind) {
    case topsMemcpyHostToHost:
      if (card_of_range(dst) >= 0 || card_of_range(src) >= 0)
        return fail(topsErrorInvalidMemcpyDirection);
      std::memmove(dst, src, n);
      return topsSuccess;
    case topsMemcpyHostToDevice: {
      if (card_of_range(src) >= 0) return fail(topsErrorInvalidMemcpyDirection);
      char* d = resolve_on(t_device, dst, n);
      if (!d) return fail(topsErrorInvalidDevicePointer);
      std::memcpy(d, src, n);
      return topsSuccess;
    }
    case topsMemcpyDeviceToHost: {
      if (card_of_range(dst) >= 0) return fail(topsErrorInvalidMemcpyDirection);
      char* s = resolve_on(t_device, src, n);
      if (!s) return fail(topsErrorInvalidDevicePointer);
      std::memcpy(dst, s, n);
      return topsSuccess;
    }
    case topsMemcpyDeviceToDevice: {
      char* s = resolve_on(t_device, src, n);
      char* d = resolve_on(t_device, dst, n);
      // Two cards: the measured failure -- an error, and dst byte-for-byte unchanged.
      if (!s || !d) return fail(topsErrorInvalidDevicePointer);
      std::memmove(d, s, n);
      return topsSuccess;
    }
    default:
      return fail(topsErrorInvalidMemcpyDirection);
  }
}

topsError_t peer_locked(void* dst, int dst_dev, const void* src, int src_dev, size_t n) {
  if (!valid_card(dst_dev) || !valid_card(src_dev)) return fail(topsErrorInvalidDevice);
  if (t_device != dst_dev && t_device != src_dev) return fail(topsErrorInvalidDevice);
  if (n == 0) return topsSuccess;
  char* s = resolve_on(src_dev, src, n);
  char* d = resolve_on(dst_dev, dst, n);
  if (!s || !d) return fail(topsErrorInvalidDevicePointer);
  std::memmove(d, s, n);
  return topsSuccess;
}

topsError_t memset_locked(void* dst, int value, size_t bytes) {
  if (bytes == 0) return topsSuccess;
  char* d = resolve_on(t_device, dst, bytes);
  if (!d) return fail(topsErrorInvalidDevicePointer);
  std::memset(d, value, bytes);
  return topsSuccess;
}

}  // namespace

EMU_API topsError_t topsMemcpy(void* dst, const void* src, size_t bytes, topsMemcpyKind kind) {
  ENTER("topsMemcpy");
  if (!valid_card(t_device)) return fail(topsErrorNoDevice);
  return copy_locked(dst, src, bytes, kind);
}

EMU_API topsError_t topsMemcpyAsync(void* dst, const void* src, size_t bytes, topsMemcpyKind kind,
                                    topsStream_t stream) {
  ENTER("topsMemcpyAsync");
  itopsStream_t* s = stream_of(stream);
  if (!s) return fail(topsErrorInvalidHandle);
  if (s->device() != t_device) return fail(topsErrorInvalidValue);
  return copy_locked(dst, src, bytes, kind);
}

EMU_API topsError_t topsMemcpyPeer(void* dst, int dstDevice, const void* src, int srcDevice,
                                   size_t bytes) {
  ENTER("topsMemcpyPeer");
  return peer_locked(dst, dstDevice, src, srcDevice, bytes);
}

EMU_API topsError_t topsMemcpyPeerAsync(void* dst, int dstDevice, const void* src, int srcDevice,
                                        size_t bytes, topsStream_t stream) {
  ENTER("topsMemcpyPeerAsync");
  itopsStream_t* s = stream_of(stream);
  if (!s) return fail(topsErrorInvalidHandle);
  // On the card this stalls the caller; reported here so tests see it.
  if (s->device() != srcDevice) return fail(topsErrorInvalidValue);
  return peer_locked(dst, dstDevice, src, srcDevice, bytes);
}

EMU_API topsError_t topsMemset(void* dst, int value, size_t bytes) {
  ENTER("topsMemset");
  return memset_locked(dst, value, bytes);
}

EMU_API topsError_t topsMemsetAsync(void* dst, int value, size_t bytes, topsStream_t stream) {
  ENTER("topsMemsetAsync");
  itopsStream_t* s = stream_of(stream);
  if (!s) return fail(topsErrorInvalidHandle);
  if (s->device() != t_device) return fail(topsErrorInvalidValue);
  return memset_locked(dst, value, bytes);
}
