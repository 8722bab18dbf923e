// Streams: a tfl_stream is an aclrtStream with the NPU it belongs to (current when it was
// created, and when it is used). The default stream of each NPU is a created stream rather than
// CANN's NULL stream, so it can be subscribed for host functions and ordered like any other.
#pragma once

#include <acl/acl.h>
#include <torch_fl/runtime.h>

#include <mutex>

struct tfl_stream_st {
  aclrtStream stream;
  int device;
  std::mutex subscribe_mutex;
  bool subscribed = false;  // to its device's report thread (first launch_host_func)
};

namespace tfl_aclrt {

tfl_status new_stream(int device, tfl_stream_st** out);
tfl_status default_stream(int device, tfl_stream_st** out);
// Sizes the default streams for `count` NPUs (at initialisation).
void reset_default_streams(int count);
// NULL -> the current device's default stream.
tfl_status resolve(tfl_stream s, tfl_stream_st** out);
// Makes `waiter` wait for the work queued so far on `signal`.
tfl_status stream_after(tfl_stream_st* waiter, tfl_stream_st* signal);

#define RESOLVE(var, s)         \
  tfl_stream_st* var = nullptr; \
  if (tfl_status _rs = resolve((s), &var)) return _rs

tfl_status rt_stream_create(tfl_stream* stream, int priority);
tfl_status rt_stream_destroy(tfl_stream stream);
tfl_status rt_stream_synchronize(tfl_stream stream);
tfl_status rt_stream_query(tfl_stream stream);
tfl_status rt_stream_wait_event(tfl_stream stream, tfl_event event);
tfl_status rt_native_stream(tfl_stream stream, int device, void** out);

void forget_default_streams_after_fork();

}  // namespace tfl_aclrt
