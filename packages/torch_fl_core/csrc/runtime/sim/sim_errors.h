// Status names and the per-thread last_error message of the sim runtime.
#pragma once

#include <torch_fl/runtime.h>

#include <stdexcept>
#include <string>

namespace torch_fl::sim {

// Stores a printf-formatted message as this thread's last_error and returns
// `status`, so failures read `return set_error(TFL_ERROR_X, "tfl_call: ...")`.
tfl_status set_error(tfl_status status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

const char* last_error() noexcept;
const char* status_name(tfl_status status) noexcept;

// A known tfl_status value.
bool status_from_int(long value, tfl_status* out) noexcept;

// Accepts "TFL_ERROR_INJECTED", "ERROR_INJECTED", "INJECTED" or a number.
bool status_from_name(const char* text, tfl_status* out) noexcept;

// Thrown from deep inside (e.g. a stream refusing work) where returning a
// status is awkward; entry() turns it into `status` and the message.
class Failure : public std::runtime_error {
 public:
  Failure(tfl_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  tfl_status status() const noexcept { return status_; }

 private:
  tfl_status status_;
};

}  // namespace torch_fl::sim
