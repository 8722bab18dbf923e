// Test-only fault injection and per-call invocation counters.
#pragma once

#include <torch_fl/runtime.h>

#include <cstdint>
#include <string>

namespace torch_fl::sim {

// Every tfl_status-returning function of the runtime table, named as in
// tfl_runtime_v1 (the names tests pass to tfl_sim_inject_fault).
enum class Call : int {
  init,
  device_count,
  get_device,
  set_device,
  device_synchronize,
  mem_get_info,
  device_name,
  malloc,
  free,
  host_malloc,
  host_free,
  pointer_info,
  memcpy,
  memcpy_async,
  memcpy_peer_async,
  memset_async,
  stream_create,
  stream_destroy,
  stream_synchronize,
  stream_query,
  stream_wait_event,
  launch_host_func,
  event_create,
  event_destroy,
  event_record,
  event_synchronize,
  event_query,
  event_elapsed_ms,
  kCount,
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
