// Events (the framework's): recorded on a stream, complete when the stream passes the record.
#include "acl_capture.h"
#include "acl_state.h"

using namespace acl_emu;

namespace {
aclError create(aclrtEvent* event, uint32_t flag, bool timing) {
  *event = S().events.add(std::make_shared<emu_kit::Event>(flag, timing));
  return ACL_SUCCESS;
}
}  // namespace

extern "C" {

aclError aclrtCreateEventWithFlag(aclrtEvent* event, uint32_t flag) {
  ACL_ENTER("aclrtCreateEventWithFlag");
  if (!event) return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateEventWithFlag: event is NULL");
  if (flag & ~(ACL_EVENT_SYNC | ACL_EVENT_CAPTURE_STREAM_PROGRESS | ACL_EVENT_TIME_LINE))
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateEventWithFlag: unknown flag 0x%x", flag);
  return create(event, flag, (flag & ACL_EVENT_TIME_LINE) != 0);
}

aclError aclrtCreateEvent(aclrtEvent* event) {
  ACL_ENTER("aclrtCreateEvent");
  if (!event) return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateEvent: event is NULL");
  return create(event, 0, true);  // the default event carries a timestamp
}

aclError aclrtDestroyEvent(aclrtEvent event) {
  ACL_ENTER("aclrtDestroyEvent");
  // Queued records / waits hold their own reference, so destroying early is safe.
  if (!S().events.remove(event))
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtDestroyEvent: %p is not a live event", event);
  return ACL_SUCCESS;
}

aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
  ACL_ENTER("aclrtRecordEvent");
  EventRef ev = lookup_event(event);
  if (!ev) return fail(ACL_ERROR_INVALID_PARAM, "aclrtRecordEvent: %p is not a live event", event);
  ACL_NEED_STREAM("aclrtRecordEvent", st, stream);
  return record_event("aclrtRecordEvent", ev, st);
}

aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream) {
  ACL_ENTER("aclrtResetEvent");
  EventRef ev = lookup_event(event);
  if (!ev) return fail(ACL_ERROR_INVALID_PARAM, "aclrtResetEvent: %p is not a live event", event);
  ACL_NEED_STREAM("aclrtResetEvent", st, stream);
  ev->reset();
  return ACL_SUCCESS;
}

aclError aclrtQueryEvent(aclrtEvent event, aclrtEventStatus* status) {
  ACL_ENTER("aclrtQueryEvent");
  if (!status) return fail(ACL_ERROR_INVALID_PARAM, "aclrtQueryEvent: status is NULL");
  EventRef ev = lookup_event(event);
  if (!ev) return fail(ACL_ERROR_INVALID_PARAM, "aclrtQueryEvent: %p is not a live event", event);
  if (aclError e = check_event_call("aclrtQueryEvent", ev)) return e;
  *status = ev->complete() ? ACL_EVENT_STATUS_COMPLETE : ACL_EVENT_STATUS_NOT_READY;
  return ACL_SUCCESS;
}

aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus* status) {
  ACL_ENTER("aclrtQueryEventStatus");
  if (!status) return fail(ACL_ERROR_INVALID_PARAM, "aclrtQueryEventStatus: status is NULL");
  EventRef ev = lookup_event(event);
  if (!ev)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtQueryEventStatus: %p is not a live event", event);
  if (aclError e = check_event_call("aclrtQueryEventStatus", ev)) return e;
  // A never-recorded event has not been recorded-complete: NOT_READY (0).
  *status =
      ev->complete() ? ACL_EVENT_RECORDED_STATUS_COMPLETE : ACL_EVENT_RECORDED_STATUS_NOT_READY;
  return ACL_SUCCESS;
}

aclError aclrtSynchronizeEvent(aclrtEvent event) {
  ACL_ENTER("aclrtSynchronizeEvent");
  EventRef ev = lookup_event(event);
  if (!ev)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtSynchronizeEvent: %p is not a live event", event);
  if (aclError e = check_event_call("aclrtSynchronizeEvent", ev)) return e;
  std::string msg;
  const aclError e = ev->synchronize(&msg);
  return surface("aclrtSynchronizeEvent", e, msg);
}

aclError aclrtEventElapsedTime(float* ms, aclrtEvent startEvent, aclrtEvent endEvent) {
  ACL_ENTER("aclrtEventElapsedTime");
  if (!ms) return fail(ACL_ERROR_INVALID_PARAM, "aclrtEventElapsedTime: ms is NULL");
  EventRef a = lookup_event(startEvent), b = lookup_event(endEvent);
  if (!a || !b)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtEventElapsedTime: %p is not a live event",
                a ? endEvent : startEvent);
  if (!a->timing() || !b->timing())
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtEventElapsedTime: both events need timestamps (aclrtCreateEvent or "
                "ACL_EVENT_TIME_LINE)");
  if (!a->complete() || !b->complete())
    return fail(ACL_ERROR_RT_EVENT_NOT_COMPLETE,
                "aclrtEventElapsedTime: %s event not recorded or not yet complete",
                a->complete() ? "end" : "start");
  const uint64_t t0 = a->stamp_ns(), t1 = b->stamp_ns();
  *ms = static_cast<float>((static_cast<double>(t1) - static_cast<double>(t0)) / 1e6);
  return ACL_SUCCESS;
}

}  // extern "C"
