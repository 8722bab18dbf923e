/*
 * Controls of the torch-fl TopsRider emulator. NOT part of the SDK: tests call
 * these (through ctypes) to inject faults, count calls and model a second
 * producer (Triton) on a stream. Product code never includes this header.
 *
 * Environment read at first use:
 *   TOPS_EMU_DEVICE_COUNT   number of emulated cards (default 2, 0 = "no device")
 *   TOPS_EMU_MEMORY_MB      memory per card in MiB (default 4096)
 */
#ifndef TOPS_EMULATOR_H_
#define TOPS_EMULATOR_H_

#include <stddef.h>
#include <stdint.h>

#include "tops_runtime_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The nth call (1 = the next one) of `call` (a topsrt or topsaten function
 * name such as "topsMalloc" or "topsatenAdd") from now returns `status`
 * (a topsError_t for topsrt, a topsatenStatus_t for topsaten) and does
 * nothing else; faults add up. Returns 0, or -1 for a name outside the SDK,
 * nth < 1 or status 0. */
int topsEmuInjectFault(const char* call, int nth, int status);
/* Drops every injected fault. */
void topsEmuClearFaults(void);
/* Clears injected faults, call counters and the violation record. */
void topsEmuReset(void);
/* Calls of `call` since load (or the last topsEmuReset), failed ones included. */
uint64_t topsEmuCallCount(const char* call);
/* Contract violations detected, and the latest one's message ("" when none). */
uint64_t topsEmuViolationCount(void);
const char* topsEmuLastViolation(void);
/* Live device allocations / bytes on a card. */
uint64_t topsEmuLiveAllocations(int device);
uint64_t topsEmuLiveBytes(int device);

/* A second producer on `stream` (NULL: the current card's default stream),
 * the way a Triton kernel is queued: copies `bytes` host bytes (read now) to
 * the device pointer `dst` when the stream is drained. Like the S60, work of
 * the SDK's own producers (topsaten ops, topsMemcpy*, topsMemset*) submitted
 * afterwards is NOT ordered behind it: it runs ahead and reads the old bytes.
 * Only topsStreamSynchronize / topsDeviceSynchronize / topsEventSynchronize /
 * topsStreamWaitEvent on an event recorded after it (and topsStreamQuery,
 * which makes progress) drain it. */
topsError_t topsEmuLaunchForeign(topsStream_t stream, void* dst, const void* host_src,
                                 size_t bytes);
/* Foreign work items queued and not yet drained on all streams of a card. */
uint64_t topsEmuPendingForeign(int device);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TOPS_EMULATOR_H_ */
