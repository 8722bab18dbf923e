#include "aclrt_stream.h"

#include <torch_fl/kit/runtime_default_streams.h>
#include <torch_fl/kit/runtime_stream_order.h>

#include <string>

#include "aclrt_device.h"
#include "aclrt_errors.h"
#include "aclrt_event.h"
#include "aclrt_fork.h"
#include "aclrt_host_functions.h"

namespace tfl_aclrt {

namespace {

torch_fl::kit::DefaultStreams<tfl_stream_st> g_default;  // made with their device current

}  // namespace

void reset_default_streams(int count) { g_default.reset(count); }

tfl_status new_stream(int device, tfl_stream_st** out) {
  aclrtStream s = nullptr;
  // Priority is not passed on: CANN's training parts take only 0 (a reserved value).
  // FAST_LAUNCH: resources reserved at creation instead of on each first launch.
  ACL_CHECK(device, aclrtCreateStreamWithConfig(&s, 0, ACL_STREAM_FAST_LAUNCH));
  auto* st = new tfl_stream_st();
  st->stream = s;
  st->device = device;
  *out = st;
  return TFL_OK;
}

// The runtime's default stream of `device`: a created stream rather than CANN's NULL stream,
// so it can be subscribed for host functions and ordered like any other stream.
tfl_status default_stream(int device, tfl_stream_st** out) {
  if (tfl_status s = check_device(device)) return s;
  return g_default.get(device, out, [](int device, tfl_stream_st** made) {
    ENTER_DEVICE(device);
    return new_stream(device, made);
  });
}

tfl_status resolve(tfl_stream s, tfl_stream_st** out) {
  if (s) {
    *out = s;
    return TFL_OK;
  }
  CURRENT(device);
  return default_stream(device, out);
}

// The peer event barrier's SDK steps (kit::stream_after).
struct AclOrder {
  tfl_status record(tfl_stream_st* signal, aclrtEvent* ev) const {
    ENTER_DEVICE(signal->device);
    ACL_CHECK(signal->device, aclrtCreateEventWithFlag(ev, ACL_EVENT_SYNC));
    const aclError e = aclrtRecordEvent(*ev, signal->stream);
    if (e != ACL_SUCCESS) {
      const tfl_status s = fail_acl("aclrtRecordEvent", signal->device, e);
      (void)aclrtDestroyEvent(*ev);
      return s;
    }
    return TFL_OK;
  }
  tfl_status wait(tfl_stream_st* waiter, aclrtEvent ev) const {
    ENTER_DEVICE(waiter->device);
    ACL_CHECK(waiter->device, aclrtStreamWaitEvent(waiter->stream, ev));
    return TFL_OK;
  }
  void destroy(tfl_stream_st* signal, aclrtEvent ev) const {
    // The runtime keeps the event's resources until the queued wait has used them.
    DeviceScope back(signal->device);
    (void)aclrtDestroyEvent(ev);
  }
};

tfl_status stream_after(tfl_stream_st* waiter, tfl_stream_st* signal) {
  return torch_fl::kit::stream_after<aclrtEvent>(waiter, signal, AclOrder{});
}

tfl_status rt_stream_create(tfl_stream* stream, int priority) {
  (void)priority;  // see new_stream: CANN's training parts have no stream priorities
  if (!stream) return fail(TFL_ERROR_INVALID_VALUE, "stream_create: NULL out-parameter");
  READY();
  CURRENT(device);
  tfl_stream_st* st = nullptr;
  if (tfl_status s = new_stream(device, &st)) return s;
  *stream = st;
  return TFL_OK;
}

tfl_status rt_stream_destroy(tfl_stream stream) {
  if (!stream)
    return fail(TFL_ERROR_INVALID_HANDLE, "stream_destroy: the default stream is not destroyed");
  READY();
  {
    ENTER_DEVICE(stream->device);
    // CANN: a stream is drained before aclrtDestroyStream (and its host functions run).
    ACL_CHECK(stream->device, aclrtSynchronizeStream(stream->stream));
    if (stream->subscribed) {
      uint64_t tid = 0;
      if (tfl_status s = reporter_for(stream->device, &tid)) return s;
      ACL_CHECK(stream->device, aclrtUnSubscribeReport(tid, stream->stream));
    }
    ACL_CHECK(stream->device, aclrtDestroyStream(stream->stream));
  }
  delete stream;
  return TFL_OK;
}

tfl_status rt_stream_synchronize(tfl_stream stream) {
  READY();
  RESOLVE(st, stream);
  ENTER_DEVICE(st->device);
  ACL_CHECK(st->device, aclrtSynchronizeStream(st->stream));
  return TFL_OK;
}

tfl_status rt_stream_query(tfl_stream stream) {
  READY();
  RESOLVE(st, stream);
  ENTER_DEVICE(st->device);
  aclrtStreamStatus status = ACL_STREAM_STATUS_RESERVED;
  ACL_CHECK(st->device, aclrtStreamQuery(st->stream, &status));
  if (status == ACL_STREAM_STATUS_COMPLETE) return TFL_OK;
  if (status == ACL_STREAM_STATUS_NOT_READY) return TFL_ERROR_NOT_READY;
  return fail(TFL_ERROR_DEVICE, "aclrtStreamQuery on Ascend NPU " + std::to_string(st->device) +
                                    " returned stream status " +
                                    std::to_string(static_cast<int>(status)));
}

tfl_status rt_stream_wait_event(tfl_stream stream, tfl_event event) {
  if (!event) return fail(TFL_ERROR_INVALID_HANDLE, "stream_wait_event: NULL event");
  READY();
  RESOLVE(st, stream);
  std::lock_guard<std::mutex> lock(event->mutex);
  // An event never recorded has nothing to wait for (CUDA's rule); CANN would wait forever.
  if (!event->recorded) return TFL_OK;
  ENTER_DEVICE(st->device);
  ACL_CHECK(st->device, aclrtStreamWaitEvent(st->stream, event->event),
            "event of NPU " + std::to_string(event->device));
  return TFL_OK;
}

// v1.2: the aclrtStream behind a runtime stream (NULL: `device`'s default stream).
tfl_status rt_native_stream(tfl_stream stream, int device, void** out) {
  if (!out) return fail(TFL_ERROR_INVALID_VALUE, "native_stream: NULL out-parameter");
  if (stream) {
    *out = stream->stream;
    return TFL_OK;
  }
  READY();
  tfl_stream_st* st = nullptr;
  if (tfl_status s = default_stream(device, &st)) return s;
  *out = st->stream;
  return TFL_OK;
}

void forget_default_streams_after_fork() { remake(g_default); }

}  // namespace tfl_aclrt
