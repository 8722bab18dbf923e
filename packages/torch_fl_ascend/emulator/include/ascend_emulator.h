/*
 * Controls of the torch-fl CANN emulator. NOT part of CANN: the emulator's tests call these
 * (through ctypes) to inject faults, count calls and read contract violations. Product code
 * never includes this header.
 *
 * Environment read at aclInit:
 *   ASCEND_EMU_DEVICES     number of emulated NPUs (default 2; 0 = "no device")
 *   ASCEND_EMU_MEMORY_MB   HBM per NPU in MiB (default 4096)
 */
#ifndef ASCEND_EMULATOR_H_
#define ASCEND_EMULATOR_H_

#include <stddef.h>
#include <stdint.h>

#include "acl/acl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The nth call (1 = the next one) of `name` (an acl / aclrt / aclnn / aclCreate* function name
 * such as "aclrtMalloc" or "aclnnAdd") from now returns `status` (an aclError for the runtime, an
 * aclnnStatus for the op libraries) and does nothing else; faults add up. Returns 0, or -1 for a
 * name outside the toolkit, nth < 1 or status 0. */
int aclEmuInjectFault(const char* name, int nth, int status);
/* Drops every injected fault. */
void aclEmuClearFaults(void);
/* Calls of `name` since load (or the last aclEmuReset), failed ones included. */
uint64_t aclEmuCallCount(const char* name);
/* Contract violations detected (e.g. aclrtFree of memory that queued work still uses). */
uint64_t aclEmuViolationCount(void);
/* The message of the latest violation ("" when none); valid until the next violation. */
const char* aclEmuLastViolation(void);
/* Clears injected faults, call counters and the violation record (not allocations). */
void aclEmuReset(void);
/* Live device allocations / their bytes on a device. */
uint64_t aclEmuLiveAllocations(int32_t deviceId);
uint64_t aclEmuLiveBytes(int32_t deviceId);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ASCEND_EMULATOR_H_ */
