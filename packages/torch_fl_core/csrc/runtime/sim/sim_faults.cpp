// Test-only fault injection and per-call invocation counters.
//
// Tests (and subprocesses via FLAGOS_SIM_FAULTS) make the nth future call of a
// table function fail with a chosen status, to prove that core turns every
// runtime failure into a clean PyTorch error and leaks nothing.
#include "sim_faults.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "sim_config.h"
#include "sim_control.h"
#include "sim_errors.h"

namespace torch_fl::sim {
namespace {

constexpr int kCallCount = static_cast<int>(Call::kCount);

#define TFL_SIM_CALL_NAME_1(name) #name,
#define TFL_SIM_CALL_NAME_0(name)
#define TFL_SIM_CALL_NAME(name, minor, returns_status) TFL_SIM_CALL_NAME_##returns_status(name)
constexpr const char* kCallNames[kCallCount] = {TFL_RUNTIME_V1_FUNCTIONS(TFL_SIM_CALL_NAME)};
#undef TFL_SIM_CALL_NAME

struct Fault {
  Call call;
  uint64_t at;  // the value of the call's counter that fails
  tfl_status status;
};

struct FaultState {
  std::array<std::atomic<uint64_t>, kCallCount> counts{};
  // Lets every call skip the mutex while no fault is pending (the usual case).
  std::atomic<size_t> pending{0};
  std::mutex mutex;
  std::vector<Fault> faults;
};

// Leaked on purpose: worker threads may still run calls during static
// destruction at process exit.
FaultState& state() {
  static FaultState* s = new FaultState();
  return *s;
}

size_t index(Call call) { return static_cast<size_t>(call); }

}  // namespace

const char* call_name(Call call) noexcept {
  const int i = static_cast<int>(call);
  return (i >= 0 && i < kCallCount) ? kCallNames[i] : "unknown";
}

bool call_from_name(const char* name, Call* out) noexcept {
  if (name == nullptr) return false;
  // Accept "tfl_malloc" too, the spelling error messages use.
  if (std::strncmp(name, "tfl_", 4) == 0) name += 4;
  for (int i = 0; i < kCallCount; ++i) {
    if (std::strcmp(name, kCallNames[i]) == 0) {
      *out = static_cast<Call>(i);
      return true;
    }
  }
  return false;
}

tfl_status count_call(Call call) noexcept {
  FaultState& s = state();
  const uint64_t n = s.counts[index(call)].fetch_add(1) + 1;
  if (s.pending.load(std::memory_order_acquire) == 0) return TFL_OK;
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = std::find_if(s.faults.begin(), s.faults.end(),
                         [&](const Fault& f) { return f.call == call && f.at == n; });
  if (it == s.faults.end()) return TFL_OK;
  const tfl_status status = it->status;
  s.faults.erase(it);
  s.pending.fetch_sub(1, std::memory_order_release);
  return status;
}

uint64_t call_count(Call call) noexcept { return state().counts[index(call)].load(); }

bool add_fault(Call call, uint64_t nth, tfl_status status) noexcept {
  if (nth < 1 || status == TFL_OK) return false;
  FaultState& s = state();
  try {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.faults.push_back(Fault{call, s.counts[index(call)].load() + nth, status});
    s.pending.fetch_add(1, std::memory_order_release);
  } catch (...) {
    return false;
  }
  return true;
}

void clear_faults() noexcept {
  FaultState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.faults.clear();
  s.pending.store(0, std::memory_order_release);
}

bool add_faults_from_spec(const std::string& spec, std::string* error) {
  size_t start = 0;
  while (start <= spec.size()) {
    size_t end = spec.find(',', start);
    if (end == std::string::npos) end = spec.size();
    const std::string item = spec.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    // name:nth[:status]
    const size_t c1 = item.find(':');
    const size_t c2 = c1 == std::string::npos ? std::string::npos : item.find(':', c1 + 1);
    const std::string name = item.substr(0, c1);
    const std::string nth_text =
        c1 == std::string::npos
            ? "1"
            : item.substr(c1 + 1, c2 == std::string::npos ? std::string::npos : c2 - c1 - 1);
    const std::string status_text =
        c2 == std::string::npos ? "TFL_ERROR_INJECTED" : item.substr(c2 + 1);
    Call call;
    if (!call_from_name(name.c_str(), &call)) {
      *error = "unknown call '" + name + "' in FLAGOS_SIM_FAULTS entry '" + item + "'";
      return false;
    }
    char* num_end = nullptr;
    const unsigned long long nth = std::strtoull(nth_text.c_str(), &num_end, 10);
    if (nth_text.empty() || *num_end != '\0' || nth < 1) {
      *error = "bad count '" + nth_text + "' in FLAGOS_SIM_FAULTS entry '" + item + "' (want >= 1)";
      return false;
    }
    tfl_status status;
    if (!status_from_name(status_text.c_str(), &status) || status == TFL_OK) {
      *error = "bad status '" + status_text + "' in FLAGOS_SIM_FAULTS entry '" + item + "'";
      return false;
    }
    add_fault(call, nth, status);
    if (end == spec.size()) break;
  }
  return true;
}

}  // namespace torch_fl::sim

// ---- exported test-only control API (sim_control.h) ------------------------

using namespace torch_fl::sim;

extern "C" TFL_SIM_EXPORT int tfl_sim_inject_fault(const char* call, int nth, int status) {
  // Apply FLAGOS_SIM_FAULTS first so both kinds of faults count from the same point.
  ensure_initialized();
  Call c;
  tfl_status st;
  if (!call_from_name(call, &c)) return 1;
  if (nth < 1) return 2;
  if (!status_from_int(status, &st) || st == TFL_OK) return 3;
  return add_fault(c, static_cast<uint64_t>(nth), st) ? 0 : 4;
}

extern "C" TFL_SIM_EXPORT void tfl_sim_clear_faults(void) {
  ensure_initialized();
  clear_faults();
}

extern "C" TFL_SIM_EXPORT uint64_t tfl_sim_call_count(const char* call) {
  Call c;
  return call_from_name(call, &c) ? call_count(c) : 0;
}
