// Host functions: aclrtLaunchCallback(ACL_CALLBACK_BLOCK) runs fn on a thread subscribed to the
// stream (aclrtSubscribeReport) that serves aclrtProcessReport; BLOCK holds later work on the
// stream until fn returned.
#pragma once

#include <acl/acl.h>

namespace tfl_aclrt {

// fn(user_data) on `stream` (of the current NPU), the stream subscribed to its NPU's report
// thread first. On failure *call names the CANN call that failed.
aclError launch_callback(aclrtStream stream, aclrtCallback fn, void* user_data, const char** call);
// Ends the stream's subscription, if it has one (before aclrtDestroyStream; current NPU).
aclError unsubscribe(aclrtStream stream, const char** call);

// A forked child has none of the parent's report threads.
void forget_reporters_after_fork();

}  // namespace tfl_aclrt
