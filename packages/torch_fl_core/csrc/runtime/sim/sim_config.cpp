// The sim runtime's configuration, read once from the environment.
#include "sim_config.h"

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "sim_faults.h"

namespace torch_fl::sim {
namespace {

struct InitState {
  std::once_flag once;
  // Set once the once-body finished (release): every table function passes
  // here, and std::call_once costs thread-local writes and a pthread_once
  // call each time, so the common case reads this flag only.
  std::atomic<bool> done{false};
  tfl_status status = TFL_OK;
  std::string error;
  Config config;
};

// Leaked on purpose (see sim_stream.cpp: nothing global is ever destroyed).
InitState& init_state() {
  static InitState* s = new InitState();
  return *s;
}

tfl_status fail(InitState& s, std::string message) {
  s.error = std::move(message);
  return TFL_ERROR_INVALID_VALUE;
}

tfl_status read_environment(InitState& s) {
  if (const char* text = std::getenv("FLAGOS_SIM_DEVICES"); text != nullptr && *text != '\0') {
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(text, &end, 10);
    if (errno != 0 || *end != '\0' || n < 0 || n > kMaxDevices) {
      return fail(s, std::string("FLAGOS_SIM_DEVICES='") + text + "' is not a device count in 0.." +
                         std::to_string(kMaxDevices));
    }
    s.config.device_count = static_cast<int>(n);
  }
  if (const char* text = std::getenv("FLAGOS_SIM_MEMORY"); text != nullptr && *text != '\0') {
    if (!parse_bytes(text, &s.config.capacity)) {
      return fail(s, std::string("FLAGOS_SIM_MEMORY='") + text +
                         "' is not a byte count (use e.g. 17179869184, 512M, 4G)");
    }
  }
  if (const char* text = std::getenv("FLAGOS_SIM_FAULTS"); text != nullptr && *text != '\0') {
    std::string why;
    if (!add_faults_from_spec(text, &why)) return fail(s, why);
  }
  return TFL_OK;
}

}  // namespace

bool parse_bytes(const char* text, size_t* out) noexcept {
  if (text == nullptr || !std::isdigit(static_cast<unsigned char>(*text))) return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (errno != 0) return false;
  unsigned shift = 0;
  switch (std::toupper(static_cast<unsigned char>(*end))) {
    case 'K':
      shift = 10;
      ++end;
      break;
    case 'M':
      shift = 20;
      ++end;
      break;
    case 'G':
      shift = 30;
      ++end;
      break;
    case 'T':
      shift = 40;
      ++end;
      break;
    default:
      break;
  }
  if (shift != 0 && (*end == 'i' || *end == 'I')) ++end;  // "4GiB"
  if (*end == 'B' || *end == 'b') ++end;                  // "4GB", "4096B"
  if (*end != '\0') return false;
  const unsigned long long limit = static_cast<unsigned long long>(SIZE_MAX) >> shift;
  if (value > limit) return false;
  *out = static_cast<size_t>(value << shift);
  return true;
}

tfl_status ensure_initialized() noexcept {
  InitState& s = init_state();
  if (s.done.load(std::memory_order_acquire)) return s.status;
  try {
    std::call_once(s.once, [&] {
      s.status = read_environment(s);
      s.done.store(true, std::memory_order_release);
    });
  } catch (...) {
    return TFL_ERROR_NOT_INITIALIZED;
  }
  return s.status;
}

const char* init_error() noexcept { return init_state().error.c_str(); }

const Config& config() noexcept { return init_state().config; }

}  // namespace torch_fl::sim
