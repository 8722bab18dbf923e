// Events (the framework's): recorded on an inline stream they complete at once; they also mark
// how much of the stream's foreign work lies before them.
#include "tops_state.h"

using namespace tops_emu;

itopsEvent_t::itopsEvent_t(unsigned flags)
    : emu_kit::Event(flags, (flags & topsEventDisableTiming) == 0) {}

namespace {
itopsEvent_t* live(topsEvent_t event) { return event && S().events.find(event) ? event : nullptr; }
// Foreign work recorded before the event has not all run.
bool behind(const itopsEvent_t* e) { return e->stream && e->stream->done_seq < e->wait_seq; }
}  // namespace

EMU_API topsError_t topsEventCreateWithFlags(topsEvent_t* event, unsigned flags) {
  ENTER("topsEventCreateWithFlags");
  if (!event || flags > (topsEventBlockingSync | topsEventDisableTiming))
    return fail(topsErrorInvalidValue);
  *event = S().events.add(std::make_shared<itopsEvent_t>(flags));
  return topsSuccess;
}

EMU_API topsError_t topsEventCreate(topsEvent_t* event) {
  return topsEventCreateWithFlags(event, topsEventDefault);
}

EMU_API topsError_t topsEventRecord(topsEvent_t event, topsStream_t stream) {
  ENTER("topsEventRecord");
  itopsStream_t* s = stream_of(stream);
  if (!s || !live(event)) return fail(topsErrorInvalidHandle);
  if (s->device() != t_device) return fail(topsErrorInvalidValue);
  event->record(*s, "topsEventRecord");
  event->stream = s;
  event->wait_seq = s->next_seq - 1;
  return topsSuccess;
}

EMU_API topsError_t topsEventSynchronize(topsEvent_t event) {
  ENTER("topsEventSynchronize");
  if (!live(event)) return fail(topsErrorInvalidHandle);
  if (event->armed() && event->stream) drain(event->stream, event->wait_seq);
  return topsSuccess;
}

EMU_API topsError_t topsEventQuery(topsEvent_t event) {
  ENTER("topsEventQuery");
  if (!live(event)) return fail(topsErrorInvalidHandle);
  if (event->armed() && behind(event)) {
    drain(event->stream, event->wait_seq);
    return topsErrorNotReady;
  }
  return topsSuccess;
}

EMU_API topsError_t topsEventDestroy(topsEvent_t event) {
  ENTER("topsEventDestroy");
  if (!event || !S().events.remove(event)) return fail(topsErrorInvalidHandle);
  return topsSuccess;
}

EMU_API topsError_t topsEventElapsedTime(float* ms, topsEvent_t start, topsEvent_t stop) {
  ENTER("topsEventElapsedTime");
  if (!ms) return fail(topsErrorInvalidValue);
  if (!live(start) || !live(stop)) return fail(topsErrorInvalidHandle);
  if (!start->timing() || !stop->timing()) return fail(topsErrorInvalidHandle);
  if (!start->armed() || !stop->armed()) return fail(topsErrorInvalidHandle);
  if (behind(start) || behind(stop)) return fail(topsErrorNotReady);
  const double t0 = static_cast<double>(start->stamp_ns());
  const double t1 = static_cast<double>(stop->stamp_ns());
  *ms = static_cast<float>((t1 - t0) / 1e6);
  return topsSuccess;
}
