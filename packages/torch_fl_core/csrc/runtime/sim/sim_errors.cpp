// Status names and the per-thread last_error message of the sim runtime.
#include "sim_errors.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace torch_fl::sim {
namespace {

// One message per thread, as runtime.h asks: a failure on one thread never
// overwrites the explanation another thread is about to read.
thread_local std::string t_last_error;

struct StatusEntry {
  tfl_status status;
  const char* name;
};

constexpr StatusEntry kStatuses[] = {
    {TFL_OK, "TFL_OK"},
    {TFL_ERROR_INVALID_VALUE, "TFL_ERROR_INVALID_VALUE"},
    {TFL_ERROR_INVALID_DEVICE, "TFL_ERROR_INVALID_DEVICE"},
    {TFL_ERROR_OUT_OF_MEMORY, "TFL_ERROR_OUT_OF_MEMORY"},
    {TFL_ERROR_INVALID_POINTER, "TFL_ERROR_INVALID_POINTER"},
    {TFL_ERROR_INVALID_MEMCPY_KIND, "TFL_ERROR_INVALID_MEMCPY_KIND"},
    {TFL_ERROR_NOT_READY, "TFL_ERROR_NOT_READY"},
    {TFL_ERROR_NOT_SUPPORTED, "TFL_ERROR_NOT_SUPPORTED"},
    {TFL_ERROR_INVALID_HANDLE, "TFL_ERROR_INVALID_HANDLE"},
    {TFL_ERROR_NOT_INITIALIZED, "TFL_ERROR_NOT_INITIALIZED"},
    {TFL_ERROR_DEVICE, "TFL_ERROR_DEVICE"},
    {TFL_ERROR_INJECTED, "TFL_ERROR_INJECTED"},
    {TFL_ERROR_CAPTURE, "TFL_ERROR_CAPTURE"},
    {TFL_ERROR_TIMEOUT, "TFL_ERROR_TIMEOUT"},
    {TFL_ERROR_ABORTED, "TFL_ERROR_ABORTED"},
};

}  // namespace

tfl_status set_error(tfl_status status, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  const int len = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  try {
    if (len < 0) {
      t_last_error = fmt;  // unformattable: the format still names the call
    } else {
      std::string msg(static_cast<size_t>(len) + 1, '\0');
      std::vsnprintf(msg.data(), msg.size(), fmt, args);
      msg.resize(static_cast<size_t>(len));
      t_last_error = std::move(msg);
    }
  } catch (...) {
    // Out of memory while describing a failure: keep the status, lose the text.
  }
  va_end(args);
  return status;
}

const char* last_error() noexcept { return t_last_error.c_str(); }

const char* status_name(tfl_status status) noexcept {
  for (const auto& entry : kStatuses) {
    if (entry.status == status) return entry.name;
  }
  return "TFL_UNKNOWN_STATUS";
}

bool status_from_int(long value, tfl_status* out) noexcept {
  for (const auto& entry : kStatuses) {
    if (entry.status == value) {
      *out = entry.status;
      return true;
    }
  }
  return false;
}

bool status_from_name(const char* text, tfl_status* out) noexcept {
  if (text == nullptr || *text == '\0') return false;
  char* end = nullptr;
  const long number = std::strtol(text, &end, 10);
  if (*end == '\0') return status_from_int(number, out);
  for (const auto& entry : kStatuses) {
    const std::string full = entry.name;
    if (full == text || full == std::string("TFL_") + text ||
        full == std::string("TFL_ERROR_") + text) {
      *out = entry.status;
      return true;
    }
  }
  return false;
}

}  // namespace torch_fl::sim
