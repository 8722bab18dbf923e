#include "aclrt_event.h"

#include <string>

#include "aclrt_device.h"
#include "aclrt_errors.h"
#include "aclrt_stream.h"

namespace tfl_aclrt {

uint32_t acl_event_flags(uint32_t flags) {
  // SYNC: usable by aclrtStreamWaitEvent; TIME_LINE: records timestamps (costs a little).
  return ACL_EVENT_SYNC | ((flags & TFL_EVENT_DISABLE_TIMING) ? 0u : ACL_EVENT_TIME_LINE);
}

tfl_status rt_event_create(tfl_event* event, uint32_t flags) {
  if (!event) return fail(TFL_ERROR_INVALID_VALUE, "event_create: NULL out-parameter");
  if (flags & ~static_cast<uint32_t>(TFL_EVENT_DISABLE_TIMING))
    return fail(TFL_ERROR_INVALID_VALUE, "event_create: unknown flags " + std::to_string(flags));
  READY();
  CURRENT(device);
  aclrtEvent e = nullptr;
  ACL_CHECK(device, aclrtCreateEventWithFlag(&e, acl_event_flags(flags)));
  auto* ev = new tfl_event_st();
  ev->event = e;
  ev->device = device;
  ev->flags = flags;
  *event = ev;
  return TFL_OK;
}

tfl_status rt_event_destroy(tfl_event event) {
  if (!event) return fail(TFL_ERROR_INVALID_HANDLE, "event_destroy: NULL event");
  READY();
  {
    ENTER_DEVICE(event->device);
    ACL_CHECK(event->device, aclrtDestroyEvent(event->event));
  }
  delete event;
  return TFL_OK;
}

tfl_status rt_event_record(tfl_event event, tfl_stream stream) {
  if (!event) return fail(TFL_ERROR_INVALID_HANDLE, "event_record: NULL event");
  READY();
  RESOLVE(st, stream);
  std::lock_guard<std::mutex> lock(event->mutex);
  if (event->device != st->device) {
    // A CANN event lives in its device's context: recorded on another device's stream, it is
    // re-created there (a record replaces whatever the event held anyway).
    aclrtEvent fresh = nullptr;
    {
      ENTER_DEVICE(st->device);
      ACL_CHECK(st->device, aclrtCreateEventWithFlag(&fresh, acl_event_flags(event->flags)));
    }
    {
      DeviceScope old(event->device);
      (void)aclrtDestroyEvent(event->event);
    }
    event->event = fresh;
    event->device = st->device;
    event->recorded = false;
  }
  ENTER_DEVICE(st->device);
  ACL_CHECK(st->device, aclrtRecordEvent(event->event, st->stream));
  event->recorded = true;
  return TFL_OK;
}

tfl_status rt_event_synchronize(tfl_event event) {
  if (!event) return fail(TFL_ERROR_INVALID_HANDLE, "event_synchronize: NULL event");
  READY();
  std::lock_guard<std::mutex> lock(event->mutex);
  if (!event->recorded) return TFL_OK;
  ENTER_DEVICE(event->device);
  ACL_CHECK(event->device, aclrtSynchronizeEvent(event->event));
  return TFL_OK;
}

// Whether a recorded event's work has completed (aclrtQueryEventStatus: NOT_READY=0, COMPLETE=1).
tfl_status event_done(tfl_event_st* event, bool* done) {
  ENTER_DEVICE(event->device);
  aclrtEventRecordedStatus status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
  ACL_CHECK(event->device, aclrtQueryEventStatus(event->event, &status));
  *done = status == ACL_EVENT_RECORDED_STATUS_COMPLETE;
  return TFL_OK;
}

tfl_status rt_event_query(tfl_event event) {
  if (!event) return fail(TFL_ERROR_INVALID_HANDLE, "event_query: NULL event");
  READY();
  std::lock_guard<std::mutex> lock(event->mutex);
  if (!event->recorded) return TFL_OK;  // nothing pending, as with CUDA
  bool done = false;
  if (tfl_status s = event_done(event, &done)) return s;
  return done ? TFL_OK : TFL_ERROR_NOT_READY;
}

tfl_status rt_event_elapsed_ms(float* ms, tfl_event start, tfl_event end) {
  if (!ms || !start || !end)
    return fail(TFL_ERROR_INVALID_VALUE, "event_elapsed_ms: NULL argument");
  READY();
  if ((start->flags | end->flags) & TFL_EVENT_DISABLE_TIMING)
    return fail(TFL_ERROR_INVALID_VALUE, "event_elapsed_ms: an event was created without timing");
  std::unique_lock<std::mutex> l1(start->mutex, std::defer_lock);
  std::unique_lock<std::mutex> l2(end->mutex, std::defer_lock);
  if (start == end) {
    l1.lock();
  } else {
    std::lock(l1, l2);
  }
  if (!start->recorded || !end->recorded)
    return fail(TFL_ERROR_INVALID_VALUE, "event_elapsed_ms: an event was never recorded");
  for (tfl_event_st* e : {start, end}) {
    bool done = false;
    if (tfl_status s = event_done(e, &done)) return s;
    if (!done) return fail(TFL_ERROR_NOT_READY, "event_elapsed_ms: an event has not completed yet");
  }
  ENTER_DEVICE(end->device);
  float v = 0.0f;
  ACL_CHECK(end->device, aclrtEventElapsedTime(&v, start->event, end->event));
  *ms = v;
  return TFL_OK;
}

}  // namespace tfl_aclrt
