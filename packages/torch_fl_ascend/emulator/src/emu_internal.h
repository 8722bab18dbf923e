// Emulator internals shared by libascendcl.so, libnnopbase.so and libopapi.so (not CANN API).
// Stable: the op libraries code against it.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "acl/acl.h"

extern "C" {
// Nonzero once aclInit succeeded (and aclFinalize has not run).
int aclEmuInternalInitialized(void);

// The calling thread's current device (aclrtSetDevice); -1 when none was set.
int32_t aclEmuInternalCurrentDevice(void);

// Resolves [ptr, ptr + bytes) against `device`, the way an NPU kernel would: the host address
// backing it, or nullptr unless the whole range lies inside ONE live allocation of that
// device. bytes == 0 still needs ptr inside (or at the end of) a live allocation.
void* aclEmuInternalResolve(int32_t device, const void* ptr, size_t bytes);

// The device owning a live allocation that contains [ptr, ptr + bytes); -1 when none does
// (for error messages: "pointer of device 1 used on device 0").
int32_t aclEmuInternalPointerDevice(const void* ptr, size_t bytes);

// The device of a stream (NULL: the calling thread's current device's default stream);
// -1 for an unknown / destroyed stream or no current device.
int32_t aclEmuInternalStreamDevice(aclrtStream stream);

// Work run on a stream's worker thread, in stream order. Returns ACL_SUCCESS or a failure
// status; on failure it may write a NUL-terminated message into msg (msgLen bytes). A failure
// becomes the stream's asynchronous error: returned (with the message made the syncing
// thread's aclGetRecentErrMsg) by the next aclrtSynchronizeStream / aclrtSynchronizeDevice /
// aclrtSynchronizeEvent that waits on it.
typedef aclError (*aclEmuWorkFn)(void* arg, char* msg, size_t msgLen);
// Called exactly once per enqueued item after it ran or was skipped (free arg here).
typedef void (*aclEmuCleanupFn)(void* arg);

typedef struct aclEmuRange {
  const void* ptr;
  size_t bytes;
} aclEmuRange;

// Queues fn(arg) on `stream` (NULL: current device's default stream). `ranges` lists the
// device memory the work reads or writes (workspace included); each must lie in one live
// allocation of the stream's device, else ACL_ERROR_INVALID_PARAM and nothing is queued
// (cleanup is still called). While queued, those allocations stay backed: an aclrtFree of one
// is a contract violation (aclEmuViolationCount), the work is skipped and fails with
// ACL_ERROR_RT_AICORE_EXCEPTION, surfaced at the next sync. `name` labels messages.
aclError aclEmuInternalEnqueue(aclrtStream stream, const char* name, aclEmuWorkFn fn, void* arg,
                               aclEmuCleanupFn cleanup, const aclEmuRange* ranges, size_t nRanges);

// Fault injection and call counting for every emulated entry point: counts the call of
// `name` and returns the injected status (0 when none is armed).
int aclEmuInternalEnter(const char* name);

// Makes msg the calling thread's aclGetRecentErrMsg.
void aclEmuInternalSetErrMsg(const char* msg);

// Records a contract violation detected by an op library (counted, last message kept).
void aclEmuInternalViolation(const char* msg);
}
