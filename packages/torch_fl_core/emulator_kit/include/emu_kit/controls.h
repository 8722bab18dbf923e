// The test controls every emulator exports under its SDK's prefix, with one signature each (its
// control header declares them):
//   int         <P>EmuInjectFault(const char* call, int nth, int status)
//                 the nth call of `call` from now returns `status` and does nothing else;
//                 0, or -1 for a name outside the SDK, nth < 1 or status 0
//   void        <P>EmuClearFaults(void)
//   void        <P>EmuReset(void)          faults, call counters, violations
//   uint64_t    <P>EmuCallCount(const char* call)     calls since load or the last reset
//   uint64_t    <P>EmuViolationCount(void)            contract violations detected
//   const char* <P>EmuLastViolation(void)             "" when none
//   uint64_t    <P>EmuLiveAllocations(int device), <P>EmuLiveBytes(int device)
// EMU_KIT_CONTROLS(P, ledger, memory) defines them: `ledger` an expression naming the
// emu_kit::Ledger, `memory` a function int -> emu_kit::DeviceMemory (zero for no such device).
#pragma once

#include <cstdint>

#include "emu_kit/ledger.h"
#include "emu_kit/memory.h"

#define EMU_KIT_EXPORT extern "C" __attribute__((visibility("default")))

#define EMU_KIT_CONTROLS(P, ledger, memory)                                                  \
  EMU_KIT_EXPORT int P##EmuInjectFault(const char* call, int nth, int status) {              \
    return (ledger).inject(call, nth, status) ? 0 : -1;                                      \
  }                                                                                          \
  EMU_KIT_EXPORT void P##EmuClearFaults(void) { (ledger).clear_faults(); }                   \
  EMU_KIT_EXPORT void P##EmuReset(void) { (ledger).reset(); }                                \
  EMU_KIT_EXPORT uint64_t P##EmuCallCount(const char* call) { return (ledger).calls(call); } \
  EMU_KIT_EXPORT uint64_t P##EmuViolationCount(void) { return (ledger).violations(); }       \
  EMU_KIT_EXPORT const char* P##EmuLastViolation(void) { return (ledger).last_violation(); } \
  EMU_KIT_EXPORT uint64_t P##EmuLiveAllocations(int device) { return memory(device).live; }  \
  EMU_KIT_EXPORT uint64_t P##EmuLiveBytes(int device) { return memory(device).used; }
