// launch_host_func: aclrtLaunchCallback(ACL_CALLBACK_BLOCK) runs fn on a thread subscribed to
// the stream (aclrtSubscribeReport) that serves aclrtProcessReport; BLOCK holds later work on
// the stream until fn returned, the ordering runtime.h asks for.
#pragma once

#include <torch_fl/runtime.h>

#include <cstdint>

#include "aclrt_stream.h"

namespace tfl_aclrt {

// The report thread of `device` (started on first use).
tfl_status reporter_for(int device, uint64_t* thread_id);
// Subscribes `st` to its device's report thread, once.
tfl_status subscribe(tfl_stream_st* st);

tfl_status rt_launch_host_func(tfl_stream stream, tfl_host_fn fn, void* user_data);

void forget_reporters_after_fork();

}  // namespace tfl_aclrt
