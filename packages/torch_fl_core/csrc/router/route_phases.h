// Where a routed call's host time goes: per-phase timestamp counters of the
// unboxed route body, compiled in only by a profiling build
// (-C cmake.define.TORCH_FL_ROUTE_PHASES=ON; benchmarks/route_phases.py reads
// them). Whole-loop timings on a shared GPU host vary more from process to
// process than the router's share of a call; these counters split one call
// into the router's own steps and the target kernel, in one process.
//
// Without the option the timer is an empty object and compiles to nothing.
#pragma once

// The _C target defines it (0 or 1); anything else that includes this header
// gets the default build's empty timer.
#ifndef TORCH_FL_ROUTE_PHASES
#define TORCH_FL_ROUTE_PHASES 0
#endif

#include <array>
#include <cstdint>

#if TORCH_FL_ROUTE_PHASES
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#else
#include <chrono>
#endif
#endif

namespace torch_fl::route_phases {

// In call order. kOther: what is left of the call (scope and mapper
// destructors, the return).
enum Phase : uint8_t { kPick, kScope, kArgs, kKernel, kResults, kOther, kCount };

constexpr bool kEnabled = TORCH_FL_ROUTE_PHASES != 0;

struct Counters {
  std::array<uint64_t, kCount> ticks{};
  uint64_t calls = 0;
};

#if TORCH_FL_ROUTE_PHASES
// This thread's counters (one routed call runs on one thread).
inline thread_local Counters t_counters;

inline uint64_t now() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}

class Timer {
 public:
  Timer() : start_(now()), last_(start_) {}
  ~Timer() {
    const uint64_t t = now();
    Counters& c = t_counters;
    uint64_t named = 0;
    for (int i = 0; i < kOther; ++i) named += marked_[i];
    for (int i = 0; i < kOther; ++i) c.ticks[i] += marked_[i];
    c.ticks[kOther] += (t - start_) - named;
    ++c.calls;
  }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
  // The time since the previous mark (or the start) belongs to `phase`.
  void mark(Phase phase) {
    const uint64_t t = now();
    marked_[phase] += t - last_;
    last_ = t;
  }

 private:
  uint64_t start_;
  uint64_t last_;
  std::array<uint64_t, kCount> marked_{};
};
#else
class Timer {
 public:
  void mark(Phase) {}
};
#endif

// This thread's counters since the last take (and resets them); all zero
// without the option. Ticks are timestamp-counter cycles on x86, steady_clock
// units elsewhere: benchmarks/route_phases.py calibrates them against a clock.
Counters take();
uint64_t ticks_now();

}  // namespace torch_fl::route_phases
