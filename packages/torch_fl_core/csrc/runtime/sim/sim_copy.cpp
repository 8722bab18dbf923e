// Copies and memset, validated against the allocation registry.
//
// Pointer rules (what a real SDK would fault on, we reject up front, so a
// failed copy never touches the destination):
//  - A device pointer is only valid on its own device: memcpy/memcpy_async/
//    memset_async need device pointers owned by the CURRENT device, and their
//    stream must belong to the current device too. Crossing cards is
//    memcpy_peer_async's job.
//  - A device pointer where the kind says host, or pinned host memory where
//    it says device, is TFL_ERROR_INVALID_MEMCPY_KIND; a pointer the runtime
//    never allocated where device memory is needed, or one of another device,
//    is TFL_ERROR_INVALID_POINTER; a range running past its allocation is
//    TFL_ERROR_INVALID_VALUE.
//
// Pageable host memory (not from host_malloc) follows CUDA's rules for async
// copies, so callers may reuse or free it as soon as the call returns: a
// pageable source is staged into a private buffer at enqueue time, and a copy
// into a pageable destination waits for completion before returning.
//
// On a capturing stream (sim_graph) copies and memsets are recorded, not run:
// they read and write their memory, pageable memory included, when the graph
// runs, and a copy into pageable memory does not wait.
#include "sim_copy.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "sim_device.h"
#include "sim_entry.h"
#include "sim_errors.h"
#include "sim_graph.h"
#include "sim_memory.h"
#include "sim_stream.h"

namespace torch_fl::sim {
namespace {

const char* kind_name(tfl_memcpy_kind kind) {
  switch (kind) {
    case TFL_MEMCPY_HOST_TO_HOST:
      return "TFL_MEMCPY_HOST_TO_HOST";
    case TFL_MEMCPY_HOST_TO_DEVICE:
      return "TFL_MEMCPY_HOST_TO_DEVICE";
    case TFL_MEMCPY_DEVICE_TO_HOST:
      return "TFL_MEMCPY_DEVICE_TO_HOST";
    case TFL_MEMCPY_DEVICE_TO_DEVICE:
      return "TFL_MEMCPY_DEVICE_TO_DEVICE";
  }
  return "an unknown kind";
}

// One pointer argument of a copy, looked up once.
struct Operand {
  const char* role;  // "destination", "source", "pointer"
  const void* ptr;
  AllocationInfo alloc;
};

Operand operand(const char* role, const void* ptr) {
  return Operand{role, ptr, find_allocation(ptr)};
}

tfl_status check_in_bounds(const char* fn, const Operand& op, size_t n) {
  if (op.alloc.kind == TFL_POINTER_UNKNOWN || op.alloc.contains(op.ptr, n)) return TFL_OK;
  const uintptr_t offset = reinterpret_cast<uintptr_t>(op.ptr) - op.alloc.base;
  char owner[64];
  if (op.alloc.kind == TFL_POINTER_DEVICE) {
    std::snprintf(owner, sizeof owner, "flagos sim device %d", op.alloc.device);
  } else {
    std::snprintf(owner, sizeof owner, "pinned host memory");
  }
  return set_error(TFL_ERROR_INVALID_VALUE,
                   "%s: %s range %p + %zu bytes runs past the end of its allocation %p (%zu bytes, "
                   "at offset %zu, "
                   "%s)",
                   fn, op.role, op.ptr, n, reinterpret_cast<void*>(op.alloc.base), op.alloc.size,
                   static_cast<size_t>(offset), owner);
}

// `op` must be device memory of `device`. Pinned host memory there is a
// copy-kind error for memcpy, a plain bad pointer for peer copies and memset.
tfl_status check_device_operand(const char* fn, const Operand& op, int device, const char* why,
                                tfl_status pinned_status = TFL_ERROR_INVALID_MEMCPY_KIND) {
  switch (op.alloc.kind) {
    case TFL_POINTER_HOST:
      return set_error(
          pinned_status,
          "%s: %s %p is pinned host memory, but %s needs a device pointer of flagos sim device %d",
          fn, op.role, op.ptr, why, device);
    case TFL_POINTER_UNKNOWN:
      return set_error(
          TFL_ERROR_INVALID_POINTER,
          "%s: %s %p is not a device pointer (the sim runtime did not allocate it), but %s needs a "
          "device pointer of flagos sim device %d",
          fn, op.role, op.ptr, why, device);
    case TFL_POINTER_DEVICE:
      if (op.alloc.device != device) {
        return set_error(
            TFL_ERROR_INVALID_POINTER,
            "%s: %s %p is not a device pointer of flagos sim device %d (it belongs to device %d)",
            fn, op.role, op.ptr, device, op.alloc.device);
      }
      return TFL_OK;
  }
  return TFL_OK;
}

// `op` must be host memory (pageable or pinned).
tfl_status check_host_operand(const char* fn, const Operand& op, tfl_memcpy_kind kind) {
  if (op.alloc.kind != TFL_POINTER_DEVICE) return TFL_OK;
  return set_error(TFL_ERROR_INVALID_MEMCPY_KIND,
                   "%s: %s %p is a device pointer of flagos sim device %d, but %s "
                   "needs host memory there",
                   fn, op.role, op.ptr, op.alloc.device, kind_name(kind));
}

tfl_status copy(Call call, void* dst, const void* src, size_t n, tfl_memcpy_kind kind,
                tfl_stream stream, bool synchronous) {
  char fn[32];
  std::snprintf(fn, sizeof fn, "tfl_%s", call_name(call));
  if (kind < TFL_MEMCPY_HOST_TO_HOST || kind > TFL_MEMCPY_DEVICE_TO_DEVICE) {
    return set_error(TFL_ERROR_INVALID_VALUE, "%s: unknown copy kind %d", fn,
                     static_cast<int>(kind));
  }
  int device;
  tfl_status st = checked_current_device(fn, &device);
  if (st != TFL_OK) return st;
  // A synchronous copy waits for the device's work, which a capture forbids.
  if (synchronous && (st = check_unsafe_call(fn, device)) != TFL_OK) return st;
  StreamPtr s;
  // The synchronous copy is ordered after the default stream's earlier work.
  st = resolve_stream_on(fn, synchronous ? nullptr : stream, device, &s);
  if (st != TFL_OK) return st;
  if (n == 0) return TFL_OK;
  if (dst == nullptr || src == nullptr) {
    return set_error(TFL_ERROR_INVALID_VALUE, "%s: %s is NULL for a copy of %zu bytes", fn,
                     dst == nullptr ? "destination" : "source", n);
  }

  const bool dst_on_device =
      kind == TFL_MEMCPY_HOST_TO_DEVICE || kind == TFL_MEMCPY_DEVICE_TO_DEVICE;
  const bool src_on_device =
      kind == TFL_MEMCPY_DEVICE_TO_HOST || kind == TFL_MEMCPY_DEVICE_TO_DEVICE;
  const Operand d = operand("destination", dst);
  const Operand sr = operand("source", src);
  // Host-side checks first: arguments swapped for the kind read as a kind error.
  if (!dst_on_device && (st = check_host_operand(fn, d, kind)) != TFL_OK) return st;
  if (!src_on_device && (st = check_host_operand(fn, sr, kind)) != TFL_OK) return st;
  if (dst_on_device && (st = check_device_operand(fn, d, device, kind_name(kind))) != TFL_OK)
    return st;
  if (src_on_device && (st = check_device_operand(fn, sr, device, kind_name(kind))) != TFL_OK)
    return st;
  if ((st = check_in_bounds(fn, d, n)) != TFL_OK) return st;
  if ((st = check_in_bounds(fn, sr, n)) != TFL_OK) return st;

  // memmove: a D2D or H2H copy may overlap within one allocation.
  const auto move = [dst, src, n] { std::memmove(dst, src, n); };
  if (record_if_capturing(fn, *s, move, &st)) return st;
  const bool pageable_dst = d.alloc.kind == TFL_POINTER_UNKNOWN;
  const bool pageable_src = sr.alloc.kind == TFL_POINTER_UNKNOWN;
  if (synchronous || pageable_dst) {
    s->wait(s->enqueue(move));
  } else if (pageable_src) {
    auto staged = std::make_shared<std::vector<unsigned char>>(
        static_cast<const unsigned char*>(src), static_cast<const unsigned char*>(src) + n);
    s->enqueue([dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
  } else {
    s->enqueue(move);
  }
  return TFL_OK;
}

}  // namespace

tfl_status sim_memcpy(void* dst, const void* src, size_t n, tfl_memcpy_kind kind) {
  return entry(Call::memcpy, [&] { return copy(Call::memcpy, dst, src, n, kind, nullptr, true); });
}

tfl_status sim_memcpy_async(void* dst, const void* src, size_t n, tfl_memcpy_kind kind,
                            tfl_stream stream) {
  return entry(Call::memcpy_async,
               [&] { return copy(Call::memcpy_async, dst, src, n, kind, stream, false); });
}

tfl_status sim_memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device,
                                 size_t n, tfl_stream stream) {
  return entry(Call::memcpy_peer_async, [&] {
    const char* fn = "tfl_memcpy_peer_async";
    tfl_status st;
    if ((st = check_device(fn, dst_device)) != TFL_OK) return st;
    if ((st = check_device(fn, src_device)) != TFL_OK) return st;
    int device;
    if ((st = checked_current_device(fn, &device)) != TFL_OK) return st;
    StreamPtr s;
    if ((st = resolve_stream_on(fn, stream, device, &s)) != TFL_OK) return st;
    if (n == 0) return TFL_OK;
    const Operand d = operand("destination", dst);
    const Operand sr = operand("source", src);
    const char* why = "a peer copy";
    if ((st = check_device_operand(fn, d, dst_device, why, TFL_ERROR_INVALID_POINTER)) != TFL_OK)
      return st;
    if ((st = check_device_operand(fn, sr, src_device, why, TFL_ERROR_INVALID_POINTER)) != TFL_OK)
      return st;
    if ((st = check_in_bounds(fn, d, n)) != TFL_OK) return st;
    if ((st = check_in_bounds(fn, sr, n)) != TFL_OK) return st;
    const auto move = [dst, src, n] { std::memmove(dst, src, n); };
    if (record_if_capturing(fn, *s, move, &st)) return st;
    s->enqueue(move);
    return TFL_OK;
  });
}

tfl_status sim_memset_async(void* ptr, int value, size_t n, tfl_stream stream) {
  return entry(Call::memset_async, [&] {
    const char* fn = "tfl_memset_async";
    int device;
    tfl_status st;
    if ((st = checked_current_device(fn, &device)) != TFL_OK) return st;
    StreamPtr s;
    if ((st = resolve_stream_on(fn, stream, device, &s)) != TFL_OK) return st;
    if (n == 0) return TFL_OK;
    const Operand op = operand("pointer", ptr);
    if ((st = check_device_operand(fn, op, device, "memset", TFL_ERROR_INVALID_POINTER)) != TFL_OK)
      return st;
    if ((st = check_in_bounds(fn, op, n)) != TFL_OK) return st;
    const auto set = [ptr, value, n] { std::memset(ptr, value, n); };
    if (record_if_capturing(fn, *s, set, &st)) return st;
    s->enqueue(set);
    return TFL_OK;
  });
}

}  // namespace torch_fl::sim
