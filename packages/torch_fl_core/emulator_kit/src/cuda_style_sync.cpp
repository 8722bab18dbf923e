// The CUDA-style runtime's streams and events. Waits happen outside the runtime's lock: worker
// streams finish their work meanwhile, and other threads keep calling in.
#include <algorithm>

#include "emu_kit/cuda_style.h"

namespace emu_kit {

int CudaRuntime::stream_create(const char* fn, CudaStream** stream, unsigned flags, int priority) {
  if (int e = enter(fn)) return e;
  if (!stream || flags > cuda::kStreamNonBlocking) return fail(cuda::kInvalidValue);
  Lock lk(mu_);
  const int dev = current_device();
  if (!valid_device(dev)) return fail(cuda::kNoDevice);
  const int p = std::min(std::max(priority, cuda::kGreatestPriority), cuda::kLeastPriority);
  *stream = streams_.add(make_stream(dev, false, p));
  return cuda::kSuccess;
}

int CudaRuntime::stream_destroy(const char* fn, CudaStream* stream) {
  if (int e = enter(fn)) return e;
  CudaStreamRef s;
  {
    Lock lk(mu_);
    s = stream ? streams_.find(stream) : nullptr;
    if (!s || s->is_default()) return fail(cuda::kInvalidHandle);
    if (Verdict v = captures_.stream_call(s.get(), fn)) return refused(v);
    lane_drain(*s);
    streams_.remove(stream);
  }
  // Its queued work still runs first.
  std::string ignored;
  s->drain(&ignored);
  s->shutdown();
  return cuda::kSuccess;
}

int CudaRuntime::stream_query(const char* fn, CudaStream* stream) {
  if (int e = enter(fn)) return e;
  Lock lk(mu_);
  CudaStreamRef s = stream_locked(stream);
  if (!s) return fail(cuda::kInvalidHandle);
  if (Verdict v = captures_.stream_call(s.get(), fn)) return refused(v);
  if (lane_busy(*s)) {
    lane_drain(*s);  // the device makes progress; the caller sees it next time
    return cuda::kNotReady;
  }
  return s->idle() ? cuda::kSuccess : cuda::kNotReady;
}

int CudaRuntime::stream_synchronize(const char* fn, CudaStream* stream) {
  if (int e = enter(fn)) return e;
  CudaStreamRef s;
  {
    Lock lk(mu_);
    s = stream_locked(stream);
    if (!s) return fail(cuda::kInvalidHandle);
    if (Verdict v = captures_.stream_call(s.get(), fn)) return refused(v);
    lane_drain(*s);
  }
  return drain(s);
}

int CudaRuntime::stream_wait_event(const char* fn, CudaStream* stream, Event* event) {
  if (int e = enter(fn)) return e;
  Lock lk(mu_);
  CudaStreamRef s = stream_locked(stream);
  std::shared_ptr<Event> ev = event_locked(event);
  if (!s || !ev) return fail(cuda::kInvalidHandle);
  Verdict v;
  if (captures_.wait_event(s, fn, ev, &v)) return v ? refused(v) : cuda::kSuccess;
  // Everything before the event becomes visible to work queued on `stream` after this.
  if (ev->armed()) lane_drain_to(*ev);
  ev->block(*s, fn);
  return cuda::kSuccess;
}

int CudaRuntime::event_create(const char* fn, Event** event, unsigned flags) {
  if (int e = enter(fn)) return e;
  if (!event || flags > (cuda::kEventBlockingSync | cuda::kEventDisableTiming))
    return fail(cuda::kInvalidValue);
  Lock lk(mu_);
  *event = events_.add(make_event(flags, (flags & cuda::kEventDisableTiming) == 0));
  return cuda::kSuccess;
}

int CudaRuntime::event_record(const char* fn, Event* event, CudaStream* stream) {
  if (int e = enter(fn)) return e;
  Lock lk(mu_);
  CudaStreamRef s = stream_locked(stream);
  std::shared_ptr<Event> ev = event_locked(event);
  if (!s || !ev) return fail(cuda::kInvalidHandle);
  if (s->device() != current_device()) return fail(cuda::kInvalidValue);
  Verdict v;
  if (captures_.record_event(s.get(), fn, ev, &v)) return v ? refused(v) : cuda::kSuccess;
  ev->record(*s, fn);
  recorded(*ev, s);
  return cuda::kSuccess;
}

int CudaRuntime::event_synchronize(const char* fn, Event* event) {
  if (int e = enter(fn)) return e;
  std::shared_ptr<Event> ev;
  {
    Lock lk(mu_);
    ev = event_locked(event);
    if (!ev) return fail(cuda::kInvalidHandle);
    if (Verdict v = captures_.event_call(ev.get(), fn)) return refused(v);
    if (ev->armed()) lane_drain_to(*ev);
  }
  std::string msg;
  const int st = ev->synchronize(&msg);
  return st == cuda::kSuccess ? st : fail(st);
}

int CudaRuntime::event_query(const char* fn, Event* event) {
  if (int e = enter(fn)) return e;
  Lock lk(mu_);
  std::shared_ptr<Event> ev = event_locked(event);
  if (!ev) return fail(cuda::kInvalidHandle);
  if (Verdict v = captures_.event_call(ev.get(), fn)) return refused(v);
  if (!ev->armed()) return cuda::kSuccess;
  if (lane_behind(*ev)) {
    lane_drain_to(*ev);
    return cuda::kNotReady;
  }
  return ev->complete() ? cuda::kSuccess : cuda::kNotReady;
}

int CudaRuntime::event_destroy(const char* fn, Event* event) {
  if (int e = enter(fn)) return e;
  // Queued records and waits hold the event themselves: destroying it early is safe.
  if (!event || !events_.remove(event)) return fail(cuda::kInvalidHandle);
  return cuda::kSuccess;
}

int CudaRuntime::event_elapsed(const char* fn, float* ms, Event* start, Event* stop) {
  if (int e = enter(fn)) return e;
  if (!ms) return fail(cuda::kInvalidValue);
  Lock lk(mu_);
  std::shared_ptr<Event> a = event_locked(start), b = event_locked(stop);
  if (!a || !b) return fail(cuda::kInvalidHandle);
  if (Verdict v = captures_.event_call(a.get(), fn)) return refused(v);
  if (Verdict v = captures_.event_call(b.get(), fn)) return refused(v);
  // CUDA's answer for an event made with DisableTiming, or never recorded.
  if (!a->timing() || !b->timing() || !a->armed() || !b->armed()) return fail(cuda::kInvalidHandle);
  if (lane_behind(*a) || lane_behind(*b) || !a->complete() || !b->complete())
    return fail(cuda::kNotReady);
  const double t0 = static_cast<double>(a->stamp_ns());
  const double t1 = static_cast<double>(b->stamp_ns());
  *ms = static_cast<float>((t1 - t0) / 1e6);
  return cuda::kSuccess;
}

}  // namespace emu_kit
