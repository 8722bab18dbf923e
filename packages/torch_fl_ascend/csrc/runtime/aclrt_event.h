// Events. A CANN event lives in its device's context (re-created when recorded on another
// device's stream); one never recorded has nothing to wait for (CUDA's rule; CANN would wait
// forever). aclrtQueryEventStatus reports NOT_READY=0 / COMPLETE=1, the opposite polarity of
// aclrtStreamQuery: each is compared with its own enum's names.
#pragma once

#include <acl/acl.h>
#include <torch_fl/runtime.h>

#include <cstdint>
#include <mutex>

struct tfl_event_st {
  std::mutex mutex;
  aclrtEvent event;
  int device;  // where `event` was created: the device of the stream it was last recorded on
  uint32_t flags;
  bool recorded = false;
};

namespace tfl_aclrt {

tfl_status rt_event_create(tfl_event* event, uint32_t flags);
tfl_status rt_event_destroy(tfl_event event);
tfl_status rt_event_record(tfl_event event, tfl_stream stream);
tfl_status rt_event_synchronize(tfl_event event);
tfl_status rt_event_query(tfl_event event);
tfl_status rt_event_elapsed_ms(float* ms, tfl_event start, tfl_event end);

}  // namespace tfl_aclrt
