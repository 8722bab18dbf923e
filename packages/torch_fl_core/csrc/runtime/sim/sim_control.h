// The sim runtime's test-only control API: extra exported C symbols beside
// tfl_runtime_get, used by tests through ctypes (torch_fl/runtimes/sim.py).
// Not part of runtime.h on purpose: no vendor runtime has these.
#pragma once

#include <stdint.h>

#define TFL_SIM_EXPORT __attribute__((visibility("default")))

#ifdef __cplusplus
extern "C" {
#endif

// The nth (1-based, counted from now) future call of `call` (a tfl_runtime_v1
// field name: "malloc", "memcpy_async", ...) fails with `status` and does
// nothing else. Returns 0, or nonzero for an unknown call, nth < 1 or a
// status that is not a tfl_status error.
TFL_SIM_EXPORT int tfl_sim_inject_fault(const char* call, int nth, int status);
TFL_SIM_EXPORT void tfl_sim_clear_faults(void);
// Invocations of `call` since the library was loaded, failed ones included.
TFL_SIM_EXPORT uint64_t tfl_sim_call_count(const char* call);
// Live allocations / bytes on `device` (-1: pinned host memory).
TFL_SIM_EXPORT uint64_t tfl_sim_live_allocations(int device);
TFL_SIM_EXPORT uint64_t tfl_sim_live_bytes(int device);

#ifdef __cplusplus
}  // extern "C"
#endif
