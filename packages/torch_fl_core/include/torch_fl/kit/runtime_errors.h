// A vendor runtime's error record (runtime.h's last_error): the calling
// thread's message for its last failure, and the small text helpers every
// message uses. Plain C++ and runtime.h: a vendor runtime includes it with its
// SDK only.
#pragma once

#include <torch_fl/runtime.h>

#include <cstdio>
#include <string>
#include <utility>

namespace torch_fl::kit {

// This thread's message (one per runtime library: each has its own copy).
inline std::string& thread_error() {
  thread_local std::string message;
  return message;
}

// The table's last_error: "" when the thread has not failed yet.
inline const char* last_error() { return thread_error().c_str(); }

// The table's status_name.
inline const char* status_name(tfl_status status) { return tfl_status_string(status); }

// Records `message` for this thread and returns `status`.
inline tfl_status fail(tfl_status status, std::string message) {
  thread_error() = std::move(message);
  return status;
}

inline std::string pointer_text(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%p", p);
  return buf;
}

}  // namespace torch_fl::kit
