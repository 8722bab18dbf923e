// Test-only fault injection and per-call invocation counters.
#pragma once

#include <torch_fl/runtime.h>

#include <cstdint>
#include <string>

namespace torch_fl::sim {

// Every tfl_status-returning function of the runtime table, named as in
// tfl_runtime_v1 (the names tests pass to tfl_sim_inject_fault), from the
// header's one list of the table.
#define TFL_SIM_CALL_1(name) name,
#define TFL_SIM_CALL_0(name)
#define TFL_SIM_CALL(name, minor, returns_status) TFL_SIM_CALL_##returns_status(name)
enum class Call : int {
  TFL_RUNTIME_V1_FUNCTIONS(TFL_SIM_CALL) kCount,
};

const char* call_name(Call call) noexcept;
bool call_from_name(const char* name, Call* out) noexcept;

// Counts one invocation of `call`; returns the status of a fault injected for
// exactly this invocation, or TFL_OK when there is none.
tfl_status count_call(Call call) noexcept;
uint64_t call_count(Call call) noexcept;

// The nth (1-based) invocation of `call` from now fails with `status`.
bool add_fault(Call call, uint64_t nth, tfl_status status) noexcept;
void clear_faults() noexcept;

// Parses FLAGOS_SIM_FAULTS syntax, "malloc:3,memcpy_async:1[:STATUS]", and
// injects each entry; on a syntax error returns false with `error` set.
bool add_faults_from_spec(const std::string& spec, std::string* error);

}  // namespace torch_fl::sim
