// The CUDA-style runtime's memory: device allocations in each device's unmapped address range,
// pinned host memory, and the copies and memsets between them.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "emu_kit/cuda_style.h"

namespace emu_kit {

struct CudaRuntime::Side {
  char* at = nullptr;  // the host memory the copy goes through
  AllocRef alloc;      // what backs it: device or pinned memory
  bool pageable = false;
};

int CudaRuntime::mem_alloc(const char* fn, void** ptr, size_t size) {
  if (int e = enter(fn)) return e;
  if (!ptr) return fail(cuda::kInvalidValue);
  Lock lk(mu_);
  const int dev = current_device();
  if (!valid_device(dev)) return fail(cuda::kNoDevice);
  // CUDA's allocation may synchronize: a capture mode may forbid it.
  if (Verdict v = captures_.unsafe_call(-1, fn)) return refused(v);
  if (size == 0) {
    *ptr = nullptr;
    return cuda::kSuccess;
  }
  Device& d = devices_[static_cast<size_t>(dev)];
  if (size > d.memory.available()) return fail(cuda::kOutOfMemory);
  char* host = static_cast<char*>(std::malloc(size));
  if (!host) return fail(cuda::kOutOfMemory);
  d.memory.reserve(size);
  auto a = std::make_shared<Allocation>();
  a->device = dev;
  a->base = d.next;
  a->bytes = a->accounted = size;
  a->host = host;
  d.next += (size + 511) & ~static_cast<uintptr_t>(511);
  allocs_.add(a);
  *ptr = reinterpret_cast<void*>(a->base);
  return cuda::kSuccess;
}

int CudaRuntime::retired_locked(const char* fn, const AllocRef& a) {
  const int pending = a->retire();
  if (pending > 0) {
    char msg[512];
    snprintf(msg, sizeof msg,
             "%s(%p) while %d queued work item(s) still use it: the memory must outlive the work "
             "(record an event or synchronize the stream first)",
             fn, reinterpret_cast<void*>(a->base), pending);
    ledger_.violation(msg);
  }
  return cuda::kSuccess;
}

int CudaRuntime::mem_free(const char* fn, void* ptr) {
  if (int e = enter(fn)) return e;
  if (!ptr) return cuda::kSuccess;
  Lock lk(mu_);
  const int dev = current_device();
  if (!valid_device(dev)) return fail(cuda::kNoDevice);
  if (Verdict v = captures_.unsafe_call(-1, fn)) return refused(v);
  AllocRef a = allocs_.at(ptr);
  // Another device's pointer does not resolve while this device is current.
  if (!a || a->device != dev) return fail(cuda::kInvalidDevicePointer);
  allocs_.remove(ptr);
  devices_[static_cast<size_t>(dev)].memory.release(a->accounted);
  return retired_locked(fn, a);
}

int CudaRuntime::host_alloc(const char* fn, void** ptr, size_t size) {
  if (int e = enter(fn)) return e;
  if (!ptr) return fail(cuda::kInvalidValue);
  {
    Lock lk(mu_);
    if (Verdict v = captures_.unsafe_call(-1, fn)) return refused(v);
  }
  if (size == 0) {
    *ptr = nullptr;
    return cuda::kSuccess;
  }
  void* p = std::malloc(size);
  if (!p) return fail(cuda::kOutOfMemory);
  auto a = std::make_shared<Allocation>();
  a->host = static_cast<char*>(p);
  a->base = reinterpret_cast<uintptr_t>(p);
  a->bytes = a->accounted = size;
  Lock lk(mu_);
  host_allocs_.add(a);
  *ptr = p;
  return cuda::kSuccess;
}

int CudaRuntime::host_free(const char* fn, void* ptr) {
  if (int e = enter(fn)) return e;
  if (!ptr) return cuda::kSuccess;
  Lock lk(mu_);
  if (Verdict v = captures_.unsafe_call(-1, fn)) return refused(v);
  AllocRef a = host_allocs_.remove(ptr);
  if (!a) return fail(cuda::kInvalidValue);
  return retired_locked(fn, a);  // the block itself goes with the last queued work naming it
}

int CudaRuntime::pointer_attributes(const char* fn, const void* ptr, PointerInfo* info) {
  if (int e = enter(fn)) return e;
  if (!info || !ptr) return fail(cuda::kInvalidValue);
  Lock lk(mu_);
  const int dev = current_device();
  void* p = const_cast<void*>(ptr);
  AllocRef a = allocs_.containing(ptr);
  if (a && a->device == dev) {
    *info = PointerInfo{cuda::kDevice, dev, p, nullptr};
  } else if (host_allocs_.containing(ptr)) {
    *info = PointerInfo{cuda::kHost, -1, nullptr, p};
  } else if (cfg_.unregistered_host && device_of(ptr) < 0) {
    *info = PointerInfo{};
  } else {
    // Device-scoped: another device's pointer is unknown while this device is current.
    return fail(cuda::kInvalidValue);
  }
  return cuda::kSuccess;
}

// ---- copies and memsets ----

int CudaRuntime::stream_for_locked(bool async, const CudaStream* handle, CudaStreamRef* stream) {
  const int dev = current_device();
  if (!async && !valid_device(dev)) return cuda::kNoDevice;
  *stream = stream_locked(async ? handle : nullptr);
  if (!*stream) return cuda::kInvalidHandle;
  return (*stream)->device() == dev ? cuda::kSuccess : cuda::kInvalidValue;
}

int CudaRuntime::side_locked(const void* p, size_t n, bool device, int dev, Side* side) {
  if (device) {
    side->alloc = allocs_.range(p, n);
    if (!side->alloc || side->alloc->device != dev) return cuda::kInvalidDevicePointer;
    side->at = side->alloc->host_at(p);
    return cuda::kSuccess;
  }
  if (device_of(p) >= 0) return cuda::kInvalidMemcpyDirection;
  side->at = static_cast<char*>(const_cast<void*>(p));
  side->alloc = host_allocs_.range(p, n);
  side->pageable = !side->alloc;
  return cuda::kSuccess;
}

WorkItem CudaRuntime::copy_item(const char* fn, const Side& to, const Side& from, size_t n,
                                bool async, Wait* wait) {
  WorkItem item;
  item.name = fn;
  if (from.alloc) item.allocs.push_back(from.alloc);
  if (to.alloc && to.alloc != from.alloc) item.allocs.push_back(to.alloc);
  const char* src = from.at;
  std::shared_ptr<std::vector<char>> staged;
  if (async && cfg_.mode == Stream::Mode::worker) {
    // CUDA's rules for pageable host memory: a copy reads it before the call returns and
    // writes it before the call returns.
    if (from.pageable) {
      staged = std::make_shared<std::vector<char>>(from.at, from.at + n);
      src = staged->data();
    }
    if (to.pageable) *wait = Wait::item;
  }
  char* dst = to.at;
  item.run = [dst, src, n, staged](char*, size_t) {
    std::memmove(dst, src, n);
    return 0;
  };
  return item;
}

int CudaRuntime::copy_locked(const char* fn, void* dst, const void* src, size_t n, int kind,
                             bool async, WorkItem* item, Wait* wait, bool* pageable) {
  if (kind == cuda::kDefault) {
    const bool d_dev = device_of(dst) >= 0, s_dev = device_of(src) >= 0;
    kind = d_dev ? (s_dev ? cuda::kDeviceToDevice : cuda::kHostToDevice)
                 : (s_dev ? cuda::kDeviceToHost : cuda::kHostToHost);
  }
  if (kind < cuda::kHostToHost || kind > cuda::kDeviceToDevice)
    return cuda::kInvalidMemcpyDirection;
  const int dev = current_device();
  Side to, from;
  const int es =
      side_locked(src, n, kind == cuda::kDeviceToHost || kind == cuda::kDeviceToDevice, dev, &from);
  const int ed =
      side_locked(dst, n, kind == cuda::kHostToDevice || kind == cuda::kDeviceToDevice, dev, &to);
  if (es == cuda::kInvalidMemcpyDirection || ed == cuda::kInvalidMemcpyDirection)
    return cuda::kInvalidMemcpyDirection;
  if (es != cuda::kSuccess || ed != cuda::kSuccess) {
    // Two devices' memory: an error, and dst byte-for-byte unchanged.
    AllocRef a = allocs_.range(src, n), b = allocs_.range(dst, n);
    if (kind == cuda::kDeviceToDevice && a && b && a->device != b->device)
      return cfg_.cross_device_copy;
    return cuda::kInvalidDevicePointer;
  }
  *item = copy_item(fn, to, from, n, async, wait);
  *pageable = to.pageable || from.pageable;
  return cuda::kSuccess;
}

int CudaRuntime::copy(const char* fn, void* dst, const void* src, size_t n, int kind,
                      CudaStream* stream, bool async) {
  if (int e = enter(fn)) return e;
  UniqueLock lk(mu_);
  CudaStreamRef st;
  if (int e = stream_for_locked(async, stream, &st)) return fail(e);
  if (n == 0) return cuda::kSuccess;
  if (!dst || !src) return fail(cuda::kInvalidValue);
  WorkItem item;
  Wait wait = async ? Wait::none : Wait::drain;
  bool pageable = false;
  if (int e = copy_locked(fn, dst, src, n, kind, async, &item, &wait, &pageable)) return fail(e);
  // A graph would read or write pageable memory at replay, which CUDA does not record.
  return run(lk, fn, st, std::move(item), wait,
             pageable ? "a copy of pageable host memory" : nullptr);
}

int CudaRuntime::copy_peer(const char* fn, void* dst, int dst_device, const void* src,
                           int src_device, size_t n, CudaStream* stream, bool async) {
  if (int e = enter(fn)) return e;
  UniqueLock lk(mu_);
  CudaStreamRef st;
  if (async) {
    st = stream_locked(stream);
    if (!st) return fail(cuda::kInvalidHandle);
    // On the device this stalls the caller; an error here, so that tests see it.
    if (st->device() != src_device) return fail(cuda::kInvalidValue);
  }
  const int dev = current_device();
  if (!valid_device(dst_device) || !valid_device(src_device)) return fail(cuda::kInvalidDevice);
  if (dev != dst_device && dev != src_device) return fail(cuda::kInvalidDevice);
  if (!async) st = stream_locked(nullptr);
  if (n == 0) return cuda::kSuccess;
  Side to, from;
  if (side_locked(src, n, true, src_device, &from) || side_locked(dst, n, true, dst_device, &to))
    return fail(cuda::kInvalidDevicePointer);
  Wait wait = async ? Wait::none : Wait::drain;
  return run(lk, fn, st, copy_item(fn, to, from, n, async, &wait), wait);
}

int CudaRuntime::fill(const char* fn, void* dst, int value, size_t n, CudaStream* stream,
                      bool async) {
  if (int e = enter(fn)) return e;
  UniqueLock lk(mu_);
  CudaStreamRef st;
  if (int e = stream_for_locked(async, stream, &st)) return fail(e);
  if (n == 0) return cuda::kSuccess;
  Side to;
  if (side_locked(dst, n, true, current_device(), &to)) return fail(cuda::kInvalidDevicePointer);
  WorkItem item;
  item.name = fn;
  item.allocs.push_back(to.alloc);
  char* at = to.at;
  item.run = [at, value, n](char*, size_t) {
    std::memset(at, value, n);
    return 0;
  };
  return run(lk, fn, st, std::move(item), async ? Wait::none : Wait::drain);
}

}  // namespace emu_kit
