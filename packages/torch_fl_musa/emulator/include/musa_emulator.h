/*
 * Controls of the torch-fl MUSA emulator. NOT part of the SDK: tests call
 * these (through ctypes) to inject faults, count calls and read the contract
 * violations the emulator detected. Product code never includes this header.
 *
 * Environment read at first use:
 *   MUSA_EMU_DEVICE_COUNT   number of emulated GPUs (default 2, 0 = "no device")
 *   MUSA_EMU_MEMORY_MB      memory per GPU in MiB (default 4096)
 */
#ifndef MUSA_EMULATOR_H_
#define MUSA_EMULATOR_H_

#include <stddef.h>
#include <stdint.h>

#include "musa_runtime_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The nth call (1 = the next one) of `call` (a MUSA runtime function such as
 * "musaMalloc", or a muDNN operator's Run such as "Binary::Run") from now
 * returns `status` (a musaError_t for the runtime, a musa::dnn::Status for
 * muDNN) and does nothing else; faults add up. Returns 0, or -1 for a name
 * outside the SDK, nth < 1 or status 0. */
int musaEmuInjectFault(const char* call, int nth, int status);
/* Drops every injected fault. */
void musaEmuClearFaults(void);
/* Clears injected faults, call counters and the violation record. */
void musaEmuReset(void);
/* Calls of `call` since load (or the last musaEmuReset), failed ones included. */
uint64_t musaEmuCallCount(const char* call);
/* Contract violations detected, and the latest one's message ("" when none). */
uint64_t musaEmuViolationCount(void);
const char* musaEmuLastViolation(void);
/* Live device allocations / bytes on a GPU. */
uint64_t musaEmuLiveAllocations(int device);
uint64_t musaEmuLiveBytes(int device);

/* Holds `stream` (NULL: the current GPU's default stream): work queued on it from now on waits
 * until musaEmuReleaseStream(stream), so that a test sees work not yet done (musaStreamQuery
 * answers musaErrorNotReady) or frees memory that queued work still uses. Release it before
 * synchronising or destroying it. musaErrorInvalidValue when it is already held (hold) or not
 * held (release), musaErrorInvalidResourceHandle for an unknown stream. */
musaError_t musaEmuHoldStream(musaStream_t stream);
musaError_t musaEmuReleaseStream(musaStream_t stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MUSA_EMULATOR_H_ */
