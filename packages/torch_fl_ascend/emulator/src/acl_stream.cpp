// Streams: each runs its work in order on its own worker thread (the framework's worker stream).
// A capturing stream (acl_capture.h) records its tasks instead.
#include "acl_capture.h"
#include "acl_state.h"

using namespace acl_emu;

extern "C" {

aclError aclrtCreateStreamWithConfig(aclrtStream* stream, uint32_t priority, uint32_t flag) {
  ACL_ENTER("aclrtCreateStreamWithConfig");
  ACL_NEED_DEVICE("aclrtCreateStreamWithConfig", dev);
  if (!stream) return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateStreamWithConfig: stream is NULL");
  if (priority > 7)
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtCreateStreamWithConfig: priority %u outside [0 (greatest), 7]", priority);
  if (flag & ~(ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC))
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateStreamWithConfig: unknown flag 0x%x", flag);
  *stream =
      S().streams.add(std::make_shared<AclStream>(dev, false, static_cast<int32_t>(priority)));
  return ACL_SUCCESS;
}

aclError aclrtCreateStream(aclrtStream* stream) {
  ACL_ENTER("aclrtCreateStream");
  ACL_NEED_DEVICE("aclrtCreateStream", dev);
  if (!stream) return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateStream: stream is NULL");
  *stream = S().streams.add(std::make_shared<AclStream>(dev, false, 0));
  return ACL_SUCCESS;
}

aclError aclrtDestroyStream(aclrtStream stream) {
  ACL_ENTER("aclrtDestroyStream");
  if (stream == nullptr)
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtDestroyStream: the default stream is not destroyable");
  if (StreamRef live = S().streams.find(stream)) {
    if (aclError e = check_stream_call("aclrtDestroyStream", live)) return e;
  }
  StreamRef st = S().streams.remove(stream);
  if (!st)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream: %p is not a live stream", stream);
  // Queued work still runs to completion first.
  std::string ignored;
  st->drain(&ignored);
  st->shutdown();
  return ACL_SUCCESS;
}

aclError aclrtSynchronizeStream(aclrtStream stream) {
  ACL_ENTER("aclrtSynchronizeStream");
  ACL_NEED_STREAM("aclrtSynchronizeStream", st, stream);
  if (aclError e = check_stream_call("aclrtSynchronizeStream", st)) return e;
  return sync_stream("aclrtSynchronizeStream", st);
}

aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus* status) {
  ACL_ENTER("aclrtStreamQuery");
  if (!status) return fail(ACL_ERROR_INVALID_PARAM, "aclrtStreamQuery: status is NULL");
  ACL_NEED_STREAM("aclrtStreamQuery", st, stream);
  if (aclError e = check_stream_call("aclrtStreamQuery", st)) return e;
  *status = st->idle() ? ACL_STREAM_STATUS_COMPLETE : ACL_STREAM_STATUS_NOT_READY;
  return ACL_SUCCESS;
}

aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
  ACL_ENTER("aclrtStreamWaitEvent");
  ACL_NEED_STREAM("aclrtStreamWaitEvent", st, stream);
  EventRef ev = lookup_event(event);
  if (!ev)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtStreamWaitEvent: %p is not a live event", event);
  aclError rc = ACL_SUCCESS;
  if (capture_wait_event("aclrtStreamWaitEvent", st, ev, &rc)) return rc;
  ev->block(*st, "aclrtStreamWaitEvent");
  return ACL_SUCCESS;
}

}  // extern "C"
