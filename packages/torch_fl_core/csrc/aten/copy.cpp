// _copy_from / _copy_from_and_resize / _local_scalar_dense: every copy that
// touches a flagos tensor arrives here before dtype casts, broadcasting and
// conj/neg resolution, so this file does all of that.
//
// Strategy: the runtime only moves bytes. Anything that is not a byte move
// (casts, broadcasting, strided layouts, conj/neg bits) is done by ATen's CPU
// copy_ on either a host staging tensor or, when the runtime's memory is host
// addressable, on CPU alias views of the device memory itself; a same-device
// copy on memory the host cannot address goes to the vendor's copy kernel
// where it has one (aten/vendor_copy.h).
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/_to_copy_native.h>
#include <torch/library.h>

#include "aten/copy.h"
#include "aten/vendor_copy.h"
#include "glue/caching_allocator.h"
#include "glue/graph_capture.h"
#include "glue/host_allocator.h"
#include "glue/runtime_access.h"
#include "glue/stream_pool.h"
#include "boxing/alias_pool.h"
#include "boxing/result_adoption.h"
#include "boxing/same_data.h"
#include "router/producer_order.h"

namespace torch_fl {
namespace {

using at::Tensor;

bool is_flagos(const Tensor& t) { return t.device().is_privateuseone(); }

bool dense(const Tensor& t) { return t.is_non_overlapping_and_dense(); }

// Same bytes mean the same values: dtype, bits, sizes and the strides that matter.
bool same_layout(const Tensor& a, const Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.is_conj() != b.is_conj() ||
      a.is_neg() != b.is_neg() || a.sizes() != b.sizes())
    return false;
  for (int64_t i = 0; i < a.dim(); ++i) {
    if (a.size(i) > 1 && a.stride(i) != b.stride(i)) return false;
  }
  return true;
}

size_t dense_bytes(const Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

// Bytes from t.data_ptr() to one past its last element (strides are >= 0).
size_t span_bytes(const Tensor& t) {
  if (t.numel() == 0) return 0;
  int64_t last = 0;
  for (int64_t i = 0; i < t.dim(); ++i) last += (t.size(i) - 1) * t.stride(i);
  return static_cast<size_t>(last + 1) * t.element_size();
}

void copy_bits(const Tensor& from, Tensor& to) {
  to._set_conj(from.is_conj());
  to._set_neg(from.is_neg());
}

// A CPU view of `t`'s geometry (and bits) over memory at `data`.
Tensor cpu_alias(const Tensor& t, void* data) {
  Tensor v = at::from_blob(data, t.sizes(), t.strides(), t.options().device(at::kCPU));
  copy_bits(t, v);
  return v;
}

// An empty CPU tensor with t's sizes, strides, dtype and bits (t dense).
Tensor cpu_like(const Tensor& t) {
  Tensor h = at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kCPU));
  copy_bits(t, h);
  return h;
}

// An empty contiguous flagos tensor with `like`'s sizes/dtype/bits on `device`.
Tensor device_contiguous(const Tensor& like, c10::DeviceIndex device) {
  CurrentDeviceScope scope(device);
  Tensor d = at::empty(like.sizes(), like.options().device(c10::Device(c10::kPrivateUse1, device)));
  copy_bits(like, d);
  return d;
}

void sync(c10::DeviceIndex device, tfl_stream stream) {
  TFL_CALL(device, stream_synchronize, stream);
}

void memcpy_on(c10::DeviceIndex device, void* dst, const void* src, size_t n, tfl_memcpy_kind kind,
               tfl_stream stream) {
  if (n == 0) return;
  TFL_CALL(device, memcpy_async, dst, src, n, kind, stream);
}

// Byte-level staging of a (possibly strided) device tensor's whole span.
Tensor host_copy_of_span(const Tensor& t, tfl_stream stream, Tensor* buffer) {
  const size_t n = span_bytes(t);
  *buffer = at::empty({static_cast<int64_t>(n)}, at::TensorOptions().dtype(at::kByte));
  memcpy_on(t.device().index(), buffer->data_ptr(), t.data_ptr(), n, TFL_MEMCPY_DEVICE_TO_HOST,
            stream);
  sync(t.device().index(), stream);
  return cpu_alias(t, buffer->data_ptr());
}

// src and dst on the same flagos device; any dtype, layout, bits.
void copy_same_device(const Tensor& src, const Tensor& dst) {
  const auto device = dst.device().index();
  CurrentDeviceScope scope(device);
  tfl_stream stream = native_stream(current_stream(device));
  if (dense(src) && dense(dst) && same_layout(src, dst)) {
    memcpy_on(device, dst.data_ptr(), src.data_ptr(), dense_bytes(dst), TFL_MEMCPY_DEVICE_TO_DEVICE,
              stream);
    return;
  }
  if (has_capability(TFL_CAP_HOST_ADDRESSABLE_MEMORY)) {
    if (C10_UNLIKELY(records_host_work())) {
      // Inside a graph capture: the copy is host work the stream runs at each
      // replay (the tensors stay alive with the graph).
      capture_sink()->record(
          [src, dst] { cpu_alias(dst, dst.data_ptr()).copy_(cpu_alias(src, src.data_ptr())); }, {});
      return;
    }
    // A host copy cannot enqueue on the stream: wait for its earlier work,
    // then run ATen's CPU copy on the same memory.
    sync(device, stream);
    cpu_alias(dst, dst.data_ptr()).copy_(cpu_alias(src, src.data_ptr()));
    return;
  }
  // Device memory the host cannot touch: the vendor's copy kernel on the
  // stream where it has one; else stage both spans (dst's too, so bytes
  // between its elements keep their values), copy on the host, write back.
  if (vendor_copy(src, dst)) return;
  check_not_capturing("a strided copy on a device the host cannot address (staged on the host)");
  Tensor src_buf, dst_buf;
  Tensor hsrc = host_copy_of_span(src, stream, &src_buf);
  Tensor hdst = host_copy_of_span(dst, stream, &dst_buf);
  hdst.copy_(hsrc);
  memcpy_on(device, dst.data_ptr(), dst_buf.data_ptr(), span_bytes(dst), TFL_MEMCPY_HOST_TO_DEVICE,
            stream);
  sync(device, stream);
}

void copy_host_to_device(const Tensor& src, const Tensor& dst, bool non_blocking) {
  const auto device = dst.device().index();
  if (!dense(dst)) {
    Tensor tmp = device_contiguous(dst, device);
    copy_host_to_device(src, tmp, non_blocking);
    copy_same_device(tmp, dst);
    return;
  }
  CurrentDeviceScope scope(device);
  const c10::Stream cstream = current_stream(device);
  tfl_stream stream = native_stream(cstream);
  const bool direct = dense(src) && same_layout(src, dst);
  if (C10_UNLIKELY(capturing_device() >= 0) &&
      !(non_blocking && direct && is_pinned_ptr(src.data_ptr()))) {
    check_not_capturing("a copy from host memory that is not pinned, or not non_blocking,");
  }
  Tensor host = direct ? src : cpu_like(dst);
  if (!direct) host.copy_(src);
  memcpy_on(device, dst.data_ptr(), host.data_ptr(), dense_bytes(dst), TFL_MEMCPY_HOST_TO_DEVICE,
            stream);
  if (non_blocking && direct && is_pinned_ptr(host.data_ptr())) {
    // The pinned block must not be reused before this copy has read it.
    record_host_event(host.data_ptr(), host.storage().data_ptr().get_context(), cstream);
  } else {
    sync(device, stream);
  }
}

void copy_device_to_host(const Tensor& src, const Tensor& dst, bool non_blocking) {
  const auto device = src.device().index();
  if (!dense(src)) {
    Tensor tmp = device_contiguous(src, device);
    copy_same_device(src, tmp);
    copy_device_to_host(tmp, dst, non_blocking);
    return;
  }
  if (C10_UNLIKELY(capturing_device() >= 0) &&
      !(non_blocking && dense(dst) && same_layout(src, dst) && is_pinned_ptr(dst.data_ptr()))) {
    check_not_capturing("a copy to host memory that is not pinned, or not non_blocking,");
  }
  CurrentDeviceScope scope(device);
  const c10::Stream cstream = current_stream(device);
  tfl_stream stream = native_stream(cstream);
  if (dense(dst) && same_layout(src, dst)) {
    memcpy_on(device, dst.data_ptr(), src.data_ptr(), dense_bytes(src), TFL_MEMCPY_DEVICE_TO_HOST,
              stream);
    // As on CUDA, a non-blocking copy into pinned memory is complete only
    // after the stream is synchronized; until then the pinned block must not
    // be handed out again if the tensor dies first.
    if (non_blocking && is_pinned_ptr(dst.data_ptr())) {
      record_host_event(dst.data_ptr(), dst.storage().data_ptr().get_context(), cstream);
    } else {
      sync(device, stream);
    }
    return;
  }
  Tensor host = cpu_like(src);
  memcpy_on(device, host.data_ptr(), src.data_ptr(), dense_bytes(src), TFL_MEMCPY_DEVICE_TO_HOST,
            stream);
  sync(device, stream);
  dst.copy_(host);
}

void enqueue_barrier(c10::DeviceIndex waiter_device, tfl_stream waiter,
                     c10::DeviceIndex signal_device, tfl_stream signal) {
  tfl_event ev = nullptr;
  {
    CurrentDeviceScope scope(signal_device);
    TFL_CALL(signal_device, event_create, &ev, TFL_EVENT_DISABLE_TIMING);
    TFL_CALL(signal_device, event_record, ev, signal);
  }
  {
    CurrentDeviceScope scope(waiter_device);
    const tfl_status st = runtime().stream_wait_event(waiter, ev);
    runtime().event_destroy(ev);  // the runtime keeps it alive for pending waits
    if (st != TFL_OK) throw_runtime_error(st, "stream_wait_event", waiter_device);
  }
}

// Peer copy of identical layouts; as on CUDA, a two-way barrier between the
// source device's and the destination device's current streams.
void copy_peer_raw(const Tensor& src, const Tensor& dst, bool non_blocking) {
  const auto sdev = src.device().index();
  const auto ddev = dst.device().index();
  TORCH_CHECK(has_capability(TFL_CAP_PEER_COPY), "flagos: runtime '", runtime_name(),
              "' cannot copy between devices (", src.device(), " -> ", dst.device(), ")");
  tfl_stream sstream = native_stream(current_stream(sdev));
  tfl_stream dstream = native_stream(current_stream(ddev));
  enqueue_barrier(sdev, sstream, ddev, dstream);
  {
    CurrentDeviceScope scope(sdev);
    const size_t n = dense_bytes(dst);
    if (n > 0) {
      TFL_CALL(sdev, memcpy_peer_async, dst.data_ptr(), ddev, src.data_ptr(), sdev, n, sstream);
    }
  }
  enqueue_barrier(ddev, dstream, sdev, sstream);
  if (!non_blocking) {
    CurrentDeviceScope scope(ddev);
    sync(ddev, dstream);
  }
}

void copy_between_devices(const Tensor& src, const Tensor& dst, bool non_blocking) {
  if (dense(src) && dense(dst) && same_layout(src, dst)) {
    copy_peer_raw(src, dst, non_blocking);
    return;
  }
  // Convert on the source device into dst's dtype/bits, move raw bytes, then
  // lay them out on the destination device.
  Tensor on_src = device_contiguous(dst, src.device().index());
  copy_same_device(src, on_src);
  if (dense(dst) && same_layout(on_src, dst)) {
    copy_peer_raw(on_src, dst, non_blocking);
    return;
  }
  Tensor on_dst = device_contiguous(dst, dst.device().index());
  copy_peer_raw(on_src, on_dst, false);
  copy_same_device(on_dst, dst);
}

// Mirror mode (delegate runtime): flagos memory is the mirrored backend's
// memory and the flagos stream its stream, so the mirrored copy_ does it all
// (casts, strides, conj/neg, pinned non_blocking, peer) on alias views.
Tensor mirror_view(const Tensor& t, c10::DeviceType type) {
  if (!is_flagos(t)) return t;
  const c10::Device device(type, t.device().index());
  return boxing::pooled_alias(t, device,
                              c10::computeDispatchKey(std::nullopt, std::nullopt, device));
}

}  // namespace

Tensor copy_from(const Tensor& self, const Tensor& dst, bool non_blocking) {
  TORCH_CHECK(self.defined() && dst.defined(), "flagos: copy_ of an undefined tensor");
  check_not_in_bad_fork();  // mirror mode copies never pass through the runtime table
  if (self.sizes() != dst.sizes()) {
    // copy_'s TensorIterator check on CPU and CUDA, with its messages (an
    // empty destination included): the source broadcasts to dst's shape.
    const auto shape = at::infer_size_dimvector(dst.sizes(), self.sizes());
    TORCH_CHECK(c10::IntArrayRef(shape) == dst.sizes(), "output with shape ", dst.sizes(),
                " doesn't match the broadcast shape ", c10::IntArrayRef(shape));
  }
  if (dst.numel() == 0 || boxing::same_data(dst, self)) return dst;
  // ATen's copy_ hands devices it does not know to _copy_from before its
  // TensorIterator, whose checks CPU and CUDA copies get: the written tensor
  // may not overlap itself or the source (copy_ already returned for a source
  // that is the same tensor or the same view of the same memory).
  if (is_flagos(dst)) {
    at::assert_no_internal_overlap(dst);
    if (is_flagos(self)) at::assert_no_partial_overlap(dst, self);
  }
  const auto mirror = mirror_device_type();
  // On the delegate runtime the mirrored device's tensors are the same kind of
  // memory: copies between them and flagos are that device's own copies.
  auto reachable = [&](const Tensor& t) {
    return is_flagos(t) || t.device().is_cpu() || (mirror && t.device().type() == *mirror);
  };
  TORCH_CHECK(reachable(self) && reachable(dst), "flagos: cannot copy from ", self.device(), " to ",
              dst.device(), " (runtime '", runtime_name(), "' copies between flagos and ",
              mirror ? "cpu or " + c10::DeviceTypeName(*mirror, true) : std::string("cpu"),
              " tensors)");
  // The runtime's copies are native producers: on a runtime with unordered
  // producers, drain Triton work queued on the streams involved first, so a
  // (blocking) device-to-host copy never reads a buffer ahead of its kernel.
  if (is_flagos(self)) order_native_producer(self.device().index());
  if (is_flagos(dst) && dst.device() != self.device()) order_native_producer(dst.device().index());
  if (mirror) {
    mirror_view(dst, *mirror).copy_(mirror_view(self, *mirror), non_blocking);
    return dst;
  }
  // copy_ broadcasts src to dst; do it up front so every path sees one shape.
  const Tensor src = self.sizes() == dst.sizes() ? self : self.expand(dst.sizes());
  if (is_flagos(src) && is_flagos(dst)) {
    if (src.device() == dst.device()) {
      copy_same_device(src, dst);
    } else {
      check_not_capturing("a copy between two flagos devices");
      copy_between_devices(src, dst, non_blocking);
    }
  } else if (is_flagos(dst)) {
    copy_host_to_device(src, dst, non_blocking);
  } else {
    copy_device_to_host(src, dst, non_blocking);
  }
  return dst;
}

namespace {

Tensor copy_from_and_resize(const Tensor& self, const Tensor& dst) {
  dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  check_not_in_bad_fork();
  if (const auto type = mirror_device_type()) return mirror_view(self, *type).item();
  check_not_capturing("item() (a copy to the host)");
  // Same shape as self ([1], [1, 1], ...): item() of any one-element tensor.
  Tensor host = at::empty(self.sizes(), self.options().device(at::kCPU));
  order_native_producer(self.device().index());
  copy_device_to_host(self, host, false);
  return host.item();
}

// _to_copy (tensor.to(dtype/device), and every autocast cast). In mirror mode
// a flagos source is handed to the mirrored backend's own _to_copy on an alias
// view, and a result on a flagos device joins flagos as it is (zero-copy, see
// boxing::to_flagos): one call instead of ATen's composite (a flagos allocation,
// then copy_ -> _copy_from -> the mirrored copy_ on two alias views). Anything
// else (no mirror, another layout, a host target, whose non_blocking form
// wants flagos pinned memory) takes ATen's composite.
Tensor to_copy(const Tensor& self, std::optional<at::ScalarType> dtype,
               std::optional<at::Layout> layout, std::optional<c10::Device> device,
               std::optional<bool> pin_memory, bool non_blocking,
               std::optional<c10::MemoryFormat> memory_format) {
  const auto type = mirror_device_type();
  const c10::Device target = device.value_or(self.device());
  if (!type || !is_flagos(self) || (layout && *layout != c10::kStrided) ||
      pin_memory.value_or(false) || !target.is_privateuseone()) {
    return at::native::_to_copy(self, dtype, layout, device, pin_memory, non_blocking,
                                memory_format);
  }
  order_native_producer(self.device().index());
  // No index: the current device, which is the same on both sides in mirror mode.
  const c10::Device mirror_target(*type, target.has_index() ? target.index() : -1);
  // ATen's own composite on the alias (what the dispatcher would pick for it),
  // without a second trip through the dispatcher.
  Tensor out = at::native::_to_copy(mirror_view(self, *type), dtype, layout, mirror_target,
                                    pin_memory, non_blocking, memory_format);
  return boxing::to_flagos(out, out.device().index(), *type);
}

// Tensor.record_stream: the caching allocator must not reuse this block
// before the work queued on `stream` so far is done.
void record_stream(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1, "flagos: record_stream of ",
              self.device(), " tensor on a ", stream.device(), " stream");
  caching_allocator()->recordStream(self.storage().data_ptr(), stream);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
  m.impl("_to_copy", TORCH_FN(to_copy));
  m.impl("record_stream", TORCH_FN(record_stream));
}

// copy_ hands flagos copies to _copy_from with conj/neg bits still set, and
// copy_from resolves them itself. Without these fallthroughs the Conjugate and
// Negative fallbacks would materialise the source with clone(), which calls
// copy_ -> _copy_from again: infinite recursion.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace
}  // namespace torch_fl
