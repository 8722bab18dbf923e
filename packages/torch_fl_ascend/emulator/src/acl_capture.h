// Stream capture (aclmdlRICapture*): while a stream captures, its tasks are recorded into a model
// run instance instead of run, and aclmdlRIExecuteAsync runs them again on a stream. The rules
// are the emulator kit's capture engine (emu_kit/capture.h), with CANN's statuses.
//
// Every place that puts work on a stream goes through enqueue(), which records it when the
// stream captures; the calls a capture forbids ask the check_* functions first. A stream that
// does not capture pays one atomic load.
#pragma once

#include <memory>
#include <vector>

#include "acl_state.h"
#include "emu_kit/capture.h"

namespace acl_emu {

// One recorded task, the engine's (emu_kit/capture.h): an event record is kept apart, the event
// recorded again on the launch stream at every execution (pending from then on, as after
// aclrtRecordEvent).
using Node = emu_kit::GraphNode;
using Nodes = std::vector<Node>;

// Puts `item` on `st` or, while `st` captures, records it (`fn` names the call for errors).
// ACL_SUCCESS, or the capture's error (it was invalidated; the item is dropped).
aclError enqueue(const char* fn, const StreamRef& st, emu_kit::WorkItem item);

// Records an event on `st` (aclrtRecordEvent): into its capture, or as the framework does.
aclError record_event(const char* fn, const EventRef& ev, const StreamRef& st);
// aclrtStreamWaitEvent's capture rules; false: an ordinary wait, done by the caller.
bool capture_wait_event(const char* fn, const StreamRef& st, const EventRef& ev, aclError* rc);

// The calls CANN names unsafe while a stream captures (aclrtMemcpy, aclrtMemset, ...), plus
// aclrtMallocHost and aclrtSynchronizeDevice as in CUDA: refused with
// ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT, invalidating them, in the threads the capture mode
// reaches, for captures on `device` (-1: any device).
aclError check_unsafe_call(const char* fn, int32_t device);
// Synchronizing, querying or destroying the capturing stream itself: its tasks are recorded,
// not run (every mode): ACL_ERROR_RT_STREAM_CAPTURED, invalidating the capture.
aclError check_stream_call(const char* fn, const StreamRef& st);
// Synchronizing or querying an event last recorded by an active capture (every mode):
// ACL_ERROR_RT_EVENT_CAPTURED, invalidating the capture.
aclError check_event_call(const char* fn, const EventRef& ev);

// A model run instance made by a capture (its handle exists from aclmdlRICaptureBegin, as
// aclmdlRICaptureGetInfo reports it): its tasks and device once aclmdlRICaptureEnd fixed them.
// ACL_ERROR_INVALID_PARAM for a handle that is not live, ACL_ERROR_RT_MODEL_CAPTURED while it
// is still being captured.
aclError captured_model(const char* fn, aclmdlRI h, std::shared_ptr<const Nodes>* nodes,
                        int32_t* device);
// Releases a handle, with captured_model's errors.
aclError destroy_model(const char* fn, aclmdlRI h);

}  // namespace acl_emu
